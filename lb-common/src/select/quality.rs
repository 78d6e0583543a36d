//! Path quality from telemetry, the way switch ASICs' adaptive routing
//! (SAI ARS, SONiC's `ARS_PROFILE`) computes it: per path, three measures
//! (past load: an EWMA of the egress rate; current load: the latest rate;
//! future load: the bytes queued toward it), each scaled between a minimum
//! and a maximum, weighted, and quantised into [`BANDS`] bands. Band 0 is
//! an idle path, band 7 a congested one.
//!
//! Bands change asymmetrically, so paths do not flap: a path gets worse at
//! once (the next flowlet must not pile onto a queue that is building), but
//! better only one band per sample, and only once its level is below its
//! band's lower edge by a hysteresis margin. The daemon samples at a fixed
//! interval, which is what rate-limits the improvements.
//!
//! The band maps to the data plane's path quality, the divisor of a path's
//! recent load in the flowlet choice and the weight of a path in the spray
//! sequence: a band-`b` path is worth `(8 - b) / 8` of an idle one, so
//! traffic splits in proportion to what each path still drains.

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

/// How a path's measures become a band: `ARS_PROFILE`'s fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Profile {
    /// EWMA of the egress rate, bytes per second.
    pub past_load: Scale,
    /// The latest egress rate, bytes per second.
    pub current_load: Scale,
    /// Bytes queued toward the path.
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
    /// Egress rate since the previous sample, bytes per second.
    pub load: u64,
    /// Bytes queued toward the path now.
    pub queued: u64,
}

impl Profile {
    /// The combined level of `measures`, given the EWMA `past_load`.
    pub fn level(&self, past_load: u64, measures: Measures) -> u32 {
        let parts = [
            (self.past_load, past_load),
            (self.current_load, measures.load),
            (self.future_load, measures.queued),
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

/// One path's telemetry state: the EWMA and the band it has settled in.
/// The default is an idle path with no sample yet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathQuality {
    /// EWMA of the egress rate; `None` before the first sample.
    pub past_load: Option<u64>,
    /// `0..BANDS`.
    pub band: u32,
}

impl PathQuality {
    /// Takes one sample and returns the band it leaves the path in.
    pub fn sample(&mut self, profile: &Profile, measures: Measures) -> u32 {
        let past = match self.past_load {
            None => measures.load,
            Some(past) => ewma(past, measures.load, profile.ewma_shift),
        };
        self.past_load = Some(past);
        let level = profile.level(past, measures);
        let target = (level / LEVEL_UNIT).min(BANDS - 1);
        if target > self.band {
            self.band = target;
        } else if target < self.band && level + profile.hysteresis < self.band * LEVEL_UNIT {
            self.band -= 1;
        }
        self.band
    }

    /// The data plane's path quality for the current band.
    pub fn quality(&self) -> u32 {
        band_quality(self.band)
    }
}

/// The path quality of `band`: [`PATH_QUALITY_DEFAULT`] for band 0, an
/// eighth of it for band 7.
pub const fn band_quality(band: u32) -> u32 {
    let band = if band >= BANDS { BANDS - 1 } else { band };
    PATH_QUALITY_DEFAULT * (BANDS - band) / BANDS
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
