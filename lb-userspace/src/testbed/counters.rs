//! What the leaf's fabriclb counted, read back from its metrics file.

use anyhow::{Context, Result};
use lb_common::verdict::Reason;

use super::Testbed;
use crate::metrics;

/// One spine as the leaf's fabriclb counted it.
#[derive(Clone, Debug, Default)]
pub struct SpineCount {
    pub label: String,
    pub packets: u64,
    pub bytes: u64,
    /// Of `packets`, those sprayed (per-packet mode).
    pub sprayed: u64,
}

/// What the leaf's fabriclb counted, from its metrics file.
#[derive(Clone, Debug, Default)]
pub struct LeafCounters {
    pub spines: Vec<SpineCount>,
    pub forwarded: u64,
    pub passed_to_kernel: u64,
    /// The spine group's counters.
    pub new_flowlets: u64,
    pub flowlet_moves: u64,
    pub sprayed: u64,
    pub pinned: u64,
    /// The mode the group runs in.
    pub mode: Option<String>,
}

impl LeafCounters {
    pub fn from_metrics(bed: &Testbed, text: &str) -> Result<Self> {
        let spines = (1..=bed.shape().spines)
            .map(|j| {
                let label = bed.spine_label(j);
                let filter = format!("nexthop=\"{label}\"");
                let read = |metric| {
                    metrics::sample(text, metric, &filter)
                        .with_context(|| format!("no {metric} for {label}"))
                };
                Ok(SpineCount {
                    packets: read("fabriclb_nexthop_packets_total")?,
                    bytes: read("fabriclb_nexthop_bytes_total")?,
                    sprayed: read("fabriclb_nexthop_sprayed_packets_total")?,
                    label,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let count = |reason: Reason| {
            metrics::sample(
                text,
                "fabriclb_packets_total",
                &format!("\"{}\"", reason.name()),
            )
        };
        let group = |metric| metrics::sample(text, metric, "group=\"spines\"").unwrap_or(0);
        Ok(Self {
            spines,
            forwarded: count(Reason::Forwarded).unwrap_or(0),
            passed_to_kernel: Reason::ALL
                .into_iter()
                .filter(|r| *r != Reason::Forwarded)
                .filter_map(count)
                .sum(),
            new_flowlets: group("fabriclb_group_new_flowlets_total"),
            flowlet_moves: group("fabriclb_group_flowlet_moves_total"),
            sprayed: group("fabriclb_group_sprayed_packets_total"),
            pinned: group("fabriclb_group_pinned_packets_total"),
            mode: crate::config::Mode::NAMES
                .iter()
                .map(|(name, _)| *name)
                .find(|name| {
                    metrics::sample(text, "fabriclb_group_mode", &format!("mode=\"{name}\""))
                        == Some(1)
                })
                .map(str::to_owned),
        })
    }

    /// Busiest spine's bytes over the mean.
    pub fn byte_mmr(&self) -> f64 {
        mmr(self.spines.iter().map(|s| s.bytes))
    }

    /// Busiest spine's sprayed packets over the mean.
    pub fn sprayed_mmr(&self) -> f64 {
        mmr(self.spines.iter().map(|s| s.sprayed))
    }
}

/// Max over mean; 0 for nothing.
pub fn mmr(values: impl Iterator<Item = u64> + Clone) -> f64 {
    let n = values.clone().count().max(1) as f64;
    let mean = values.clone().sum::<u64>() as f64 / n;
    values.max().unwrap_or(0) as f64 / mean.max(1.0)
}
