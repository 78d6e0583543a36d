//! The Prometheus textfile: the data plane's counters with the tables'
//! names, rewritten atomically.

use anyhow::Result;
use lb_common::abi::NEXTHOP_USABLE;
use tracing::warn;

use super::Options;
use crate::dataplane::Dataplane;
use crate::dataplane::tables::Tables;
use crate::metrics::{self, GroupSample, NextHopSample};

pub(super) fn write_metrics(options: &Options, dp: &Dataplane, tables: &Tables) {
    let Some(path) = &options.metrics_file else {
        return;
    };
    let result = (|| -> Result<()> {
        let verdicts = dp.verdict_counts()?;
        let mut nexthops = Vec::new();
        let mut groups = Vec::new();
        for group in &tables.groups {
            groups.push(GroupSample {
                name: &group.name,
                mode: group.entry.mode,
                stats: dp.group_stats(group.id)?,
            });
            for (spec, &id) in group.specs.iter().zip(&group.members) {
                nexthops.push(NextHopSample {
                    group: &group.name,
                    id,
                    label: spec.to_string(),
                    usable: tables.nexthops[id as usize].flags & NEXTHOP_USABLE != 0,
                    stats: dp.nexthop_stats(id)?,
                });
            }
        }
        metrics::write_atomically(path, &metrics::render(&verdicts, &groups, &nexthops))?;
        Ok(())
    })();
    if let Err(e) = result {
        warn!(path = %path.display(), "writing metrics: {e:#}");
    }
}
