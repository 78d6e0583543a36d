//! `fabriclb testbed demo --scenario NAME`: one fabric, one collective,
//! run through each balancing mode, measured at the spines' queues and the
//! receivers, printed as a table and written as JSON.
//!
//! A scenario (one module each) fixes the fabric's shape and the workload;
//! the runner here owns the list of modes, so a new mode (telemetry-driven
//! ones) is a row in [`modes`], not a change to any scenario.

mod bgp_drain;
pub mod chart;
pub mod equal_paths;
pub mod fabric_herd;
pub mod fabric_matrix;
pub mod fabric_slow_link;
mod link_down;
mod reaction;
mod report;
pub mod restart;
pub mod simulated;
mod slow_spine;
pub mod soak;
pub mod sonic;
mod table;
pub mod te_override;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};

use crate::config::{FlowletChoice, Spray};

use super::fabric::{Fabric, FabricShape};
use super::{
    Collective, CrossTraffic, Exporters, Leaf, Shape, Testbed, leftovers, run_collective_with,
    tear_down_on_signal,
};

pub use bgp_drain::{Drain, DrainPlan, Drains, How, MESSAGES as BGP_DRAIN_MESSAGES, bgp_drain};
pub use link_down::{Failover, LinkFlap, link_down};
pub use reaction::{RateChange, Reaction};
pub use report::{Event, ModeReport, Report, WatchedEvents};
pub use slow_spine::{
    RATES_MBIT as SLOW_SPINE_RATES_MBIT, bgp_slow_spine, cross_traffic, slow_spine, spine_slowdown,
};
pub use table::print;

/// The scenarios `--scenario` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Name {
    /// One spine at a quarter of the others' rate, lossy queues.
    SlowSpine,
    /// The same with queues that never drop.
    SlowSpineLossless,
    /// `slow-spine` with the leaf's routes and next hops from BGP.
    BgpSlowSpine,
    /// Four equal spines, one slowed to a quarter mid-run: the reaction.
    SpineSlowdown,
    /// Four equal spines, one filled by traffic the leaf does not see.
    CrossTraffic,
    /// Four equal spines, one's link down mid-run and up again.
    LinkDown,
    /// The daemon killed and upgraded under traffic ([`restart`]).
    Restart,
    /// BGP routes, one spine drained by session shutdown and by graceful
    /// shutdown ([`bgp_drain`]).
    BgpDrain,
    /// The leaf's hashing and mode changed in SONiC's CONFIG_DB under
    /// traffic ([`sonic`]).
    Sonic,
    /// A controller's overrides pin traffic to a spine, unpin it, and the
    /// pinned spine's link goes down ([`te_override`]).
    TeOverride,
    /// Collectives for ten minutes while links flap, MACs change, the
    /// config, telemetry, BGP and the daemon come and go ([`soak`]).
    Soak,
    /// Four leaves, one spine's port toward one leaf slow, every leaf
    /// adaptive ([`fabric_slow_link`]).
    FabricSlowLink,
    /// `fabric-slow-link` with every router's routes from BGP, no next hop
    /// in any leaf's config.
    FabricBgp,
    /// Four leaves steering, one spine slowing mid-run: herding
    /// ([`fabric_herd`]).
    FabricHerd,
    /// Patterns, degradations, loads and path counts as one table
    /// ([`fabric_matrix`]).
    FabricMatrix,
    /// As many fat flows as equal spines, 8 ([`equal_paths`]).
    EqualPaths8,
    /// The same over 16.
    EqualPaths16,
    /// 64 QPs over 16 equal spines, the testbed's shares beside
    /// `fabriclb simulate`'s ([`equal_paths::simulate_16`]).
    Simulate16,
}

impl Name {
    pub const ALL: [Self; 18] = [
        Self::SlowSpine,
        Self::SlowSpineLossless,
        Self::BgpSlowSpine,
        Self::SpineSlowdown,
        Self::CrossTraffic,
        Self::LinkDown,
        Self::Restart,
        Self::BgpDrain,
        Self::Sonic,
        Self::TeOverride,
        Self::Soak,
        Self::FabricSlowLink,
        Self::FabricBgp,
        Self::FabricHerd,
        Self::FabricMatrix,
        Self::EqualPaths8,
        Self::EqualPaths16,
        Self::Simulate16,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::SlowSpine => "slow-spine",
            Self::SlowSpineLossless => "slow-spine-lossless",
            Self::BgpSlowSpine => "bgp-slow-spine",
            Self::SpineSlowdown => "spine-slowdown",
            Self::CrossTraffic => "cross-traffic",
            Self::LinkDown => "link-down",
            Self::Restart => "restart",
            Self::BgpDrain => "bgp-drain",
            Self::Sonic => "sonic",
            Self::TeOverride => "te-override",
            Self::Soak => "soak",
            Self::FabricSlowLink => "fabric-slow-link",
            Self::FabricBgp => "fabric-bgp",
            Self::FabricHerd => "fabric-herd",
            Self::FabricMatrix => "fabric-matrix",
            Self::EqualPaths8 => "equal-paths-8",
            Self::EqualPaths16 => "equal-paths-16",
            Self::Simulate16 => "simulate-16",
        }
    }

    /// The scenario at full length; `None` for those that run on a
    /// fabric of several leaves, not on the single-leaf testbed.
    pub fn scenario(self) -> Option<Scenario> {
        Some(match self {
            Self::FabricSlowLink | Self::FabricBgp | Self::FabricHerd | Self::FabricMatrix => {
                return None;
            }
            Self::SlowSpine => slow_spine(super::Queues::Lossy, slow_spine::MESSAGES),
            Self::SlowSpineLossless => slow_spine(super::Queues::Lossless, slow_spine::MESSAGES),
            Self::BgpSlowSpine => bgp_slow_spine(slow_spine::MESSAGES),
            Self::SpineSlowdown => spine_slowdown(slow_spine::MESSAGES),
            Self::CrossTraffic => cross_traffic(slow_spine::MESSAGES),
            Self::LinkDown => link_down(link_down::MESSAGES),
            Self::Restart => restart::scenario(restart::SECONDS),
            Self::BgpDrain => bgp_drain(bgp_drain::MESSAGES),
            Self::Sonic => sonic::scenario(sonic::SECONDS),
            Self::TeOverride => te_override::scenario(te_override::SECONDS),
            Self::Soak => soak::scenario(),
            Self::EqualPaths8 => equal_paths::equal_paths(self.as_str(), 8, equal_paths::MESSAGES),
            Self::EqualPaths16 => {
                equal_paths::equal_paths(self.as_str(), 16, equal_paths::MESSAGES)
            }
            Self::Simulate16 => equal_paths::simulate_16(equal_paths::MESSAGES),
        })
    }

    /// The rows the scenario runs: every mode, but `link-down` and
    /// `bgp-drain` run ECMP alone (flowlets move flows at their gaps
    /// anyway, which would hide what the failure moved), with links
    /// refreshed only every ten minutes so that only events explain the
    /// failover.
    pub fn modes(self) -> Vec<Mode> {
        match self {
            Self::LinkDown | Self::BgpDrain => modes()
                .into_iter()
                .take(1)
                .map(|m| Mode {
                    daemon_args: vec!["--refresh-interval-ms".into(), "600000".into()],
                    ..m
                })
                .collect(),
            // One leaf steering: what the other choice rules cost where
            // nothing herds.
            Self::SlowSpine => {
                let all = modes();
                let others = other_choices(&all);
                all.into_iter().chain(others).collect()
            }
            // The simulator reads no telemetry.
            Self::Simulate16 => modes().into_iter().filter(|m| !m.telemetry).collect(),
            _ => modes(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error(
    "no scenario {0:?}; there are slow-spine, slow-spine-lossless, bgp-slow-spine, \
     spine-slowdown, cross-traffic, link-down, restart, bgp-drain, sonic, te-override, soak, \
     fabric-slow-link, fabric-bgp, fabric-herd, fabric-matrix, equal-paths-8, \
     equal-paths-16 and simulate-16"
)]
pub struct UnknownScenario(String);

impl std::str::FromStr for Name {
    type Err = UnknownScenario;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|n| n.as_str() == s)
            .ok_or_else(|| UnknownScenario(s.to_owned()))
    }
}

/// A fabric and the collective every mode runs over it.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: &'static str,
    pub shape: Shape,
    /// A spine's rate change during the run, whose reaction is measured.
    pub change: Option<RateChange>,
    /// Traffic through one spine from outside the leaf's view.
    pub cross: Option<Cross>,
    /// A spine's link down and up during the run, whose failover is
    /// measured.
    pub flap: Option<LinkFlap>,
    /// A spine drained by BGP during the run, whose convergence is
    /// measured.
    pub drain: Option<DrainPlan>,
    /// The workload; its `leaf` is replaced by each mode's.
    pub collective: Collective,
    /// One line on the workload for the table's header.
    pub workload: String,
}

/// `mbit` Mbit/s of UDP through spine `spine` (1-based) for each run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cross {
    pub spine: usize,
    pub mbit: u32,
}

/// A way to run the leaf: a row of the table.
#[derive(Clone, Debug)]
pub struct Mode {
    pub name: &'static str,
    /// The spine group's TOML keys (see [`Testbed::leaf_config`]).
    pub group: String,
    /// Whether the mode steers by path telemetry.
    pub telemetry: bool,
    /// How its new flowlets pick a next hop.
    pub choice: FlowletChoice,
    /// Which RoCEv2 packets a per-packet group sprays.
    pub spray: Spray,
    /// Extra `fabriclb run` arguments.
    pub daemon_args: Vec<String>,
}

/// Bytes of a RoCE-MTU frame on the wire as TBF counts them: Ethernet 14,
/// IPv4 20, UDP 8, BTH 12, payload, ICRC 4 (and a 16-byte RETH on the
/// first of a message's 32 packets, half a byte a packet, left out): what
/// the scenarios pace their senders by.
pub(super) const FRAME_BYTES: u32 = super::ROCE_MTU + 58;

/// The flowlet gap of the scenarios' flowlet and per-packet rows. A gap
/// must outlast the difference between the paths' delays, or a flow that
/// pauses mid-message and moves to a shorter queue overtakes itself. The
/// testbed's links are 2000 times slower than a 400G fabric's and its
/// queues hold 23-31 ms at the single-leaf testbed's rates where a
/// switch's hold microseconds, so the switch default of 256 us scales up
/// to 25 ms here; messages on one QP are still 60 ms apart, so every
/// message is a flowlet of its own. A fabric's 10 Mbit/s ports hold up to
/// 72 ms: a sender that stalls mid-message longer than the gap and moves
/// off a full one overtakes itself, which the rows count as late packets.
pub const FLOWLET_GAP_US: u32 = 25_000;

/// Every mode a scenario runs, in table order. ECMP hashes the default
/// fields (five-tuple and destination QP). The telemetry rows read each
/// spine's queue toward the far leaf from the exporter on that spine.
pub fn modes() -> Vec<Mode> {
    let mode = |name, keys: &str, telemetry| Mode {
        name,
        group: if name == "ecmp" {
            keys.to_owned()
        } else {
            format!("mode = \"{name}\"\nflowlet_gap_us = {FLOWLET_GAP_US}\n{keys}")
        },
        telemetry,
        choice: FlowletChoice::default(),
        spray: Spray::default(),
        daemon_args: Vec::new(),
    };
    let remote = "telemetry = \"remote\"";
    vec![
        mode("ecmp", "", false),
        mode("flowlet", "", false),
        mode("per-packet", "", false),
        mode("flowlet", remote, true),
        mode("per-packet", remote, true),
    ]
}

/// The telemetry rows of `modes` again with each choice rule but the
/// default, rule by rule.
pub fn other_choices(modes: &[Mode]) -> Vec<Mode> {
    (FlowletChoice::NAMES.into_iter())
        .map(|(_, choice)| choice)
        .filter(|&choice| choice != FlowletChoice::default())
        .flat_map(|choice| {
            (modes.iter().filter(|m| m.telemetry)).map(move |m| with_choice(m.clone(), choice))
        })
        .collect()
}

/// `mode` with its new flowlets drawn by `choice`.
pub(super) fn with_choice(mode: Mode, choice: FlowletChoice) -> Mode {
    Mode {
        group: format!("{}\nflowlet_choice = \"{choice}\"", mode.group),
        choice,
        ..mode
    }
}

/// `mode` spraying the RoCEv2 packets `spray` says (`Spray::All`: every
/// one, for receivers that place packets out of order).
pub(super) fn with_spray(mode: Mode, spray: Spray) -> Mode {
    Mode {
        group: format!("{}\nspray = \"{spray}\"", mode.group),
        spray,
        ..mode
    }
}

/// Builds testbed `bed_name` for scenario `name`, runs it through every
/// mode, prints the table, writes the JSON to `json` if given, tears down
/// (also on failure and Ctrl-C).
pub fn run(bed_name: &str, name: Name, json: Option<&Path>) -> Result<()> {
    match name {
        Name::Restart => return restart::run(bed_name, json),
        Name::Sonic => return sonic::run(bed_name, json),
        Name::TeOverride => return te_override::run(bed_name, json),
        Name::Soak => return soak::run(bed_name, soak::SECONDS, json),
        Name::FabricSlowLink => return fabric_slow_link::run(bed_name, false, json),
        Name::FabricBgp => return fabric_slow_link::run(bed_name, true, json),
        Name::FabricHerd => return fabric_herd::run(bed_name, json),
        Name::FabricMatrix => return fabric_matrix::run(bed_name, json),
        _ => {}
    }
    let scenario = name
        .scenario()
        .with_context(|| format!("scenario {} runs on a fabric", name.as_str()))?;
    let report = on_own_bed(bed_name, &scenario.shape, |bed, exe, workdir| {
        measure(bed, exe, workdir, &scenario, &name.modes())
    })
    .with_context(|| format!("scenario {}", scenario.name))?;
    print(&scenario, &report);
    if let Some(path) = json {
        report.write(path)?;
        println!("\nwrote {}", path.display());
        said_chart(chart::write_beside(path, &serde_json::to_value(&report)?)?);
    }
    Ok(())
}

/// Builds testbed `bed_name` with `shape`, runs `measure` on it with this
/// binary and a scratch directory, and tears down (also on failure and
/// Ctrl-C): what a scenario that runs apart from the modes shares.
pub fn on_own_bed<T>(
    bed_name: &str,
    shape: &Shape,
    measure: impl FnOnce(&Testbed, &Path, &Path) -> Result<T>,
) -> Result<T> {
    on_own(bed_name, || Testbed::up(bed_name, shape.clone()), measure)
}

/// [`on_own_bed`] for a fabric of several leaves ([`Fabric`]).
pub fn on_own_fabric<T>(
    bed_name: &str,
    shape: FabricShape,
    measure: impl FnOnce(&Fabric, &Path, &Path) -> Result<T>,
) -> Result<T> {
    on_own(bed_name, || Fabric::up(bed_name, shape), measure)
}

/// Builds a bed named `bed_name` with `up` (torn down on Ctrl-C, and by
/// the bed's own drop), runs `measure` on it with this binary and a
/// scratch directory, and removes the directory.
fn on_own<B, T>(
    bed_name: &str,
    up: impl FnOnce() -> Result<B>,
    measure: impl FnOnce(&B, &Path, &Path) -> Result<T>,
) -> Result<T> {
    let exe = std::env::current_exe().context("locating the fabriclb binary")?;
    let workdir = std::env::temp_dir().join(format!("fabriclb-scenario-{}", std::process::id()));
    std::fs::create_dir_all(&workdir)?;
    leftovers::hold(&workdir);
    tear_down_on_signal(bed_name)?;
    let result = up().and_then(|bed| measure(&bed, &exe, &workdir));
    leftovers::remove(&workdir);
    result
}

/// Writes the runs of a scenario run apart from the modes as JSON to
/// `path`, if given, and says so: `{"scenario": NAME, "modes": [RUN, ...]}`,
/// as [`Report`] writes the others.
pub fn write_runs<T: serde::Serialize>(
    scenario: &str,
    modes: &[T],
    path: Option<&Path>,
) -> Result<()> {
    #[derive(serde::Serialize)]
    struct Runs<'a, T> {
        scenario: &'a str,
        modes: &'a [T],
    }
    if let Some(path) = path {
        let runs = serde_json::to_value(Runs { scenario, modes })?;
        std::fs::write(path, serde_json::to_string_pretty(&runs)? + "\n")?;
        println!("\nwrote {}", path.display());
        said_chart(chart::write_beside(path, &runs)?);
    }
    Ok(())
}

/// Says where the chart beside a report went, if it has one.
fn said_chart(path: Option<PathBuf>) {
    if let Some(path) = path {
        println!("wrote {}", path.display());
    }
}

/// Runs `scenario`'s collective through each of `modes` on `bed` (built
/// with the scenario's shape) with the `fabriclb` binary.
pub fn measure(
    bed: &Testbed,
    fabriclb: &Path,
    workdir: &Path,
    scenario: &Scenario,
    modes: &[Mode],
) -> Result<Report> {
    let mut capacity = scenario
        .shape
        .capacity_mbit()
        .context("a scenario shapes every spine")?;
    if let Some(change) = &scenario.change {
        // What is left after the change bounds the ideal.
        let before = scenario.shape.spine_rate_mbit(change.spine).unwrap_or(0);
        capacity = capacity - u64::from(before) + u64::from(change.rate_mbit);
    }
    if let Some(cross) = &scenario.cross {
        capacity -= u64::from(cross.mbit);
    }
    let mut report = Report {
        scenario: scenario.name.to_owned(),
        modes: Vec::new(),
    };
    // What the `remote` telemetry rows read.
    let _exporters = modes
        .iter()
        .any(|m| m.telemetry)
        .then(|| Exporters::start(bed))
        .transpose()?;
    for mode in modes {
        let collective = Collective {
            leaf: Leaf::Fabriclb {
                group: mode.group.clone(),
            },
            ..scenario.collective.clone()
        };
        let args: Vec<&str> = mode.daemon_args.iter().map(String::as_str).collect();
        let during = |_: Option<&_>| {
            let started = Instant::now();
            let reaction = match &scenario.change {
                Some(change) => Some(reaction::measure(bed, change, started)?),
                None => None,
            };
            let failover = match &scenario.flap {
                Some(flap) => Some(link_down::measure(bed, &collective, flap, started)?),
                None => None,
            };
            let drains = match &scenario.drain {
                Some(plan) => Some(bgp_drain::measure(bed, &collective, plan, started)?),
                None => None,
            };
            anyhow::Ok((reaction, failover, drains))
        };
        let cross = scenario
            .cross
            .map(|c| CrossTraffic::start(bed, c.spine, c.mbit))
            .transpose()?;
        let (run, (reaction, failover, drains)) =
            run_collective_with(bed, fabriclb, workdir, &collective, &args, during)
                .with_context(|| format!("mode {}", mode.name))?;
        let spines = scenario.shape.spines;
        let watched = WatchedEvents::of(&run.flow_events, spines, slowest(scenario));
        let cross = cross.map(CrossTraffic::stop).transpose()?;
        if let Some(change) = &scenario.change {
            // The next mode starts from the scenario's shape again.
            let rate = scenario.shape.spine_rate_mbit(change.spine).unwrap_or(0);
            bed.set_spine_rate(change.spine, rate)?;
        }
        let row = ModeReport::new(mode, &run, capacity, reaction)
            .with_cross(cross)
            .with_failover(failover.as_ref().map(|f| f.failover), &run)
            .with_timeline(failover.map(|f| f.timeline))
            .with_drains(drains, &run)
            .with_flow_events(Some(watched));
        let simulated = simulated::simulate(bed, scenario, mode, &row.spine_share)
            .with_context(|| format!("simulating mode {}", mode.name))?;
        report.modes.push(row.with_simulated(simulated));
    }
    Ok(report)
}

/// The spine a scenario leaves slowest (1-based): the one its change
/// slows, or the one of least rate where rates differ.
fn slowest(scenario: &Scenario) -> Option<usize> {
    if let Some(change) = &scenario.change {
        return Some(change.spine);
    }
    let shape = &scenario.shape;
    let rates: Vec<(usize, u32)> = (1..=shape.spines)
        .filter_map(|j| Some((j, shape.spine_rate_mbit(j)?)))
        .collect();
    let least = rates.iter().min_by_key(|(_, r)| *r)?;
    rates.iter().any(|(_, r)| r != &least.1).then_some(least.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        for name in Name::ALL {
            assert_eq!(name.as_str().parse::<Name>().ok(), Some(name));
            if let Some(scenario) = name.scenario() {
                assert_eq!(scenario.name, name.as_str());
            }
        }
        assert!("fast-spine".parse::<Name>().is_err());
    }

    /// Rows are told apart by name and telemetry.
    #[test]
    fn modes_are_distinct() {
        let modes = modes();
        let names: Vec<(&str, bool)> = modes.iter().map(|m| (m.name, m.telemetry)).collect();
        assert_eq!(
            names,
            [
                ("ecmp", false),
                ("flowlet", false),
                ("per-packet", false),
                ("flowlet", true),
                ("per-packet", true)
            ]
        );
        for mode in modes {
            assert_eq!(
                mode.group.contains("telemetry = \"remote\""),
                mode.telemetry
            );
        }
    }
}
