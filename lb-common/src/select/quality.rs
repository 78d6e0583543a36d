//! Path quality from telemetry, the way switch ASICs' adaptive routing
//! (SAI ARS, SONiC's `ARS_PROFILE`) computes it: per path, three measures
//! (past load: an EWMA of the egress rate; current load: the latest rate;
//! future load: how long what is queued toward it takes to drain), each
//! scaled between a minimum and a maximum, weighted, and quantised into
//! [`BANDS`] bands. Band 0 is an idle path, band 7 a congested one.
//!
//! The future load is a delay, not a byte count, because paths differ in
//! speed: 100 KB queued is 4 ms at 200 Mbit/s and 16 ms at 50. An ASIC
//! knows its ports' speeds. Telemetry from the next switch says them when
//! the switch publishes its ports' operational speed (SONiC's STATE_DB);
//! either way the drain rate is measured too: the egress rate over
//! sampling intervals in which the queue never emptied (it was queued at
//! both ends), when a queue drains at exactly its port's rate, which also
//! catches a port shaped below its speed. A path drains at the lower of
//! the two.
//!
//! Bands change asymmetrically, so paths do not flap: a path gets worse at
//! once (the next flowlet must not pile onto a queue that is building), but
//! better only one band per sample, and only once its level is below its
//! band's lower edge by a hysteresis margin. A path whose queue two
//! samples in a row found empty, and whose level reads idle, is idle at
//! once: the queue it was rated by has drained. Stepping down from a full
//! queue holds a path below seven eighths of an idle one for some 130 ms
//! at 10 ms samples (the queue drains, seven steps, the quality's EWMA),
//! and a flow left alone on it after a collision moved off at its next
//! flowlet too, into new collisions: 16 fat flows on 16 equal spines
//! steered made 17-53 moves a run, 7-35 since.
//!
//! Every smoothing counts in time, not in samples: a sample moves an EWMA
//! by `dt / (tau + dt)` of the way, `dt` the time since the previous one,
//! so a profile means the same at any sampling interval, and a value read
//! twice (a counter its writer did not update between polls, see
//! [`rate`]) moves it about as far as one read once.
//!
//! The band maps to the data plane's path quality, the divisor of a path's
//! recent load in the flowlet choice and the weight of a path in the spray
//! sequence: a band-`b` path is worth `(16 - b) / 16` of an idle one, and
//! an eighth once its level has stayed in the worst band for the
//! profile's `worst_hold_us`; scaled by what it drains against its
//! row's fastest ([`PathQuality::scaled_quality`]), so traffic splits in
//! proportion to what each path drains, and away from where queues build.
//! The quality follows the band through the same EWMA as the past load
//! (time constant `smoothing_us`), not at once.
//!
//! Why so gentle, and the eighth only for a queue that stays: in a fabric
//! every leaf reads the same spines and acts on the same sample. With a
//! band worth `(8 - b) / 8`, a queue of a few milliseconds on one of
//! several equal paths cut every leaf's share of it by up to seven eighths
//! together, more than the equal paths beside it could take: they
//! overflowed in turn, and flowlets steered by four leaves around one slow
//! port lost 0.3-1.1% at the fast ports. What a path drains is the
//! capacity scaling's to follow, which the leaves' moves do not feed. A
//! queue that stays in the worst band (10 ms by default, half a shallow
//! buffer) for `worst_hold_us` is load no leaf moved, such as cross traffic
//! on the spine, which leaves the drain rate as it was: only the band can
//! move traffic off it, and then it cuts to an eighth. Not in a
//! destination's row ([`Measures::shared`]): the next switch's port
//! toward a leaf is every leaf's, and a queue that stays there is theirs
//! as much as anyone's. Around a spine slowed on every port the three fast
//! spines ran near 87% and their ports' queues stayed in the worst band;
//! cut to an eighth, each fell below the idle slow spine's quarter, and
//! every leaf moved onto the slow one at once (its share 19-23% in 10 ms
//! windows, every 250 ms or so, against its 7.7%): `fabric-herd`'s
//! flowlets lost 0.53-1.75% in four runs, 0.29-0.65% in four
//! interleaved without the cut.

pub mod rate;

use crate::select::flowlet::PATH_QUALITY_DEFAULT;

/// Quantisation bands, as SAI ARS has them (`QUANT_BAND_0..7`).
pub const BANDS: u32 = 8;
/// A level counts in 1/`LEVEL_UNIT` of a band, so the hysteresis margin
/// can be a fraction of one.
pub const LEVEL_UNIT: u32 = 256;
/// The highest level: the top of the worst band.
pub const LEVEL_MAX: u32 = BANDS * LEVEL_UNIT - 1;

/// One measure's scaling: at or below `min` it adds nothing (level 0), at
/// or above `max` it reads as the worst band; `weight` is its share of the
/// combined level (0 leaves it out).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Scale {
    pub min: u64,
    pub max: u64,
    pub weight: u32,
}

impl Scale {
    /// `value`'s level, linear between `min` and `max`.
    pub fn level(&self, value: u64) -> u32 {
        if value <= self.min {
            return 0;
        }
        if value >= self.max || self.max <= self.min {
            return LEVEL_MAX;
        }
        let span = (self.max - self.min) as u128;
        let above = (value - self.min) as u128;
        (above * u128::from(BANDS * LEVEL_UNIT) / span) as u32
    }
}

/// The drain rate's time constant: half of the way to a busy interval's
/// rate per 40 ms, so a spine that slows shows slow within two or three
/// samples, which is most of how fast every leaf moves off it together.
const DRAIN_TIME_CONSTANT_US: u64 = 40_000;

/// How long a drain rate holds after the last busy interval measured it.
const DRAIN_HOLD_US: u64 = 200_000;
/// The time constant at which a drain rate no busy interval has measured
/// for [`DRAIN_HOLD_US`] relaxes toward the path's peak rate.
const DRAIN_RELAX_US: u64 = 400_000;

/// An EWMA's weights count in 1/`WEIGHT_UNIT`.
const WEIGHT_UNIT: u64 = 1 << 16;

/// How a path's measures become a band: `ARS_PROFILE`'s fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Profile {
    /// EWMA of the egress rate, bytes per second.
    pub past_load: Scale,
    /// The latest egress rate, bytes per second.
    pub current_load: Scale,
    /// Microseconds the bytes queued toward the path take to drain.
    pub future_load: Scale,
    /// The time constant of the past load's EWMA and of the quality's,
    /// microseconds: a sample `dt` after the previous one moves them
    /// `dt / (smoothing_us + dt)` of the way.
    pub smoothing_us: u32,
    /// How long a path's level must stay in the worst band before its
    /// quality is cut to an eighth, microseconds.
    pub worst_hold_us: u32,
    /// How far (in 1/[`LEVEL_UNIT`] of a band) a path's level must be
    /// below its band's lower edge before the band improves.
    pub hysteresis: u32,
}

/// One sample of one path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Measures {
    /// When it was read, microseconds on any clock that only goes forward.
    pub at_us: u64,
    /// Egress rate since the previous sample, bytes per second; `None`
    /// when the source has no transmit counter (or no previous sample).
    pub load: Option<u64>,
    /// Bytes queued toward the path now.
    pub queued: u64,
    /// The port's operational speed, bytes per second, where the switch
    /// says it; `None` otherwise.
    pub speed: Option<u64>,
    /// Whether other switches fill the queue too (a destination's row:
    /// the next switch's port toward it, which every leaf sends to); its
    /// worst band is never cut to an eighth.
    pub shared: bool,
}

impl Profile {
    /// The combined level of the EWMA `past_load`, the `current_load` and
    /// the queueing delay `future_load_us`.
    pub fn level(&self, past_load: u64, current_load: u64, future_load_us: u64) -> u32 {
        let parts = [
            (self.past_load, past_load),
            (self.current_load, current_load),
            (self.future_load, future_load_us),
        ];
        let (mut sum, mut weights) = (0u64, 0u64);
        for (scale, value) in parts {
            sum += u64::from(scale.level(value)) * u64::from(scale.weight);
            weights += u64::from(scale.weight);
        }
        // No weight at all: nothing counts, every path is idle.
        sum.checked_div(weights).unwrap_or(0) as u32
    }
}

/// One path's telemetry state: the EWMAs and the band it has settled in.
/// The default is an idle path with no sample yet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathQuality {
    /// EWMA of the egress rate, bytes per second; `None` before a rate.
    pub past_load: Option<u64>,
    /// EWMA of the egress rate over intervals the queue never emptied:
    /// what the path drains at, bytes per second.
    pub drain_rate: Option<u64>,
    /// When a busy interval last measured the drain rate.
    pub drain_measured_us: Option<u64>,
    /// The last two busy intervals' rates, newest first: the drain rate
    /// follows the median of these and the next, so one interval read
    /// far off does not move it.
    pub drain_readings: [Option<u64>; 2],
    /// The highest past load seen: the drain rate's stand-in (a lower
    /// bound, so delays err long) until the queue has stayed busy once,
    /// and so the speed a path never seen queued counts in its row's
    /// capacity scaling ([`Self::scaled_quality`]).
    ///
    /// The smoothed rate's peak, not a single reading's: a reading is
    /// rated over the times its counter was seen to change, each up to a
    /// poll late ([`rate`]), so readings scatter around the rate and the
    /// highest of many is well above it. Fast spines that never queued
    /// read up to 1.6 times their speed that way, which scaled a slow
    /// spine down to 0.15-0.18 of them instead of its 0.25: it carried
    /// 5.6% of `fabric-herd`'s traffic against its 7.7% with an empty
    /// queue, and an empty queue is a band no leaf moves off. A smoothed
    /// peak errs low instead (a path never full shows what it carried),
    /// which gives a slow path more than its share, and the queue that
    /// builds there rates it down: the error the bands correct.
    pub peak_rate: u64,
    /// The port's operational speed as last read, bytes per second.
    pub speed: Option<u64>,
    /// Bytes queued at the previous sample.
    pub queued: u64,
    /// `0..BANDS`.
    pub band: u32,
    /// When the samples in a row whose level was in the worst band began.
    pub worst_since_us: Option<u64>,
    /// Whether the worst band has held for the profile's `worst_hold_us`.
    pub worst_held: bool,
    /// When the previous sample was taken.
    pub sampled_at_us: Option<u64>,
    /// The band's quality through the EWMA (`None` before a sample): what
    /// [`Self::quality`] gives the data plane.
    pub smoothed: Option<u32>,
}

impl PathQuality {
    /// Takes one sample and returns the band it leaves the path in.
    pub fn sample(&mut self, profile: &Profile, measures: Measures) -> u32 {
        let at = measures.at_us;
        let since = self.sampled_at_us.map(|then| at.saturating_sub(then));
        self.sampled_at_us = Some(at);
        let smoothing = u64::from(profile.smoothing_us);
        let load = measures.load.unwrap_or(0);
        if measures.speed != self.speed {
            // What was measured at the old speed says nothing of the new
            // one: a drain rate kept from a slower speed would hold the
            // path slow after the port came back.
            self.speed = measures.speed;
            self.drain_rate = None;
            self.drain_readings = [None; 2];
            self.peak_rate = 0;
        }
        if let Some(rate) = measures.load {
            let past_load = follow(self.past_load, rate, since, smoothing);
            self.past_load = Some(past_load);
            self.peak_rate = self.peak_rate.max(past_load);
            // Through a median of three and an EWMA both ways: a busy
            // interval whose queue emptied and refilled between samples
            // reads low, and taking such a reading at once made fast paths
            // look slow by turns and herded flowlets (fast spines' queues
            // to their limit). A path's first busy interval was taken
            // whole: one that read a third of its spine's rate scaled an
            // equal spine down to a third of its quality, and starved it
            // for 600 ms, until the drain rate relaxed. The median passes
            // a rate that changed once two intervals have read it.
            if self.queued > 0 && measures.queued > 0 {
                let [newer, older] = self.drain_readings;
                self.drain_readings = [Some(rate), newer];
                if let (Some(newer), Some(older)) = (newer, older) {
                    let median = median_of_three(rate, newer, older);
                    let drain = follow(self.drain_rate, median, since, DRAIN_TIME_CONSTANT_US);
                    self.drain_rate = Some(drain);
                    self.drain_measured_us = Some(at);
                }
            }
        }
        self.relax_drain_rate(at, since);
        let drained = self.queued == 0 && measures.queued == 0;
        self.queued = measures.queued;
        let level = profile.level(
            self.past_load.unwrap_or(0),
            load,
            self.delay_us(measures.queued),
        );
        let target = (level / LEVEL_UNIT).min(BANDS - 1);
        if target > self.band {
            self.band = target;
        } else if drained && level == 0 {
            self.band = 0;
        } else if target < self.band && level + profile.hysteresis < self.band * LEVEL_UNIT {
            self.band -= 1;
        }
        self.worst_since_us = if target == BANDS - 1 {
            Some(self.worst_since_us.unwrap_or(at))
        } else {
            None
        };
        self.worst_held = !measures.shared
            && self
                .worst_since_us
                .is_some_and(|from| at.saturating_sub(from) >= u64::from(profile.worst_hold_us));
        let now = u64::from(band_quality(self.band, self.worst_held));
        let smoothed = self.smoothed.map(u64::from);
        self.smoothed = Some(follow(smoothed, now, since, smoothing) as u32);
        self.band
    }

    /// A drain rate is measured only while the path is queued, and a path
    /// rated slow gets less traffic, so it may never queue again: a
    /// reading that came out low (its queue emptied and refilled between
    /// two samples that both found it queued, or a counter's write
    /// landed a poll late) would starve it for good. Equal spines were
    /// rated at a fifth of their speed that way and carried 0.2-2% of a
    /// 16-way split (one spine in 4 runs of 15). So a drain rate no busy
    /// interval has measured for [`DRAIN_HOLD_US`] while the path carries
    /// under half of it relaxes toward its peak rate, the most it was seen
    /// to carry: a path that is slow queues again as its share grows, and
    /// is measured slow again. One that carries about what it is rated for
    /// keeps its rate: it is not starved, and a spine slowed to a quarter
    /// whose share keeps its queue just empty would be probed back up to
    /// its old speed every few hundred milliseconds (relaxed on the hold
    /// alone, `spine-slowdown`'s sprayed row lost 0.09-0.30% in three
    /// runs, 0.02-0.04% before).
    fn relax_drain_rate(&mut self, at: u64, since: Option<u64>) {
        let (Some(drain), Some(measured)) = (self.drain_rate, self.drain_measured_us) else {
            return;
        };
        let starved = self.past_load.unwrap_or(0).saturating_mul(2) < drain;
        if starved && at.saturating_sub(measured) > DRAIN_HOLD_US && self.peak_rate > 0 {
            self.drain_rate = Some(follow(Some(drain), self.peak_rate, since, DRAIN_RELAX_US));
        }
    }

    /// Microseconds `queued` bytes take to drain. With no rate known at
    /// all, any queue reads as endless: a path whose speed nobody can tell
    /// is not one to pile onto.
    pub fn delay_us(&self, queued: u64) -> u64 {
        if queued == 0 {
            return 0;
        }
        match self.capacity() {
            None => u64::MAX,
            Some(rate) => {
                (u128::from(queued) * 1_000_000 / u128::from(rate)).min(u64::MAX.into()) as u64
            }
        }
    }

    /// What the path is known to carry, bytes per second: the lower of
    /// its port's speed and its drain rate, either where only one is
    /// known, or with neither its peak rate (a lower bound); `None` before
    /// any rate above 0.
    pub fn capacity(&self) -> Option<u64> {
        self.drains_at()
            .or((self.peak_rate > 0).then_some(self.peak_rate))
    }

    /// What the path is known to drain at: the lower of its port's speed
    /// and its measured drain rate, where either is known (and above 0).
    pub fn drains_at(&self) -> Option<u64> {
        let known = |rate: Option<u64>| rate.filter(|&r| r > 0);
        match (known(self.speed), known(self.drain_rate)) {
            (Some(speed), Some(drain)) => Some(speed.min(drain)),
            (speed, drain) => speed.or(drain),
        }
    }

    /// The data plane's path quality before scaling: the band's, smoothed.
    pub fn quality(&self) -> u32 {
        self.smoothed
            .unwrap_or(band_quality(self.band, self.worst_held))
    }

    /// The path's quality within a row whose fast paths carry `fastest`
    /// bytes per second ([`row_reference`] of their [`Self::capacity`]):
    /// its quality scaled by what it drains at against that, so a split
    /// follows the paths' capacities as well as their congestion.
    /// (SONiC's `ARS_INTERFACES` gives ports of different speeds a
    /// scaling factor; the speed of the next switch's port is read or
    /// measured here instead.) A path of no known speed never seen
    /// draining, or draining at three quarters of `fastest` or more,
    /// counts as fast as it: a rate is read over the reader's interval
    /// from counters as old as their writer's period, which wanders by a
    /// quarter, and equal paths must not split by that noise. Never 0,
    /// which the data plane reads as "avoid".
    pub fn scaled_quality(&self, fastest: u64) -> u32 {
        let quality = u64::from(self.quality());
        let scaled = match self.drains_at() {
            Some(rate) if !counts_as_fast(rate, fastest) => quality * rate / fastest,
            _ => quality,
        };
        scaled.max(1) as u32
    }
}

/// What a row's paths are scaled against ([`PathQuality::scaled_quality`]),
/// given their capacities (any order; reordered here): the median of the
/// fast ones, those within the dead band (three quarters) of the
/// highest, and 0 for none.
///
/// Not the highest itself: each capacity is measured from counters read
/// over the network, and the highest of many noisy readings of equal
/// paths sits well above their rate. Sixteen equal spines read 42-48 of
/// their 50 Mbit/s on average, each wandering by 3.4-8.8, and the highest
/// of them was 50-57 most of the time and up to 82: a sixth of the paths,
/// at any sample, read under three quarters of it and were scaled down as
/// if slower, 0.2-0.7 of their quality. Against the fast paths' median, a
/// path is scaled only when it reads under three quarters of what its
/// peers typically read (half as often in that run), while a path slower
/// by more than the dead band is still scaled against the fast ones, and
/// a single fast path in a slow row is its own reference.
pub fn row_reference(capacities: &mut [u64]) -> u64 {
    let Some(&highest) = capacities.iter().max() else {
        return 0;
    };
    capacities.sort_unstable();
    let fast_from = capacities.partition_point(|&c| !counts_as_fast(c, highest));
    let fast = &capacities[fast_from..];
    fast[fast.len() / 2]
}

/// Whether a path that drains at `rate` counts as fast as one at
/// `fastest`: at three quarters of it or more, the dead band of rates
/// read from counters over the network.
const fn counts_as_fast(rate: u64, fastest: u64) -> bool {
    rate as u128 * 4 >= fastest as u128 * 3
}

/// The path quality of `band`: [`PATH_QUALITY_DEFAULT`] for band 0, a
/// sixteenth less per band, an eighth of it once the worst band has
/// `held` for the profile's `worst_hold_us`.
pub const fn band_quality(band: u32, held: bool) -> u32 {
    if held {
        return PATH_QUALITY_DEFAULT / 8;
    }
    let band = if band >= BANDS { BANDS - 1 } else { band };
    PATH_QUALITY_DEFAULT * (2 * BANDS - band) / (2 * BANDS)
}

fn median_of_three(a: u64, b: u64, c: u64) -> u64 {
    a.max(b).min(a.min(b).max(c))
}

/// An EWMA with time constant `tau_us` at `past` (`None` before its first
/// value, which it takes whole), moved toward `now` by a sample
/// `since_us` after the previous one (`None`: the first).
fn follow(past: Option<u64>, now: u64, since_us: Option<u64>, tau_us: u64) -> u64 {
    let (Some(past), Some(dt)) = (past, since_us) else {
        return now;
    };
    let weight = (u128::from(dt) * u128::from(WEIGHT_UNIT))
        .checked_div(u128::from(tau_us) + u128::from(dt))
        .unwrap_or(u128::from(WEIGHT_UNIT));
    let step = |gap: u64| (u128::from(gap) * weight / u128::from(WEIGHT_UNIT)) as u64;
    if now >= past {
        past + step(now - past)
    } else {
        past - step(past - now)
    }
}

#[cfg(test)]
mod tests;
