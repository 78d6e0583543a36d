//! The Prometheus textfile: the data plane's counters with the tables'
//! names, rewritten atomically.

use std::time::Instant;

use anyhow::Result;
use lb_common::abi::NEXTHOP_USABLE;
use tracing::warn;

use super::Options;
use super::state::Running;
use crate::dataplane::Dataplane;
use crate::metrics::{self, GroupSample, NextHopSample, PathSample};

pub(super) fn write_metrics(options: &Options, dp: &Dataplane, running: &Running) {
    let Some(path) = &options.metrics_file else {
        return;
    };
    let (tables, now) = (&running.tables, Instant::now());
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
                    quality: tables.quality[id as usize],
                    path: running.telemetry.paths.get(&id).map(|p| PathSample {
                        source: p.source,
                        band: p.quality.band,
                        queued_bytes: p.queued_bytes,
                        age_seconds: running.telemetry.age(id, now).unwrap_or_default(),
                        errors: p.errors,
                        stale: p.stale,
                    }),
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
