//! A rate from a byte counter that somebody else writes: the spine's
//! counters in COUNTERS_DB (syncd writes them every flex counter period),
//! a node_exporter's (the kernel's, as of the scrape). The reader polls
//! on a clock of its own, so with reader and writer at about the same
//! period a poll sees 0, 1 or 2 writes, and bytes over the reader's
//! interval read as 0, then twice the rate.
//!
//! So the rate is taken over the times the counter was *seen to change*:
//! a poll that finds it as it was sees no write and gives no rate; the
//! next one that finds it moved gives the bytes since the previous change
//! over the time since then. Each end lags its write by less than one
//! poll, so the error is a poll over the interval rated, not a whole
//! write.
//!
//! A counter can also stand still because nothing is sent. Once it has
//! not moved for [`IDLE_PERIODS`] of the writer's period as seen (the
//! EWMA of the intervals between changes in a row), it rates 0.

/// How many of the writer's periods without a change make a path idle.
pub const IDLE_PERIODS: u64 = 3;

/// What one poll of the counter gave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Poll {
    /// The first value, or the first after the counter went back (its
    /// writer restarted): nothing to rate it against yet.
    Primed,
    /// The counter is as the previous change left it, for less than the
    /// idle bound: no write since, nothing new to read.
    NoWrite,
    /// Bytes per second since the previous change (0 when idle).
    Rate(u64),
}

/// One counter's changes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CounterRate {
    /// The value and when a poll first found it.
    changed: Option<(u64, u64)>,
    /// The EWMA of the intervals between changes in a row, microseconds.
    period_us: Option<u64>,
    /// Whether the last rate was an idle 0, so the interval up to the next
    /// change is not a writer's period.
    idle: bool,
}

impl CounterRate {
    /// Takes a poll that read `value` at `at_us` (microseconds, on a clock
    /// that only goes forward); `poll_interval_us` is how often the reader
    /// polls, the least the idle bound can be.
    pub fn poll(&mut self, at_us: u64, value: u64, poll_interval_us: u64) -> Poll {
        let Some((before, then)) = self.changed else {
            self.changed = Some((value, at_us));
            return Poll::Primed;
        };
        if value < before {
            *self = Self {
                changed: Some((value, at_us)),
                ..Self::default()
            };
            return Poll::Primed;
        }
        let since = at_us.saturating_sub(then);
        if value == before {
            let period = self.period_us.unwrap_or(0).max(poll_interval_us);
            if since < IDLE_PERIODS * period {
                return Poll::NoWrite;
            }
            self.changed = Some((value, at_us));
            self.idle = true;
            return Poll::Rate(0);
        }
        if since == 0 {
            // Two polls at one instant: the clock cannot rate it.
            return Poll::NoWrite;
        }
        if !self.idle {
            // An eighth of the way per change: the period is a property of
            // the writer, and one late write must not stretch it.
            self.period_us = Some(match self.period_us {
                None => since,
                Some(p) if since >= p => p + (since - p) / 8,
                Some(p) => p - (p - since) / 8,
            });
        }
        self.idle = false;
        self.changed = Some((value, at_us));
        let rate = u128::from(value - before) * 1_000_000 / u128::from(since);
        Poll::Rate(rate.min(u128::from(u64::MAX)) as u64)
    }

    /// The writer's period as seen, microseconds; `None` before two
    /// changes in a row.
    pub fn period_us(&self) -> Option<u64> {
        self.period_us
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer every 10 ms read every 10 ms, the reads 0.5 ms after the
    /// writes but with one write 1 ms late: the reader's interval holds 0,
    /// then 2 writes; the rate over the changes stays the writer's.
    #[test]
    fn a_poll_that_finds_no_write_gives_no_rate() {
        let mut counter = CounterRate::default();
        let polls = [
            (500, 0),
            (10_500, 10_000),
            (20_500, 10_000),
            (30_500, 30_000),
            (40_500, 40_000),
        ];
        let got: Vec<Poll> = polls
            .iter()
            .map(|&(at, value)| counter.poll(at, value, 10_000))
            .collect();
        assert_eq!(
            got,
            [
                Poll::Primed,
                Poll::Rate(1_000_000),
                Poll::NoWrite,
                Poll::Rate(1_000_000),
                Poll::Rate(1_000_000),
            ]
        );
        // 10 ms, then the 20 ms that held no write an eighth in, then 10 ms.
        assert_eq!(counter.period_us(), Some(11_250 - 1_250 / 8));
    }

    /// A counter that stops for three of its writer's periods is idle, and
    /// rates 0 once per idle bound; traffic that resumes is rated over the
    /// time since the idle mark, and does not count as a period.
    #[test]
    fn a_counter_that_stands_still_for_three_periods_is_idle() {
        let mut counter = CounterRate::default();
        assert_eq!(counter.poll(0, 0, 5_000), Poll::Primed);
        assert_eq!(counter.poll(20_000, 100, 5_000), Poll::Rate(5_000));
        assert_eq!(counter.period_us(), Some(20_000));
        for at in [30_000, 40_000, 50_000, 70_000] {
            assert_eq!(counter.poll(at, 100, 5_000), Poll::NoWrite, "at {at}");
        }
        assert_eq!(counter.poll(80_000, 100, 5_000), Poll::Rate(0));
        assert_eq!(counter.poll(100_000, 100, 5_000), Poll::NoWrite);
        assert_eq!(counter.poll(140_000, 100, 5_000), Poll::Rate(0));
        assert_eq!(counter.poll(150_000, 200, 5_000), Poll::Rate(10_000));
        assert_eq!(counter.period_us(), Some(20_000), "no period across idle");
    }

    /// With no period seen yet, the reader's own interval bounds the wait.
    #[test]
    fn the_poll_interval_is_the_least_idle_bound() {
        let mut counter = CounterRate::default();
        counter.poll(0, 7, 10_000);
        assert_eq!(counter.poll(29_999, 7, 10_000), Poll::NoWrite);
        assert_eq!(counter.poll(30_000, 7, 10_000), Poll::Rate(0));
    }

    /// A counter that goes back was reset by a restarted writer: primed
    /// again, its old period forgotten.
    #[test]
    fn a_counter_that_goes_back_primes_again() {
        let mut counter = CounterRate::default();
        counter.poll(0, 1_000, 10_000);
        counter.poll(10_000, 2_000, 10_000);
        assert_eq!(counter.poll(20_000, 5, 10_000), Poll::Primed);
        assert_eq!(counter.period_us(), None);
        assert_eq!(counter.poll(30_000, 1_005, 10_000), Poll::Rate(100_000));
        assert_eq!(counter.poll(30_000, 2_005, 10_000), Poll::NoWrite);
    }
}
