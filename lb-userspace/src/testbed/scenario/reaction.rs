//! How fast the leaf reacts when a spine slows down mid-run: from the
//! moment `tc` is told the new rate, to the first sample of the leaf's
//! path-quality map that shows the spine worse than the default, and to
//! the first 10 ms in which the spine's share of the leaf's bytes has
//! fallen to half of what it carried before.

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
    /// tc change to the end of the first 10 ms window in which the spine
    /// carried at most half its share of before.
    pub shift_ms: Option<f64>,
}

/// Samples taken this often, for this long before and after the change.
const SAMPLE_EVERY: Duration = Duration::from_millis(1);
const BEFORE: Duration = Duration::from_millis(100);
const AFTER: Duration = Duration::from_millis(500);
const SHARE_WINDOW: Duration = Duration::from_millis(10);

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

fn signed_ms(at: Instant, from: Instant) -> f64 {
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
    let window = SHARE_WINDOW.as_secs_f64() * 1e3;
    let shift_ms = before.and_then(|before| {
        samples.iter().enumerate().find_map(|(i, end)| {
            // Only windows that start at or after the change.
            let start = samples[..i]
                .iter()
                .rev()
                .find(|s| s.at <= end.at - window)?;
            (start.at >= 0.0 && share(start, end, slot)? <= before / 2.0).then_some(end.at)
        })
    });
    Reaction {
        quality_ms,
        shift_ms,
    }
}

/// Spine `slot`'s share of the bytes forwarded from `a` to `b`.
fn share(a: &Sample, b: &Sample, slot: usize) -> Option<f64> {
    let total: u64 = b.bytes.iter().zip(&a.bytes).map(|(b, a)| b - a).sum();
    (total > 0).then(|| (b.bytes[slot] - a.bytes[slot]) as f64 / total as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two spines: 50/50 before the change at 0 ms; quality drops at 3 ms,
    /// spine 2 gets nothing from 5 ms on.
    #[test]
    fn reaction_from_samples() {
        let mut samples = Vec::new();
        let (mut a, mut b) = (0u64, 0u64);
        for ms in -20..=40 {
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
        // The window ending at 10 ms holds b's last 4 increments and a's
        // 10: 4/14 is above half of 0.5; the one ending at 11, 3/13 is not.
        assert_eq!(r.shift_ms, Some(11.0));
        let flat: Vec<Sample> = samples
            .iter()
            .map(|s| Sample {
                at: s.at,
                quality: 1024,
                bytes: vec![s.bytes[0], s.bytes[0]],
            })
            .collect();
        assert_eq!(reaction(&flat, 1), Reaction::default());
    }
}
