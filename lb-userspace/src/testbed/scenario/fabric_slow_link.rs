//! `--scenario fabric-slow-link`: four leaves, four spines, fabriclb on
//! every leaf; spine 4's port toward leaf 3 runs at a quarter of the
//! others' rate. An all-to-all over every host, ranks dealt to the leaves
//! in turn, offers 80% of what leaf 3 can take in.
//!
//! A leaf blind to the spines' queues sends a quarter of its leaf-3
//! traffic through spine 4 and loses most of what exceeds the slow port.
//! One that rates each spine by its queue toward each destination moves
//! the leaf-3 traffic off spine 4 and keeps the rest there: spine 4 has
//! room toward leaves 1, 2 and 4 (`healthy_share_on_degraded_spine`, the
//! traffic toward them that crosses spine 4 over its even share).

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use serde::Serialize;

use super::{FLOWLET_GAP_US, FRAME_BYTES, Mode, modes, on_own_fabric, other_choices, write_runs};
use crate::testbed::drops::unaccounted;
use crate::testbed::fabric::{
    Fabric, FabricReport, FabricShape, FlexCounters, LinkRates, rank_place, run_fabric_collective,
};
use crate::testbed::queues::per_port;
use crate::testbed::{Collective, Exporters, Leaf, Queues, ROCE_MTU, Routing};
use crate::traffic::{Exchange, Pace, Pattern};

pub const LEAVES: usize = 4;
pub const SPINES: usize = 4;
const HOSTS: usize = 2;
/// Every spine port's rate, Mbit/s, and the slow one's.
const RATE_MBIT: u32 = 40;
const SLOW_MBIT: u32 = 10;
/// The slow port: spine 4's toward leaf 3.
pub const SLOW_SPINE: usize = 4;
pub const SLOW_LEAF: usize = 3;
/// Offered load as a share of what the slow port's leaf can take in.
const LOAD: f64 = 0.8;
pub(super) const QPS: u32 = 4;
const MESSAGE_BYTES: u32 = 65536;
/// Messages per connection at full length: about 1.7 s of sending.
pub const MESSAGES: u32 = 28;

/// The fabric, statically routed.
pub fn shape() -> FabricShape {
    FabricShape {
        leaves: LEAVES,
        spines: SPINES,
        hosts: HOSTS,
        rates: LinkRates::all(RATE_MBIT).with(SLOW_SPINE, SLOW_LEAF, SLOW_MBIT),
        queues: Queues::Lossy,
        routing: Routing::Static,
    }
}

/// The fabric with every router's routes from BGP (`fabric-bgp`): each
/// leaf's fabriclb follows them, and no config names a next hop.
pub fn bgp_shape() -> FabricShape {
    FabricShape {
        routing: Routing::Bgp,
        ..shape()
    }
}

/// `fabric-bgp`'s rows: the blind ones, the steered ones reading each
/// learned spine's exporter, then its COUNTERS_DB, over the management
/// network, and flowlets steered by `linux`, all a group following BGP
/// could read before templates: the leaf's own ports, which see nothing
/// XDP forwards.
pub fn bgp_modes() -> Vec<Mode> {
    let all = modes();
    let counters: Vec<Mode> = (all.iter())
        .filter(|m| m.telemetry)
        .map(|m| with_source(m, COUNTERS_DB))
        .collect();
    let linux: Vec<Mode> = (all.iter())
        .filter(|m| m.name == "flowlet" && !m.telemetry)
        .map(|m| Mode {
            group: format!("{}telemetry = \"{LINUX}\"\n", m.group),
            telemetry: true,
            ..m.clone()
        })
        .collect();
    all.into_iter().chain(counters).chain(linux).collect()
}

/// Cross-rack traffic into each leaf of `shape` under `pattern` over
/// every host, by leaf (index 0 for leaf 1): the connections into it from
/// other leaves, and the senders' rates they carry (each sender's rate
/// split evenly over its connections); and all connections.
fn connections(shape: &FabricShape, pattern: Pattern) -> (Vec<(u32, f64)>, u32) {
    let ranks = shape.leaves * shape.hosts;
    let mut into = vec![(0, 0.0); shape.leaves];
    let mut all = 0;
    for rank in 0..ranks {
        let leaf = rank_place(shape.leaves, rank).0;
        let peers = pattern.peers(ranks, rank);
        for &peer in &peers {
            let to = rank_place(shape.leaves, peer).0;
            all += 1;
            if to != leaf {
                into[to - 1].0 += 1;
                into[to - 1].1 += 1.0 / peers.len() as f64;
            }
        }
    }
    (into, all)
}

/// The leaf's capacity in from the spines, Mbit/s.
pub(super) fn capacity_into(shape: &FabricShape, leaf: usize) -> u32 {
    (1..=shape.spines)
        .filter_map(|j| shape.rates.rate(j, leaf))
        .sum()
}

/// The all-to-all over [`shape`], `messages` per connection, paced so
/// that the slow port's leaf is offered [`LOAD`] of its capacity.
pub fn collective(messages: u32) -> Collective {
    paced(&shape(), Pattern::AllToAll, LOAD, messages)
}

/// `pattern` over every host of `shape`, `messages` per connection, every
/// sender paced alike so that the leaf offered most for what it takes
/// in from the spines is offered `load` of it.
pub(super) fn paced(shape: &FabricShape, pattern: Pattern, load: f64, messages: u32) -> Collective {
    let (into, _) = connections(shape, pattern);
    let mbit_per_sender = (1..=shape.leaves)
        .filter(|&leaf| into[leaf - 1].1 > 0.0)
        .map(|leaf| f64::from(capacity_into(shape, leaf)) / into[leaf - 1].1)
        .fold(f64::INFINITY, f64::min);
    let rate_pps = load * mbit_per_sender * 1e6 / 8.0 / f64::from(FRAME_BYTES);
    Collective {
        exchange: Exchange {
            pattern,
            qps_per_connection: QPS,
            message_bytes: MESSAGE_BYTES,
            mtu: ROCE_MTU,
            messages,
            source_port_per_qp: true,
            small_messages: 0,
        },
        pace: Pace {
            rate_pps: Some(rate_pps.round() as u64),
            gap: Duration::ZERO,
            spread: true,
        },
        senders: shape.leaves * shape.hosts,
        leaf: Leaf::Kernel,
    }
}

/// The blind rows of [`modes`]; the steered ones reading each spine's
/// COUNTERS_DB ([`FlexCounters`]), with each choice rule, and once
/// reading its node_exporter; and ECMP with each source's polling, which
/// steers nothing: what the polling alone costs the testbed's two cores,
/// and so the traffic.
pub fn fabric_modes() -> Vec<Mode> {
    let all = modes();
    let blind = all.iter().filter(|m| !m.telemetry).cloned();
    let steered: Vec<Mode> = all.iter().filter(|m| m.telemetry).cloned().collect();
    let counters: Vec<Mode> = steered
        .iter()
        .map(|m| with_source(m, COUNTERS_DB))
        .collect();
    let others = other_choices(&counters);
    let polled = |source: &str| Mode {
        group: format!("telemetry = \"{source}\""),
        telemetry: true,
        ..all[0].clone()
    };
    blind
        .chain(counters)
        .chain(others)
        .chain(steered.first().cloned())
        .chain([polled(COUNTERS_DB), polled(REMOTE)])
        .collect()
}

/// `mode` (a steered row of [`modes`]) reading `source` instead.
pub(super) fn with_source(mode: &Mode, source: &str) -> Mode {
    Mode {
        group: mode.group.replace(
            "telemetry = \"remote\"",
            &format!("telemetry = \"{source}\""),
        ),
        ..mode.clone()
    }
}

/// The telemetry sources the rows read.
pub(super) const COUNTERS_DB: &str = "counters-db";
const REMOTE: &str = "remote";
const LINUX: &str = "linux";

/// The source a mode's group reads, if any.
pub(super) fn source_of(mode: &Mode) -> &'static str {
    [COUNTERS_DB, REMOTE, LINUX]
        .into_iter()
        .find(|source| mode.group.contains(&format!("telemetry = \"{source}\"")))
        .unwrap_or("")
}

/// What every fabric scenario's row counts of a run: where the packets
/// sent went, and how long it took against the ideal.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FabricTotals {
    pub sent: u64,
    pub received: u64,
    /// What the spines' shaped ports dropped: the fabric's losses.
    pub dropped: u64,
    /// What the testbed's links dropped of the traffic.
    pub link_lost: u64,
    /// What the leaves redirected and their kernels failed to send.
    pub tx_errors: u64,
    pub unaccounted: i64,
    pub completion_ms: f64,
    /// The longest of the senders' paced time and, for every leaf, what
    /// was offered to it over its capacity in from the spines.
    pub ideal_ms: f64,
    pub sending_ms: f64,
    pub in_message_reorders: u64,
    /// Packets that arrived after a later packet of their QP: what moves
    /// reordered, apart from anything lost.
    pub late_packets: u64,
}

impl FabricTotals {
    /// `run`'s, of `pattern` over every host of `shape` (the rates the
    /// ideal is reckoned with).
    pub(super) fn of(run: &FabricReport, shape: &FabricShape, pattern: Pattern) -> Self {
        let sending_ms = run.elapsed.as_secs_f64() * 1e3;
        let dropped = run.spine_drops();
        let link_lost = run.drops.lost_on_the_way();
        let tx_errors = run.leaves.iter().map(|l| l.tx_errors).sum();
        Self {
            sent: run.sent_packets,
            received: run.received.packets,
            dropped,
            link_lost,
            tx_errors,
            unaccounted: unaccounted(
                run.sent_packets,
                run.received.packets,
                dropped + link_lost + tx_errors,
            ),
            completion_ms: run.completion().as_secs_f64() * 1e3,
            ideal_ms: offered_ms(run, shape, pattern).max(sending_ms),
            sending_ms,
            in_message_reorders: run.received.message_out_of_order,
            late_packets: run.received.late,
        }
    }

    /// Dropped over sent.
    pub fn loss(&self) -> f64 {
        self.dropped as f64 / self.sent.max(1) as f64
    }
}

/// One mode's run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FabricRow {
    pub mode: String,
    pub telemetry: bool,
    /// What the telemetry rows read: `counters-db` (each spine's
    /// COUNTERS_DB), `remote` (its node_exporter) or `linux` (the leaf's
    /// own ports); empty without.
    pub source: String,
    /// How new flowlets pick a next hop (`least-cost`, `two-choices`).
    pub choice: String,
    #[serde(flatten)]
    pub totals: FabricTotals,
    /// `share[leaf][spine]`: each leaf's bytes by spine (0..=1).
    pub share: Vec<Vec<f64>>,
    /// Traffic toward the other leaves that crossed the slow spine, over
    /// its even share of that traffic.
    pub healthy_share_on_degraded_spine: f64,
    /// Of the traffic toward the slow port's leaf, the slow spine's
    /// share; its capacity share is 10/130.
    pub degraded_port_share: f64,
    /// `port_dropped[spine][leaf]`: what each shaped port dropped.
    pub port_dropped: Vec<Vec<u64>>,
    pub flowlet_moves: u64,
}

impl FabricRow {
    fn new(mode: &Mode, run: &FabricReport, shape: &FabricShape) -> Self {
        let toward = |leaf: usize| (1..=shape.spines).map(|j| run.port_bytes(j, leaf)).sum();
        let healthy: Vec<usize> = (1..=shape.leaves).filter(|&m| m != SLOW_LEAF).collect();
        let healthy_total: u64 = healthy.iter().map(|&m| toward(m)).sum::<u64>();
        let healthy_on_slow: u64 = healthy.iter().map(|&m| run.port_bytes(SLOW_SPINE, m)).sum();
        let even = healthy_total as f64 / shape.spines as f64;
        let slow_total: u64 = toward(SLOW_LEAF);
        Self {
            mode: mode.name.to_owned(),
            telemetry: mode.telemetry,
            source: source_of(mode).to_owned(),
            choice: mode.choice.to_string(),
            totals: FabricTotals::of(run, shape, Pattern::AllToAll),
            share: run.leaves.iter().map(|l| l.byte_shares()).collect(),
            healthy_share_on_degraded_spine: healthy_on_slow as f64 / even.max(1.0),
            degraded_port_share: run.port_bytes(SLOW_SPINE, SLOW_LEAF) as f64
                / slow_total.max(1) as f64,
            port_dropped: port_dropped(run, shape),
            flowlet_moves: run.leaves.iter().map(|l| l.flowlet_moves).sum(),
        }
    }
}

/// What the most loaded leaf was offered (`pattern` over every host,
/// every connection as many bytes) over what it takes in from the spines
/// of `shape`, ms.
fn offered_ms(run: &FabricReport, shape: &FabricShape, pattern: Pattern) -> f64 {
    let (into, all) = connections(shape, pattern);
    (1..=shape.leaves)
        .map(|leaf| {
            let bytes = run.sent_bytes as f64 * f64::from(into[leaf - 1].0) / f64::from(all);
            bytes * 8.0 / (f64::from(capacity_into(shape, leaf)) * 1e3)
        })
        .fold(0.0, f64::max)
}

/// `port_dropped[spine][leaf]`: what each shaped port of `shape` dropped.
pub(super) fn port_dropped(run: &FabricReport, shape: &FabricShape) -> Vec<Vec<u64>> {
    per_port(&run.spine_ports, shape.spines, shape.leaves, |q| q.drops)
}

/// Runs the all-to-all of `messages` per connection through each of
/// `modes` on `fabric` (built with [`shape`]), every leaf running the
/// mode; the telemetry rows read the spines' exporters.
pub fn measure(
    fabric: &Fabric,
    fabriclb: &Path,
    workdir: &Path,
    messages: u32,
    modes: &[Mode],
) -> Result<Vec<FabricRow>> {
    each_mode(
        fabric,
        fabriclb,
        workdir,
        &collective(messages),
        modes,
        |mode, run| FabricRow::new(mode, run, fabric.shape()),
    )
}

/// Runs `collective` through each of `modes` on `fabric`, every leaf
/// running the mode, with what the telemetry rows read started on the
/// spines first; a row of each run made by `row`.
pub(super) fn each_mode<R>(
    fabric: &Fabric,
    fabriclb: &Path,
    workdir: &Path,
    collective: &Collective,
    modes: &[Mode],
    row: impl Fn(&Mode, &FabricReport) -> R,
) -> Result<Vec<R>> {
    let reads = |source| modes.iter().any(|m| source_of(m) == source);
    let _exporters = reads(REMOTE)
        .then(|| Exporters::start_fabric(fabric))
        .transpose()?;
    let _counters = reads(COUNTERS_DB)
        .then(|| FlexCounters::start(fabric))
        .transpose()?;
    let mut rows = Vec::new();
    for mode in modes {
        let collective = Collective {
            leaf: Leaf::Fabriclb {
                group: mode.group.clone(),
            },
            ..collective.clone()
        };
        let args: Vec<&str> = mode.daemon_args.iter().map(String::as_str).collect();
        let run = run_fabric_collective(fabric, fabriclb, workdir, &collective, &args)
            .with_context(|| format!("mode {}", mode.name))?;
        rows.push(row(mode, &run));
    }
    Ok(rows)
}

/// Builds fabric `bed_name`, runs every mode, prints the table, writes the
/// JSON to `json` if given, tears down (also on failure and Ctrl-C):
/// `fabric-slow-link`, or with `bgp` `fabric-bgp`.
pub fn run(bed_name: &str, bgp: bool, json: Option<&Path>) -> Result<()> {
    let (name, shape, modes) = match bgp {
        false => ("fabric-slow-link", shape(), fabric_modes()),
        true => ("fabric-bgp", bgp_shape(), bgp_modes()),
    };
    let rows = on_own_fabric(bed_name, shape, |fabric, exe, workdir| {
        measure(fabric, exe, workdir, MESSAGES, &modes)
    })
    .with_context(|| format!("scenario {name}"))?;
    print(name, bgp, &rows);
    write_runs(name, &rows, json)
}

fn print(name: &str, bgp: bool, rows: &[FabricRow]) {
    let collective = collective(MESSAGES);
    let routes = match bgp {
        false => "static routes",
        true => "every router's routes from BGP, no next hop in any leaf's config",
    };
    println!(
        "scenario {name}: {LEAVES} leaves, {SPINES} spines, {HOSTS} hosts per leaf, {routes}, \
         fabriclb on every leaf; every spine port toward a leaf at {RATE_MBIT} Mbit/s, spine \
         {SLOW_SPINE}'s toward leaf {SLOW_LEAF} at {SLOW_MBIT}; all-to-all over every host, \
         {QPS} QPs per connection, {} messages of 64 KiB each, {} packets/s per sender ({:.0}% \
         of what leaf {SLOW_LEAF} takes in); flowlet gap {} ms\n",
        collective.exchange.messages,
        collective.pace.rate_pps.unwrap_or_default(),
        LOAD * 100.0,
        FLOWLET_GAP_US / 1000,
    );
    println!(
        "{:<12} {:<11} {:<11} {:>7} {:>8} {:>7} {:>6} {:>5} {:>5} {:>9} {:>8} {:>8} {:>8} {:>6} {:>5}",
        "mode",
        "telemetry",
        "choice",
        "sent",
        "received",
        "dropped",
        "loss",
        "lost",
        "unacc",
        "complete",
        "ideal",
        "healthy",
        "s4->l3",
        "in-msg",
        "late"
    );
    for row in rows {
        println!(
            "{:<12} {:<11} {:<11} {:>7} {:>8} {:>7} {:>5.2}% {:>5} {:>5} {:>7.0}ms {:>6.0}ms {:>8.2} \
             {:>7.1}% {:>6} {:>5}",
            row.mode,
            source_cell(row.telemetry, &row.source),
            choice_cell(&row.mode, &row.choice),
            row.totals.sent,
            row.totals.received,
            row.totals.dropped,
            100.0 * row.totals.loss(),
            row.totals.link_lost,
            row.totals.unaccounted,
            row.totals.completion_ms,
            row.totals.ideal_ms,
            row.healthy_share_on_degraded_spine,
            100.0 * row.degraded_port_share,
            row.totals.in_message_reorders,
            row.totals.late_packets
        );
    }
    println!(
        "\nhealthy: traffic toward leaves other than {SLOW_LEAF} that crossed spine {SLOW_SPINE}, \
         over its even share (1.0: it kept its share); s4->l3: spine {SLOW_SPINE}'s share of the \
         traffic toward leaf {SLOW_LEAF} (its capacity share {:.1}%); in-msg: message packets \
         that did not follow their predecessor (after a loss or a reorder); late: packets \
         overtaken by a later one of their QP (reordering alone)",
        100.0 * f64::from(SLOW_MBIT) / f64::from(capacity_into(&shape(), SLOW_LEAF))
    );
}

/// A fabric table's telemetry cell: the source a row read, `-` for none.
pub(super) fn source_cell(telemetry: bool, source: &str) -> &str {
    if telemetry { source } else { "-" }
}

/// A fabric table's choice cell: empty for ECMP, which makes none.
pub(super) fn choice_cell<'a>(mode: &str, choice: &'a str) -> &'a str {
    if mode == "ecmp" { "" } else { choice }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every leaf takes in from 12 cross-rack connections of the 56; the
    /// slow leaf's 130 Mbit/s at 80% over 12 connections and 7 per
    /// sender.
    #[test]
    fn the_load_is_set_by_the_slow_ports_leaf() {
        let (into, all) = connections(&shape(), Pattern::AllToAll);
        assert_eq!(all, 56);
        assert_eq!(into.iter().map(|i| i.0).collect::<Vec<_>>(), [12; 4]);
        assert_eq!(capacity_into(&shape(), SLOW_LEAF), 130);
        assert_eq!(capacity_into(&shape(), 1), 160);
        let pps = collective(MESSAGES).pace.rate_pps.unwrap_or_default();
        let expected = 0.8 * 130.0 / 12.0 * 7.0 * 1e6 / 8.0 / f64::from(FRAME_BYTES);
        assert_eq!(pps, expected.round() as u64);
    }
}
