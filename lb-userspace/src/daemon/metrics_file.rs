//! The Prometheus exposition: the data plane's counters with the tables'
//! names, rewritten atomically as a textfile, rendered for each scrape.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{Context, Result};
use lb_common::abi::NEXTHOP_USABLE;
use lb_common::abi::tx_errors::TxErrors;
use lb_common::route::quality_index;
use lb_common::select::overrides::override_index;
use tracing::{info, warn};

use super::flow_events::Counts;
use super::loads::Loads;
use super::telemetry::Telemetry;
use crate::dataplane::Dataplane;
use crate::dataplane::tables::Tables;
use crate::metrics::{
    self, DaemonSample, DestinationSample, EgressSample, EventsSample, GroupSample, NextHopSample,
    OverrideSample, PathSample,
};

/// The metrics tick: the textfile written and the counters offered to
/// SONiC from one read of the maps; a failure said when it starts (or
/// changes) and when it ends, not at every tick.
#[derive(Default)]
pub(super) struct MetricsTick {
    failing: Option<String>,
}

/// What the counters are named and read with: the tables in force and
/// the paths' telemetry; and the config's loads.
#[derive(Clone, Copy)]
pub(super) struct Sources<'a> {
    pub(super) tables: &'a Tables,
    pub(super) telemetry: &'a Telemetry,
    pub(super) loads: &'a Loads,
    pub(super) flow_events: &'a Counts,
}

impl MetricsTick {
    /// Writes the textfile at `file`, if any, and hands the next hops'
    /// samples to `publish`.
    pub(super) fn run(
        &mut self,
        file: Option<&std::path::Path>,
        dp: &Dataplane,
        sources: Sources<'_>,
        publish: impl FnOnce(&[NextHopSample<'_>]),
    ) {
        let result = nexthop_samples(dp, sources).and_then(|nexthops| {
            if let Some(path) = file {
                let text = render_with(dp, sources, &nexthops)?;
                metrics::write_atomically(path, &text)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            publish(&nexthops);
            Ok(())
        });
        match result {
            Err(e) => {
                let said = format!("{e:#}");
                if self.failing.as_ref() != Some(&said) {
                    warn!("metrics: {said}; said again only if it changes");
                    self.failing = Some(said);
                }
            }
            Ok(()) => {
                if self.failing.take().is_some() {
                    info!("metrics: written again");
                }
            }
        }
    }
}

/// The exposition of the data plane's counters now, as the textfile and
/// the HTTP endpoint serve it.
pub(super) fn render_metrics(dp: &Dataplane, sources: Sources<'_>) -> Result<String> {
    render_with(dp, sources, &nexthop_samples(dp, sources)?)
}

/// [`render_metrics`] with the next hops' samples already read.
fn render_with(
    dp: &Dataplane,
    sources: Sources<'_>,
    nexthops: &[NextHopSample<'_>],
) -> Result<String> {
    let tables = sources.tables;
    let flowlet_capacity = (dp.maps.flowlet_capacity()).context("the flowlet table's size")?;
    let daemon = DaemonSample {
        last_reload_successful: sources.loads.last_taken(),
        last_reload_success_seconds: sources.loads.in_force_since(),
        flowlet_capacity,
        flowlet_entries: dp.flowlet_entries_estimate(
            flowlet_capacity,
            &(tables.groups.iter())
                .map(|g| g.entry.generation)
                .collect::<Vec<_>>(),
        )?,
    };
    let verdicts = dp.verdict_totals()?;
    let mut groups = Vec::new();
    for group in &tables.groups {
        groups.push(GroupSample {
            name: &group.name,
            mode: group.entry.mode,
            stats: dp.group_stats(group.id)?,
        });
    }
    let mut overrides = Vec::new();
    for group in &tables.groups {
        for (i, (name, _)) in (0u32..).zip(&group.overrides) {
            let index = override_index(group.id, group.entry.override_half, i);
            overrides.push(OverrideSample {
                name,
                group: &group.name,
                stats: dp.override_stats(index)?,
            });
        }
    }
    let egress = match dp.tx_errors() {
        Some(counted) => Some(egress(tables, &counted?)),
        None => None,
    };
    let events = EventsSample {
        published: sources.flow_events,
        unsent: dp.event_totals()?,
    };
    Ok(metrics::render(
        &daemon,
        &events,
        &verdicts,
        &groups,
        nexthops,
        &overrides,
        egress.as_deref(),
    ))
}

/// Every next hop's counters and telemetry now, group by group.
pub(super) fn nexthop_samples<'a>(
    dp: &Dataplane,
    sources: Sources<'a>,
) -> Result<Vec<NextHopSample<'a>>> {
    let (tables, telemetry, now) = (sources.tables, sources.telemetry, Instant::now());
    let path = |index: u32| {
        telemetry.paths.get(&index).map(|p| PathSample {
            source: p.source,
            band: p.quality.band,
            queued_bytes: p.queued_bytes,
            drains_at_bytes: p.quality.drains_at().unwrap_or(0),
            age_seconds: telemetry.age(index, now).unwrap_or_default(),
            errors: p.errors,
            stale: p.stale,
        })
    };
    let mut nexthops = Vec::new();
    for group in &tables.groups {
        for (spec, &id) in group.specs.iter().zip(&group.members) {
            nexthops.push(NextHopSample {
                group: &group.name,
                spec,
                usable: tables.nexthops[id as usize].flags & NEXTHOP_USABLE != 0,
                stats: dp.nexthop_stats(id)?,
                quality: tables.quality[id as usize],
                path: path(id),
                destinations: (group.classes.iter())
                    .map(|class| {
                        let index = quality_index(class.id, id);
                        DestinationSample {
                            name: &class.name,
                            quality: tables.quality.get(index as usize).copied().unwrap_or(0),
                            path: path(index),
                        }
                    })
                    .collect(),
            });
        }
    }
    Ok(nexthops)
}

/// Every egress interface the next hops use, with what never left it. A
/// counter is named by the next hops holding its ifindex, else by the
/// kernel (a device no next hop uses any more), else by its index (a
/// device gone).
fn egress(tables: &Tables, counted: &[(u32, TxErrors)]) -> Vec<EgressSample> {
    let mut names = BTreeMap::new();
    for group in &tables.groups {
        for (spec, &id) in group.specs.iter().zip(&group.members) {
            let ifindex = tables.nexthops[id as usize].ifindex;
            if ifindex != 0 {
                names.entry(ifindex).or_insert(spec.interface.as_str());
            }
        }
    }
    let mut by_name: BTreeMap<String, TxErrors> = names
        .values()
        .map(|&name| (name.to_owned(), TxErrors::default()))
        .collect();
    for &(ifindex, errors) in counted {
        let name = match names.get(&ifindex) {
            Some(&name) => name.to_owned(),
            None => nix::net::if_::if_indextoname(ifindex)
                .map(|name| name.to_string_lossy().into_owned())
                .unwrap_or_else(|_| format!("ifindex {ifindex}")),
        };
        *by_name.entry(name).or_default() += errors;
    }
    by_name
        .into_iter()
        .map(|(interface, tx_errors)| EgressSample {
            interface,
            tx_errors,
        })
        .collect()
}
