//! What `fabriclb simulate` predicts for a scenario's row: the leaf's
//! config and the row's collective run in memory, beside what the leaf
//! forwarded. Only where the simulator models what the row does: no
//! telemetry (it has no queues to read), no event during the run, static
//! routes (a config that learns its routes has none offline).

use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::{FRAME_BYTES, Mode, Scenario};
use crate::config::{self, Mode as GroupMode};
use crate::simulate::collective::CollectiveSpec;
use crate::simulate::{self, PathRates};
use crate::testbed::{Routing, Testbed, host_addr, receiver_addr};

/// A row's simulation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Simulated {
    /// Each spine's share of the bytes (`s1` first).
    pub spine_share: Vec<f64>,
    pub spine_mmr: f64,
    pub flowlet_moves: u64,
    pub in_message_reorders: u64,
    /// The largest difference between a spine's share on the testbed and
    /// in the simulation, in share (0.01 is a percentage point).
    pub share_gap: f64,
}

/// The simulation of `mode`'s row of `scenario` on `bed`, beside the
/// `measured` spine shares; `None` where the simulator does not model
/// the row.
pub fn simulate(
    bed: &Testbed,
    scenario: &Scenario,
    mode: &Mode,
    measured: &[f64],
) -> Result<Option<Simulated>> {
    let modelled = !mode.telemetry
        && scenario.change.is_none()
        && scenario.cross.is_none()
        && scenario.flap.is_none()
        && scenario.drain.is_none()
        && bed.shape().routing == Routing::Static;
    if !modelled {
        return Ok(None);
    }
    let text = bed.leaf_config(&mode.group);
    let config = config::parse(&text, Path::new("leaf.toml")).context("the leaf's config")?;
    let spec = spec(scenario);
    let shape = &scenario.shape;
    let by_interface = (1..=shape.spines)
        .filter_map(|j| {
            Some((
                format!("s{j}"),
                u64::from(shape.spine_rate_mbit(j)?) * 1_000_000,
            ))
        })
        .collect();
    let rates = PathRates {
        default: spec.rate_bits_per_s,
        by_interface,
    };
    let group_mode = (GroupMode::NAMES.iter())
        .find(|(name, _)| *name == mode.name)
        .map(|(_, m)| *m)
        .with_context(|| format!("no group mode {:?}", mode.name))?;
    let runs = simulate::run_modes(&config, &[group_mode], &spec.frames(), &rates, None)?;
    let outcome = &runs[0].outcome;
    let shares = outcome.shares();
    let spine_share: Vec<f64> = (1..=shape.spines)
        .map(|j| {
            let name = format!("s{j}");
            (outcome.paths.iter().zip(&shares))
                .find(|(p, _)| p.interface == name)
                .map_or(0.0, |(_, share)| *share)
        })
        .collect();
    let share_gap = (spine_share.iter().zip(measured))
        .map(|(s, m)| (s - m).abs())
        .fold(0.0, f64::max);
    Ok(Some(Simulated {
        spine_mmr: outcome.busiest_over_mean().unwrap_or(0.0),
        spine_share,
        flowlet_moves: outcome.flowlet_moves,
        in_message_reorders: outcome.reorders,
        share_gap,
    }))
}

/// `scenario`'s collective as `simulate --collective` takes it: the
/// testbed's ranks and addresses, each sender at its paced rate.
pub fn spec(scenario: &Scenario) -> CollectiveSpec {
    let c = &scenario.collective;
    let rate_pps = c.pace.rate_pps.unwrap_or(0);
    CollectiveSpec {
        exchange: c.exchange.clone(),
        ranks: scenario.shape.hosts,
        senders: c.senders.min(scenario.shape.hosts),
        // Unpaced senders send as fast as a veth takes them: call it 10G.
        rate_bits_per_s: match rate_pps {
            0 => 10_000_000_000,
            pps => pps * u64::from(FRAME_BYTES) * 8,
        },
        gap_ns: c.pace.gap.as_nanos() as u64,
        jitter_ns: 0,
        src: host_addr(1),
        dst: receiver_addr(1),
        stride: u32::from(host_addr(2)) - u32::from(host_addr(1)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testbed::scenario::equal_paths::{SIMULATE_QPS, SIMULATE_SMALL, simulate_16};

    /// The simulation's collective is the testbed's: its ranks at the
    /// hosts' addresses, each sender at its paced rate of full frames.
    #[test]
    fn the_spec_is_the_scenarios_collective() {
        let scenario = simulate_16(10);
        let spec = spec(&scenario);
        let pps = scenario.collective.pace.rate_pps.unwrap();
        assert_eq!(
            spec.describe(),
            format!(
                "pattern=ring,ranks=16,senders=16,qps={SIMULATE_QPS},message=262144,messages=10,\
                 mtu={},small={SIMULATE_SMALL},port-per-qp=yes,rate={}bit,gap=30000000ns,jitter=0ns,\
                 src=198.18.101.1,dst=198.19.101.1,stride=256",
                scenario.collective.exchange.mtu,
                pps * u64::from(FRAME_BYTES) * 8
            )
        );
        // Rank 2 sends to rank 3, host 4's receiver, as the testbed's.
        let workload = spec.workload(2);
        assert_eq!(workload.ranks[3], receiver_addr(4));
    }
}
