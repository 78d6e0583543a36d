//! `fabriclb simulate`: traffic run through the data plane's choice with
//! no switch. A config's tables are built in memory
//! ([`crate::inspect::offline`]); each frame, at the time it reaches the
//! box, goes through the stages before the group's choice as `explain`
//! walks them, then through `lb_common::steer::next_hop`, the program's
//! own choice, over one CPU's state kept in memory
//! ([`crate::inspect::cpu_state`]). Each next
//! hop is a link of one rate ([`links`]), so what the choice did to a
//! message's order shows as in-message reorders at the receiver.

pub mod collective;
mod links;

pub use links::PathRates;
pub mod report;

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};

use lb_common::abi::NEXTHOP_USABLE;
use lb_common::abi::events::EVENT_MOVE;
use lb_common::packet::parse::{FlowFields, parse};
use lb_common::verdict::Reason;

use crate::config::{Config, Mode};
use crate::daemon::flow_events::cause_name;
use crate::inspect::cpu_state::CpuState;
use crate::inspect::explain::{Ahead, up_to_the_choice};
use crate::inspect::maps::InspectError;
use crate::inspect::offline::{Offline, OfflineError};
use crate::inspect::view::MapView;
use links::Links;
use report::ModeRun;

#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    #[error("a path rate for interface {0:?}, which no next hop of the config uses")]
    NoSuchPath(String),
    #[error("ingress {0:?} is not one of the config's interfaces")]
    NoSuchIngress(String),
    #[error("building the config's tables: {0}")]
    Tables(#[from] OfflineError),
    #[error(transparent)]
    Inspect(#[from] InspectError),
}

/// What a simulation assumes of the state only a running box has.
pub fn assumed(rates: &PathRates, ingress: Option<&str>, tables: &Offline) -> Vec<String> {
    let port = match ingress {
        Some(name) => format!("every frame in on {name}"),
        None => "no ingress port (overrides that name one do not match)".to_owned(),
    };
    let mut notes = vec![
        format!(
            "one CPU; every next hop up; path qualities at their default (no telemetry); {port}"
        ),
        format!(
            "each next hop a link of {} Gbit/s{}, first in first out",
            rates.default as f64 / 1e9,
            (rates.by_interface.iter())
                .map(|(name, rate)| format!(", {name}'s {} Gbit/s", *rate as f64 / 1e9))
                .collect::<String>()
        ),
    ];
    notes.extend(tables.config_notes().iter().cloned());
    notes
}

/// Runs `frames` through `config`'s tables once per mode of `modes`,
/// with every group in that mode, each frame in on `ingress` (one of the
/// config's interfaces) if given.
pub fn run_modes(
    config: &Config,
    modes: &[Mode],
    frames: &[Arriving],
    rates: &PathRates,
    ingress: Option<&str>,
) -> Result<Vec<ModeRun>, SimulateError> {
    modes
        .iter()
        .map(|&mode| {
            let mut config = config.clone();
            for group in &mut config.groups {
                group.mode = mode;
            }
            let tables = Offline::build(&config)?;
            let ingress = match ingress {
                Some(name) => (tables.ifindex(name))
                    .ok_or_else(|| SimulateError::NoSuchIngress(name.to_owned()))?,
                None => 0,
            };
            let outcome = simulate(&tables, frames, rates, ingress)?;
            Ok(ModeRun { mode, outcome })
        })
        .collect()
}

/// A frame as it reaches the box, and when (ns from the traffic's start).
#[derive(Clone, Debug)]
pub struct Arriving {
    pub at_ns: u64,
    pub frame: Vec<u8>,
}

/// What one run of the traffic through a config's tables did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    pub sent_packets: u64,
    pub sent_bytes: u64,
    /// Packets by verdict (`forwarded`, `no_route`, ...).
    pub verdicts: BTreeMap<&'static str, u64>,
    /// Every member of every group the traffic reached, in the group's
    /// order, with what it carried.
    pub paths: Vec<PathLoad>,
    pub new_flowlets: u64,
    pub flowlet_moves: u64,
    /// Flowlet moves by cause (`choice`, `failover`, ...).
    pub moves: BTreeMap<&'static str, u64>,
    pub sprayed: u64,
    /// Packets of multi-packet RoCEv2 messages that reached their
    /// receiver after one sent later in the same message.
    pub reorders: u64,
    /// From the first frame's arrival to the last one's delivery over its
    /// next hop's link.
    pub completion_ns: u64,
}

/// One next hop and what it carried.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathLoad {
    pub group: String,
    pub interface: String,
    /// As configured: `eth4 10.0.1.1`.
    pub next_hop: String,
    pub packets: u64,
    pub bytes: u64,
}

impl Outcome {
    /// The busiest next hop's bytes over the mean of its group's, for the
    /// group that carried most; 1.0 is even.
    pub fn busiest_over_mean(&self) -> Option<f64> {
        let mut groups: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
        for path in &self.paths {
            groups.entry(&path.group).or_default().push(path.bytes);
        }
        let busiest = groups.values().max_by_key(|b| b.iter().sum::<u64>())?;
        let total: u64 = busiest.iter().sum();
        let max = *busiest.iter().max()?;
        (total > 0).then(|| max as f64 * busiest.len() as f64 / total as f64)
    }

    /// Each path's share of the bytes its group carried.
    pub fn shares(&self) -> Vec<f64> {
        let mut totals: HashMap<&str, u64> = HashMap::new();
        for path in &self.paths {
            *totals.entry(&path.group).or_default() += path.bytes;
        }
        (self.paths.iter())
            .map(|p| match totals[p.group.as_str()] {
                0 => 0.0,
                total => p.bytes as f64 / total as f64,
            })
            .collect()
    }
}

/// Runs `frames` (in time order) through `tables`, each next hop a link
/// of its rate in `rates`, each frame in on ifindex `ingress` (0: none).
pub fn simulate(
    tables: &Offline,
    frames: &[Arriving],
    rates: &PathRates,
    ingress: u32,
) -> Result<Outcome, SimulateError> {
    let mut by_id = Vec::new();
    for (name, rate) in &rates.by_interface {
        let ids: Vec<u32> = (tables.groups().iter())
            .flat_map(|g| g.members.iter().zip(&g.specs))
            .filter(|(_, spec)| spec.interface == *name)
            .map(|(id, _)| *id)
            .collect();
        if ids.is_empty() {
            return Err(SimulateError::NoSuchPath(name.clone()));
        }
        by_id.extend(ids.into_iter().map(|id| (id, *rate)));
    }
    let mut maps = CpuState::new(tables, 0, 0);
    let mut links = Links::new(rates.default, by_id);
    // The stages before the choice depend on the flow alone: walked once
    // per flow (and TTL verdict). Err: the verdict came before the choice.
    let mut ahead: HashMap<(FlowFields, bool), Result<Ahead, Reason>> = HashMap::new();
    let mut outcome = Outcome::default();
    for arriving in frames {
        let frame = &arriving.frame;
        let len = frame.len() as u64;
        outcome.sent_packets += 1;
        outcome.sent_bytes += len;
        maps.set_now(arriving.at_ns);
        let verdict = match parse(frame.as_slice()) {
            Err(reason) => reason,
            Ok(parsed) => {
                let key = (parsed.flow, parsed.ttl <= 1);
                let stages = match ahead.entry(key) {
                    Entry::Occupied(known) => *known.get(),
                    Entry::Vacant(new) => *new.insert(before_choice(tables, frame, ingress)?),
                };
                match stages {
                    Err(reason) => reason,
                    Ok(stages) => {
                        let chosen = stages.choose(&mut maps, len, parsed.bth.as_ref());
                        maps.failed()?;
                        if let Some(event) = maps.take_noted().filter(|e| e.kind == EVENT_MOVE) {
                            *outcome.moves.entry(cause_name(event.cause)).or_default() += 1;
                        }
                        match chosen.and_then(|c| sendable(tables, c.nh_id).map(|()| c)) {
                            Ok(choice) => {
                                maps.forwarded(choice.nh_id, len, choice.epoch);
                                links.send(choice.nh_id, arriving.at_ns, len, &parsed);
                                Reason::Forwarded
                            }
                            Err(reason) => reason,
                        }
                    }
                }
            }
        };
        *outcome.verdicts.entry(verdict.name()).or_default() += 1;
    }
    let first = frames.first().map_or(0, |f| f.at_ns);
    outcome.completion_ns = links.last_delivery_ns().saturating_sub(first);
    outcome.reorders = links.reorders();
    let reached: Vec<u32> = ahead
        .values()
        .filter_map(|a| a.as_ref().ok().map(|a| a.destination.group))
        .collect();
    for group in tables.groups().iter().filter(|g| reached.contains(&g.id)) {
        let stats = maps.group_stats(group.id);
        outcome.new_flowlets += stats.new_flowlets;
        outcome.flowlet_moves += stats.flowlet_moves;
        outcome.sprayed += stats.sprayed;
        for (id, spec) in group.members.iter().zip(&group.specs) {
            let (packets, bytes) = links.carried(*id);
            outcome.paths.push(PathLoad {
                group: group.name.clone(),
                interface: spec.interface.clone(),
                next_hop: spec.to_string(),
                packets,
                bytes,
            });
        }
    }
    Ok(outcome)
}

/// The stages of `frame` before its group's choice, as explain walks them,
/// in on ifindex `ingress` (0: none, overrides naming one not matched).
fn before_choice(
    tables: &Offline,
    frame: &[u8],
    ingress: u32,
) -> Result<Result<Ahead, Reason>, InspectError> {
    let (e, ahead) = up_to_the_choice(tables, frame, ingress)?;
    Ok(ahead.ok_or(e.verdict))
}

/// Whether next hop `nh_id` can take the packet, as the program checks
/// after the choice: usable, its port in the devmap.
fn sendable(tables: &Offline, nh_id: u32) -> Result<(), Reason> {
    match tables.nexthop(nh_id) {
        Ok(Some(nh))
            if nh.flags & NEXTHOP_USABLE != 0 && tables.has_port(nh.ifindex).unwrap_or(false) =>
        {
            Ok(())
        }
        _ => Err(Reason::NoNextHop),
    }
}

#[cfg(test)]
mod tests;
