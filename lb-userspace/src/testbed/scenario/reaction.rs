//! How fast the leaf reacts when a spine slows down mid-run: from the
//! moment `tc` is told the new rate, to the first sample of the leaf's
//! path-quality map that shows the spine worse than the default, and to
//! the end of the first 20 ms in which the spine carried at most half the
//! share of the leaf's bytes it carried before, if it also did from there
//! to the end of the watch (a lull of a run without telemetry is not a
//! shift).

use std::time::{Duration, Instant};

use anyhow::Result;
use lb_common::select::flowlet::PATH_QUALITY_DEFAULT;
use serde::{Deserialize, Serialize};

use crate::testbed::{LeafMaps, Testbed};

/// A spine's rate changed while the collective runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateChange {
    /// 1-based spine.
    pub spine: usize,
    pub rate_mbit: u32,
    /// How long after the senders start.
    pub after: Duration,
}

/// What [`measure`] saw; `None` when it did not happen within the watch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Reaction {
    /// tc change to the first lowered quality of the spine's next hop.
    pub quality_ms: Option<f64>,
    /// tc change to the end of the first 20 ms window in which the spine
    /// carried at most half its share of before, and did to the end.
    pub shift_ms: Option<f64>,
    /// The spine's share of the leaf's bytes in the 300 ms before the
    /// change and in the 500 ms after it.
    pub share_before: Option<f64>,
    pub share_after: Option<f64>,
}

/// Samples taken this often, for this long before and after the change.
const SAMPLE_EVERY: Duration = Duration::from_millis(1);
const BEFORE: Duration = Duration::from_millis(300);
const AFTER: Duration = Duration::from_millis(500);
/// Traffic moves in flowlets of a message each, 4 ms at a sender's rate:
/// a share over a much shorter window swings with every one.
const SHARE_WINDOW: Duration = Duration::from_millis(20);
/// How much of the watch must follow a shift to show it lasts.
const REST: Duration = Duration::from_millis(100);

/// One sample: when (from the change), the spine's quality, every spine's
/// bytes so far.
struct Sample {
    at: f64,
    quality: u32,
    bytes: Vec<u64>,
}

/// Waits until `change.after` (counted from `started`), applies it to
/// `bed`, and measures the reaction of the leaf's daemon. The leaf's next
/// hops are the spines in order (ids 0..), as a fresh daemon numbers them.
pub fn measure(bed: &Testbed, change: &RateChange, started: Instant) -> Result<Reaction> {
    let spines = bed.shape().spines;
    let id = change.spine as u32 - 1;
    std::thread::sleep((started + change.after - BEFORE).saturating_duration_since(Instant::now()));
    let maps = LeafMaps::open(bed)?;
    let read = |from: Instant| -> Result<Sample> {
        Ok(Sample {
            at: signed_ms(Instant::now(), from),
            quality: maps.quality(id)?,
            bytes: (0..spines as u32)
                .map(|s| maps.bytes(s))
                .collect::<Result<_>>()?,
        })
    };
    let mut samples = Vec::new();
    let watch_start = Instant::now();
    while watch_start.elapsed() < BEFORE {
        samples.push((Instant::now(), read(watch_start)?));
        std::thread::sleep(SAMPLE_EVERY);
    }
    let changed = Instant::now();
    bed.set_spine_rate(change.spine, change.rate_mbit)?;
    while changed.elapsed() < AFTER {
        samples.push((Instant::now(), read(changed)?));
        std::thread::sleep(SAMPLE_EVERY);
    }
    let samples: Vec<Sample> = samples
        .into_iter()
        .map(|(at, s)| Sample {
            at: signed_ms(at, changed),
            ..s
        })
        .collect();
    Ok(reaction(&samples, id as usize))
}

/// Milliseconds from `from` to `at`, negative when `at` came first.
pub(super) fn signed_ms(at: Instant, from: Instant) -> f64 {
    match at.checked_duration_since(from) {
        Some(d) => d.as_secs_f64() * 1e3,
        None => -(from - at).as_secs_f64() * 1e3,
    }
}

/// The reaction in `samples` (times from the change) of spine slot `slot`.
fn reaction(samples: &[Sample], slot: usize) -> Reaction {
    let quality_ms = samples
        .iter()
        .find(|s| s.at >= 0.0 && s.quality < PATH_QUALITY_DEFAULT)
        .map(|s| s.at);
    let first = samples.first();
    let last_before = samples.iter().rev().find(|s| s.at < 0.0);
    let before = match (first, last_before) {
        (Some(a), Some(b)) => share(a, b, slot),
        _ => None,
    };
    let shift_ms = before.and_then(|before| shift(samples, slot, before));
    let at_change = samples.iter().find(|s| s.at >= 0.0);
    let after = match (at_change, samples.last()) {
        (Some(a), Some(b)) => share(a, b, slot),
        _ => None,
    };
    Reaction {
        quality_ms,
        shift_ms,
        share_before: before,
        share_after: after,
    }
}

/// The end of the first window, from the change on, in which spine `slot`
/// carried at most half its share of `before`, provided it also did from
/// there to the end of the watch, at least [`REST`] later: a fall that
/// lasts, not a lull.
fn shift(samples: &[Sample], slot: usize, before: f64) -> Option<f64> {
    let window = SHARE_WINDOW.as_secs_f64() * 1e3;
    let last = samples.last()?;
    let rest = REST.as_secs_f64() * 1e3;
    samples
        .iter()
        .enumerate()
        .filter(|(_, start)| start.at >= 0.0)
        .find_map(|(i, start)| {
            let end = samples[i..].iter().find(|s| s.at >= start.at + window)?;
            let low = |a, b| share(a, b, slot).is_some_and(|s| s <= before / 2.0);
            (end.at + rest <= last.at && low(start, end) && low(end, last)).then_some(end.at)
        })
}

/// Spine `slot`'s share of the bytes forwarded from `a` to `b`.
fn share(a: &Sample, b: &Sample, slot: usize) -> Option<f64> {
    let total: u64 = b.bytes.iter().zip(&a.bytes).map(|(b, a)| b - a).sum();
    (total > 0).then(|| (b.bytes[slot] - a.bytes[slot]) as f64 / total as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `samples` with spine 2 given 100 bytes in each ms `gets` says.
    fn with_b(samples: &[Sample], gets: impl Fn(i64) -> bool) -> Vec<Sample> {
        samples
            .iter()
            .map(|s| {
                let b = (-20..=s.at as i64).filter(|&m| gets(m)).count() as u64 * 100;
                Sample {
                    at: s.at,
                    quality: 1024,
                    bytes: vec![s.bytes[0], b],
                }
            })
            .collect()
    }

    /// Two spines: 50/50 before the change at 0 ms; quality drops at 3 ms,
    /// spine 2 gets nothing from 5 ms on.
    #[test]
    fn reaction_from_samples() {
        let mut samples = Vec::new();
        let (mut a, mut b) = (0u64, 0u64);
        for ms in -20..=200 {
            a += 100;
            if ms < 5 {
                b += 100;
            }
            samples.push(Sample {
                at: f64::from(ms),
                quality: if ms >= 3 { 512 } else { 1024 },
                bytes: vec![a, b],
            });
        }
        let r = reaction(&samples, 1);
        assert_eq!(r.quality_ms, Some(3.0));
        // The window (0, 20] holds 4 of b's increments against a's 20.
        assert_eq!(r.shift_ms, Some(20.0));
        // b keeping pace until 40 ms: (t, t + 20] holds 39 - t of b's
        // increments against a's 20, at most a quarter of all from t = 33.
        let steady = with_b(&samples, |ms| ms < 40);
        assert_eq!(reaction(&steady, 1).shift_ms, Some(53.0));
        // A lull from 10 to 40 ms, then b back at a's pace: no shift.
        let lull = with_b(&samples, |ms| !(10..40).contains(&ms));
        assert_eq!(reaction(&lull, 1).shift_ms, None);
        let flat: Vec<Sample> = samples
            .iter()
            .map(|s| Sample {
                at: s.at,
                quality: 1024,
                bytes: vec![s.bytes[0], s.bytes[0]],
            })
            .collect();
        let unmoved = reaction(&flat, 1);
        assert_eq!((unmoved.quality_ms, unmoved.shift_ms), (None, None));
        assert_eq!(
            (unmoved.share_before, unmoved.share_after),
            (Some(0.5), Some(0.5))
        );
        // b's 4 increments from 1 to 4 ms against a's 200 to the end.
        assert_eq!(r.share_before, Some(0.5));
        assert_eq!(r.share_after, Some(4.0 / 204.0));
    }
}
