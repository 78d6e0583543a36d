//! Path quality from telemetry, the way switch ASICs' adaptive routing
//! (SAI ARS, SONiC's `ARS_PROFILE`) computes it: per path, three measures
//! (past load: an EWMA of the egress rate; current load: the latest rate;
//! future load: how long what is queued toward it takes to drain), each
//! scaled between a minimum and a maximum, weighted, and quantised into
//! [`BANDS`] bands. Band 0 is an idle path, band 7 a congested one.
//!
//! The future load is a delay, not a byte count, because paths differ in
//! speed: 100 KB queued is 4 ms at 200 Mbit/s and 16 ms at 50. An ASIC
//! knows its ports' speeds; telemetry from the next switch does not say
//! them, so the drain rate is measured: the egress rate over sampling
//! intervals in which the queue never emptied (it was queued at both
//! ends), when a queue drains at exactly its port's rate.
//!
//! Bands change asymmetrically, so paths do not flap: a path gets worse at
//! once (the next flowlet must not pile onto a queue that is building), but
//! better only one band per sample, and only once its level is below its
//! band's lower edge by a hysteresis margin. The daemon samples at a fixed
//! interval, which is what rate-limits the improvements.
//!
//! The band maps to the data plane's path quality, the divisor of a path's
//! recent load in the flowlet choice and the weight of a path in the spray
//! sequence: a band-`b` path is worth `(16 - b) / 16` of an idle one, and
//! an eighth once its level has been in the worst band for
//! [`WORST_HELD`] samples in a row; scaled by what it drains against its
//! row's fastest ([`PathQuality::scaled_quality`]), so traffic splits in
//! proportion to what each path drains, and away from where queues build.
//! The quality follows the band through the same EWMA as the past load (a
//! quarter of the way per sample), not at once.
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
//! buffer) for three samples is load no leaf moved, such as cross traffic
//! on the spine, which leaves the drain rate as it was: only the band can
//! move traffic off it, and then it cuts to an eighth.

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

/// Samples the worst band must hold before it cuts a path to an eighth.
pub const WORST_HELD: u32 = 3;

/// The drain rate moves half of the way to each busy interval's rate: a
/// spine that slows shows slow within two or three samples, which is most
/// of how fast every leaf moves off it together.
const DRAIN_EWMA_SHIFT: u32 = 1;

/// How a path's measures become a band: `ARS_PROFILE`'s fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Profile {
    /// EWMA of the egress rate, bytes per second.
    pub past_load: Scale,
    /// The latest egress rate, bytes per second.
    pub current_load: Scale,
    /// Microseconds the bytes queued toward the path take to drain.
    pub future_load: Scale,
    /// The EWMA gives the newest sample a weight of `1 / 2^ewma_shift`.
    pub ewma_shift: u32,
    /// How far (in 1/[`LEVEL_UNIT`] of a band) a path's level must be
    /// below its band's lower edge before the band improves.
    pub hysteresis: u32,
}

/// One sample of one path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Measures {
    /// Egress rate since the previous sample, bytes per second; `None`
    /// when the source has no transmit counter (or no previous sample).
    pub load: Option<u64>,
    /// Bytes queued toward the path now.
    pub queued: u64,
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
    /// The highest egress rate seen: the drain rate's stand-in (a lower
    /// bound, so delays err long) until the queue has stayed busy once.
    pub peak_rate: u64,
    /// Bytes queued at the previous sample.
    pub queued: u64,
    /// `0..BANDS`.
    pub band: u32,
    /// Samples in a row whose level was in the worst band.
    pub worst_run: u32,
    /// The band's quality through the EWMA (`None` before a sample): what
    /// [`Self::quality`] gives the data plane.
    pub smoothed: Option<u32>,
}

impl PathQuality {
    /// Takes one sample and returns the band it leaves the path in.
    pub fn sample(&mut self, profile: &Profile, measures: Measures) -> u32 {
        let shift = profile.ewma_shift;
        let load = measures.load.unwrap_or(0);
        if let Some(rate) = measures.load {
            self.past_load = Some(self.past_load.map_or(rate, |p| ewma(p, rate, shift)));
            self.peak_rate = self.peak_rate.max(rate);
            // Through an EWMA both ways: a busy interval whose queue
            // emptied and refilled between samples reads low, and taking
            // such a reading at once made fast paths look slow by turns
            // and herded flowlets (fast spines' queues to their limit).
            if self.queued > 0 && measures.queued > 0 {
                let drain = self
                    .drain_rate
                    .map_or(rate, |d| ewma(d, rate, DRAIN_EWMA_SHIFT));
                self.drain_rate = Some(drain);
            }
        }
        self.queued = measures.queued;
        let level = profile.level(
            self.past_load.unwrap_or(0),
            load,
            self.delay_us(measures.queued),
        );
        let target = (level / LEVEL_UNIT).min(BANDS - 1);
        if target > self.band {
            self.band = target;
        } else if target < self.band && level + profile.hysteresis < self.band * LEVEL_UNIT {
            self.band -= 1;
        }
        self.worst_run = if target == BANDS - 1 {
            self.worst_run.saturating_add(1)
        } else {
            0
        };
        let now = u64::from(band_quality(self.band, self.worst_run));
        let smoothed = self.smoothed.map_or(now, |q| ewma(q.into(), now, shift));
        self.smoothed = Some(smoothed as u32);
        self.band
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

    /// What the path is known to carry, bytes per second: its drain rate,
    /// or before one is measured its peak rate (a lower bound); `None`
    /// before any rate above 0.
    pub fn capacity(&self) -> Option<u64> {
        (self.drain_rate.filter(|&r| r > 0)).or((self.peak_rate > 0).then_some(self.peak_rate))
    }

    /// The data plane's path quality before scaling: the band's, smoothed.
    pub fn quality(&self) -> u32 {
        self.smoothed
            .unwrap_or(band_quality(self.band, self.worst_run))
    }

    /// The path's quality within a row whose fastest path carries
    /// `fastest` bytes per second ([`Self::capacity`]): its quality scaled
    /// by its own drain rate against that, so a split follows the paths'
    /// capacities as well as their congestion. (SONiC's `ARS_INTERFACES`
    /// gives ports of different speeds a scaling factor; the speed of the
    /// next switch's port is measured here instead.) A path never seen
    /// draining, or draining at three quarters of the fastest or more,
    /// counts as fast as the fastest: a rate is read over the reader's
    /// interval from counters as old as their writer's period, which
    /// wanders by a quarter, and equal paths must not split by that noise.
    /// Never 0, which the data plane reads as "avoid".
    pub fn scaled_quality(&self, fastest: u64) -> u32 {
        let quality = u64::from(self.quality());
        let scaled = match self.drain_rate {
            Some(rate) if rate * 4 < fastest * 3 => quality * rate / fastest,
            _ => quality,
        };
        scaled.max(1) as u32
    }
}

/// The path quality of `band`, whose level has been in the worst band for
/// `worst_run` samples in a row: [`PATH_QUALITY_DEFAULT`] for band 0, a
/// sixteenth less per band, an eighth of it once the worst band has held
/// for [`WORST_HELD`] samples.
pub const fn band_quality(band: u32, worst_run: u32) -> u32 {
    if worst_run >= WORST_HELD {
        return PATH_QUALITY_DEFAULT / 8;
    }
    let band = if band >= BANDS { BANDS - 1 } else { band };
    PATH_QUALITY_DEFAULT * (2 * BANDS - band) / (2 * BANDS)
}

/// `past` moved `1 / 2^shift` of the way to `now`.
fn ewma(past: u64, now: u64, shift: u32) -> u64 {
    let shift = shift.min(63);
    if now >= past {
        past + ((now - past) >> shift)
    } else {
        past - ((past - now) >> shift)
    }
}

#[cfg(test)]
mod tests;
