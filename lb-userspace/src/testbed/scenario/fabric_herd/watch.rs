//! The watch of a `fabric-herd` run: every leaf's data-plane bytes per
//! spine and every spine port's queue and drops each [`WINDOW`], spine 4
//! slowed [`SLOW_AFTER`] after the first byte forwarded; and what the
//! rows read from it (windows, spans, shares, drops).

use std::time::Instant;

use anyhow::{Context, Result};
use serde::Serialize;

use super::{
    AFTER_FROM, JUDGED_WINDOWS, LEAVES, SLOW_AFTER, SLOW_MBIT, SLOW_SPINE, SPINES, WATCH_AFTER,
    WINDOW,
};
use crate::testbed::fabric::Fabric;
use crate::testbed::queues::{QueueWatch, per_port};
use crate::testbed::scenario::reaction::signed_ms;
use crate::testbed::{LeafMaps, ifindex_in};

/// One 10 ms window.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Window {
    /// Its end, from the change (negative before it).
    pub at_ms: f64,
    /// Spine 4's share of the bytes the steering leaves (every leaf in a
    /// blind row) sent in it; `None` when they sent nothing.
    pub slow_share: Option<f64>,
    /// `queues[spine][leaf]`: each spine port's backlog at its end, bytes.
    pub queues: Vec<Vec<u64>>,
    /// `dropped[spine][leaf]`: what each spine port dropped in it.
    pub dropped: Vec<Vec<u64>>,
}

/// One sample of the watch: when, every leaf's bytes by spine, every
/// spine port's backlog and drops so far.
pub(super) struct Sample {
    at: Instant,
    bytes: Vec<Vec<u64>>,
    queues: Vec<Vec<u64>>,
    drops: Vec<Vec<u64>>,
}

/// What the watch saw: its samples and when spine 4 slowed.
pub(super) struct Watch {
    samples: Vec<Sample>,
    changed: Instant,
}

/// Every leaf's data-plane counters per spine and every spine port's
/// queue, each [`WINDOW`]; spine 4 slowed [`SLOW_AFTER`] after the
/// first sample that saw a byte forwarded.
pub(super) fn watch(fabric: &Fabric, queues: &QueueWatch) -> Result<Watch> {
    let leaves = (1..=LEAVES)
        .map(|k| -> Result<(LeafMaps, Vec<u32>)> {
            let ns = fabric.ns(&format!("l{k}"));
            let maps = LeafMaps::open_on(&ns, "h1")?;
            let ids = (1..=SPINES)
                .map(|j| -> Result<u32> {
                    let via = maps.next_hops_via(ifindex_in(&ns, &format!("s{j}"))?)?;
                    via.first()
                        .copied()
                        .with_context(|| format!("leaf {k} has no next hop via s{j}"))
                })
                .collect::<Result<_>>()?;
            Ok((maps, ids))
        })
        .collect::<Result<Vec<_>>>()?;
    let read = || -> Result<Sample> {
        let bytes = (leaves.iter())
            .map(|(maps, ids)| ids.iter().map(|&id| maps.bytes(id)).collect())
            .collect::<Result<_>>()?;
        let ports = queues.current();
        Ok(Sample {
            at: Instant::now(),
            bytes,
            queues: per_port(&ports, SPINES, LEAVES, |q| q.backlog_bytes),
            drops: per_port(&ports, SPINES, LEAVES, |q| q.drops),
        })
    };
    let mut samples = vec![read()?];
    let mut first_byte = None;
    let mut changed = None;
    loop {
        std::thread::sleep(WINDOW.saturating_sub(samples[samples.len() - 1].at.elapsed()));
        let sample = read()?;
        if first_byte.is_none() && sample.bytes.iter().flatten().any(|&b| b > 0) {
            first_byte = Some(sample.at);
        }
        samples.push(sample);
        match (changed, first_byte) {
            (None, Some(start)) if start.elapsed() >= SLOW_AFTER => {
                changed = Some(Instant::now());
                fabric.set_spine_rate(SLOW_SPINE, SLOW_MBIT)?;
            }
            (Some(at), _) if at.elapsed() >= WATCH_AFTER => {
                return Ok(Watch {
                    samples,
                    changed: at,
                });
            }
            _ => {}
        }
    }
}

impl Watch {
    /// The windows between samples, spine 4's share counted over the
    /// first `steering` leaves.
    pub(super) fn windows(&self, steering: usize) -> Vec<Window> {
        self.samples
            .windows(2)
            .map(|pair| Window {
                at_ms: signed_ms(pair[1].at, self.changed),
                slow_share: share(&pair[0], &pair[1], steering),
                queues: pair[1].queues.clone(),
                dropped: dropped_between(&pair[0], &pair[1]),
            })
            .collect()
    }

    /// Spine 4's share over spans of [`JUDGED_WINDOWS`] windows ending at
    /// each sample after the change: (end, share).
    pub(super) fn spans(&self, steering: usize) -> Vec<(f64, f64)> {
        let first = self.samples.iter().position(|s| s.at >= self.changed);
        let Some(first) = first else {
            return Vec::new();
        };
        (first + JUDGED_WINDOWS..self.samples.len())
            .filter_map(|end| {
                let at = signed_ms(self.samples[end].at, self.changed);
                let share = share(
                    &self.samples[end - JUDGED_WINDOWS],
                    &self.samples[end],
                    steering,
                );
                Some((at, share?))
            })
            .collect()
    }

    /// Spine 4's share of the steering leaves' bytes before the change.
    pub(super) fn share_before(&self, steering: usize) -> Option<f64> {
        let before = self.samples.iter().rposition(|s| s.at < self.changed)?;
        share(&self.samples[0], &self.samples[before], steering)
    }

    /// What every spine port dropped from the change to [`AFTER_FROM`]
    /// after it, and from then to the end of the watch.
    pub(super) fn dropped_reacting_and_after(&self) -> (u64, u64) {
        let first_at = |from: Instant| self.samples.iter().position(|s| s.at >= from);
        let total = |from: usize, to: usize| -> u64 {
            dropped_between(&self.samples[from], &self.samples[to])
                .iter()
                .flatten()
                .sum()
        };
        let last = self.samples.len() - 1;
        let change = first_at(self.changed).unwrap_or(last);
        let after = first_at(self.changed + AFTER_FROM).unwrap_or(last);
        (total(change, after), total(after, last))
    }

    /// Its share from [`AFTER_FROM`] after the change to the end.
    pub(super) fn share_after(&self, steering: usize) -> Option<f64> {
        let from = self.changed + AFTER_FROM;
        let first = self.samples.iter().position(|s| s.at >= from)?;
        share(&self.samples[first], self.samples.last()?, steering)
    }
}

/// `[spine][leaf]`: what each spine port dropped between two samples.
fn dropped_between(from: &Sample, to: &Sample) -> Vec<Vec<u64>> {
    (to.drops.iter().zip(&from.drops))
        .map(|(to, from)| {
            (to.iter().zip(from))
                .map(|(t, f)| t.saturating_sub(*f))
                .collect()
        })
        .collect()
}

/// Spine 4's share of what the first `steering` leaves sent between two
/// samples; `None` when they sent nothing.
fn share(from: &Sample, to: &Sample, steering: usize) -> Option<f64> {
    let (slow, all) = sent_between(from, to, steering);
    (all > 0).then(|| slow as f64 / all as f64)
}

/// (bytes to spine 4, all bytes) the first `steering` leaves sent between
/// two samples.
fn sent_between(from: &Sample, to: &Sample, steering: usize) -> (u64, u64) {
    let delta = |k: usize, j: usize| to.bytes[k][j].saturating_sub(from.bytes[k][j]);
    let slow = (0..steering).map(|k| delta(k, SLOW_SPINE - 1)).sum();
    let all = (0..steering)
        .flat_map(|k| (0..SPINES).map(move |j| (k, j)))
        .map(|(k, j)| delta(k, j))
        .sum();
    (slow, all)
}
