//! `--scenario fabric-matrix`: the fabric's steering beyond the one case
//! each other fabric scenario runs, as one table. Each cell is a fabric
//! of four leaves (two hosts each) and 4, 8 or 16 spines, every port at
//! 40 Mbit/s but the degraded ones at a quarter, a traffic pattern (a
//! ring, an all-to-all, or two jobs at once), and a load (the share of
//! its capacity in from the spines offered to the leaf offered most).
//! Each cell runs ECMP and flowlet and per-packet steered on every leaf
//! by the spines' COUNTERS_DB, each sending for about a second.
//!
//! Besides loss and completion it reports how evenly each leaf's traffic
//! spreads over the ports that are equally good (`equal_paths_mmr`, the
//! busiest full-rate port toward a leaf over their mean, the worst leaf's)
//! and what the degraded ports carried of the traffic toward their leaves
//! against their capacity share.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use serde::Serialize;

use super::fabric_slow_link::{
    self, COUNTERS_DB, FabricTotals, QPS, capacity_into, paced, with_source,
};
use super::{Mode, modes, on_own_fabric, write_runs};
use crate::testbed::fabric::{Fabric, FabricReport, FabricShape, LinkRates};
use crate::testbed::{Collective, Queues, Routing, mmr};
use crate::traffic::Pattern;

const LEAVES: usize = 4;
const HOSTS: usize = 2;
const RATE_MBIT: u32 = 40;
const DEGRADED_MBIT: u32 = RATE_MBIT / 4;
/// How long each row's busiest sender sends at its pace.
const SENDING: Duration = Duration::from_secs(1);

/// What is degraded in a cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Degraded {
    /// The last spine's port toward leaf 3.
    Link,
    /// That one and the middle spine's toward leaf 1.
    TwoLinks,
    /// Every port of the last spine.
    Spine,
}

impl Degraded {
    /// The degraded ports, (spine, leaf), on a fabric of `spines` spines.
    fn ports(self, spines: usize) -> Vec<(usize, usize)> {
        match self {
            Self::Link => vec![(spines, 3)],
            Self::TwoLinks => vec![(spines, 3), (spines / 2, 1)],
            Self::Spine => (1..=LEAVES).map(|leaf| (spines, leaf)).collect(),
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Link => "link",
            Self::TwoLinks => "two-links",
            Self::Spine => "spine",
        }
    }
}

/// One cell of the matrix.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cell {
    pub pattern: Pattern,
    pub degraded: Degraded,
    /// Offered over capacity at the leaf offered most.
    pub load: f64,
    pub spines: usize,
}

impl std::fmt::Display for Cell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} / {} / {:.0}% / {} spines",
            self.pattern.as_str(),
            self.degraded.as_str(),
            self.load * 100.0,
            self.spines
        )
    }
}

impl Cell {
    pub fn shape(&self) -> FabricShape {
        let rates = (self.degraded.ports(self.spines).into_iter())
            .fold(LinkRates::all(RATE_MBIT), |rates, (spine, leaf)| {
                rates.with(spine, leaf, DEGRADED_MBIT)
            });
        FabricShape {
            leaves: LEAVES,
            spines: self.spines,
            hosts: HOSTS,
            rates,
            queues: Queues::Lossy,
            routing: Routing::Static,
        }
    }

    /// The cell's collective, its busiest sender sending for `sending`.
    pub fn collective(&self, sending: Duration) -> Collective {
        let shape = self.shape();
        let mut collective = paced(&shape, self.pattern, self.load, 1);
        let ranks = LEAVES * HOSTS;
        let most_peers = (0..ranks)
            .map(|rank| self.pattern.peers(ranks, rank).len())
            .max()
            .unwrap_or(1)
            .max(1);
        let frames_per_message = collective.exchange.packets_per_message();
        let frames = sending.as_secs_f64() * collective.pace.rate_pps.unwrap_or_default() as f64;
        let messages = frames / (most_peers as f64 * f64::from(frames_per_message));
        collective.exchange.messages = (messages.round() as u32).max(1);
        collective
    }
}

/// The cells: each pattern with each degradation at 90% load, the
/// all-to-all at 60% too, and the all-to-all over 8 and 16 spines.
pub fn cells() -> Vec<Cell> {
    let cell = |pattern, degraded, load, spines| Cell {
        pattern,
        degraded,
        load,
        spines,
    };
    let degradations = [Degraded::Link, Degraded::TwoLinks, Degraded::Spine];
    let mut cells = Vec::new();
    for pattern in [Pattern::Ring, Pattern::AllToAll, Pattern::Mixed] {
        for degraded in degradations {
            cells.push(cell(pattern, degraded, 0.9, 4));
        }
    }
    for degraded in degradations {
        cells.push(cell(Pattern::AllToAll, degraded, 0.6, 4));
    }
    for spines in [8, 16] {
        cells.push(cell(Pattern::AllToAll, Degraded::Link, 0.9, spines));
    }
    cells
}

/// ECMP, and flowlet and per-packet steered by every spine's COUNTERS_DB.
pub fn matrix_modes() -> Vec<Mode> {
    (modes().into_iter())
        .filter(|m| m.name == "ecmp" || m.telemetry)
        .map(|m| with_source(&m, COUNTERS_DB))
        .collect()
}

/// One mode's run in one cell.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MatrixRow {
    pub pattern: &'static str,
    pub degraded: &'static str,
    pub load: f64,
    pub spines: usize,
    pub mode: String,
    pub telemetry: bool,
    pub source: String,
    #[serde(flatten)]
    pub totals: FabricTotals,
    /// Of the traffic toward the degraded ports' leaves, what the
    /// degraded ports carried, and their share of those leaves' capacity.
    pub degraded_share: f64,
    pub capacity_share: f64,
    /// For each leaf, its busiest full-rate port's bytes over the mean of
    /// its full-rate ports; the worst leaf's.
    pub equal_paths_mmr: f64,
    pub flowlet_moves: u64,
}

impl MatrixRow {
    fn new(cell: &Cell, mode: &Mode, run: &FabricReport) -> Self {
        let shape = cell.shape();
        let degraded = cell.degraded.ports(cell.spines);
        let mut leaves: Vec<usize> = degraded.iter().map(|&(_, leaf)| leaf).collect();
        leaves.sort_unstable();
        leaves.dedup();
        let toward =
            |leaf: usize| -> u64 { (1..=cell.spines).map(|j| run.port_bytes(j, leaf)).sum() };
        let on_degraded: u64 = degraded
            .iter()
            .map(|&(j, leaf)| run.port_bytes(j, leaf))
            .sum();
        let degraded_capacity = degraded.len() as f64 * f64::from(DEGRADED_MBIT);
        let leaves_capacity: u32 = leaves.iter().map(|&leaf| capacity_into(&shape, leaf)).sum();
        let equal_paths_mmr = (1..=LEAVES)
            .filter_map(|leaf| {
                mmr((1..=cell.spines)
                    .filter(|&j| !degraded.contains(&(j, leaf)))
                    .map(|j| run.port_bytes(j, leaf)))
            })
            .fold(1.0, f64::max);
        Self {
            pattern: cell.pattern.as_str(),
            degraded: cell.degraded.as_str(),
            load: cell.load,
            spines: cell.spines,
            mode: mode.name.to_owned(),
            telemetry: mode.telemetry,
            source: fabric_slow_link::source_of(mode).to_owned(),
            totals: FabricTotals::of(run, &shape, cell.pattern),
            degraded_share: on_degraded as f64
                / leaves.iter().map(|&leaf| toward(leaf)).sum::<u64>().max(1) as f64,
            capacity_share: degraded_capacity / f64::from(leaves_capacity.max(1)),
            equal_paths_mmr,
            flowlet_moves: run.leaves.iter().map(|l| l.flowlet_moves).sum(),
        }
    }
}

/// Runs `modes` in `cell` on `fabric` (built with the cell's shape), its
/// busiest sender sending for `sending`.
pub fn measure(
    fabric: &Fabric,
    fabriclb: &Path,
    workdir: &Path,
    cell: &Cell,
    modes: &[Mode],
    sending: Duration,
) -> Result<Vec<MatrixRow>> {
    let collective = cell.collective(sending);
    fabric_slow_link::each_mode(
        fabric,
        fabriclb,
        workdir,
        &collective,
        modes,
        |mode, run| MatrixRow::new(cell, mode, run),
    )
}

/// Every cell on a fabric of its own, one after another; prints the table
/// and writes the JSON to `json` if given.
pub fn run(bed_name: &str, json: Option<&Path>) -> Result<()> {
    let modes = matrix_modes();
    let mut rows = Vec::new();
    let cells = cells();
    for (n, cell) in cells.iter().enumerate() {
        let measured = on_own_fabric(bed_name, cell.shape(), |fabric, exe, workdir| {
            measure(fabric, exe, workdir, cell, &modes, SENDING)
        })
        .with_context(|| format!("scenario fabric-matrix, cell {cell}"))?;
        // A cell takes about half a minute: say where the run is.
        let losses: Vec<String> = (measured.iter())
            .map(|row| format!("{} {:.2}%", row.mode, 100.0 * row.totals.loss()))
            .collect();
        eprintln!(
            "cell {}/{} {cell}: {}",
            n + 1,
            cells.len(),
            losses.join(", ")
        );
        rows.extend(measured);
    }
    print(&rows);
    write_runs("fabric-matrix", &rows, json)
}

fn print(rows: &[MatrixRow]) {
    println!(
        "scenario fabric-matrix: {LEAVES} leaves of {HOSTS} hosts, 4-16 spines, every spine port \
         at {RATE_MBIT} Mbit/s but the degraded at {DEGRADED_MBIT}; each row's busiest sender \
         sends for {} s, {} QPs per connection, 64 KiB messages; steered rows read every \
         spine's COUNTERS_DB\n",
        SENDING.as_secs(),
        QPS,
    );
    println!(
        "{:<10} {:<9} {:>4} {:>6}  {:<14} {:>7} {:>7} {:>6} {:>6} {:>6} {:>9} {:>6} {:>6} {:>5}",
        "pattern",
        "degraded",
        "load",
        "spines",
        "mode",
        "sent",
        "dropped",
        "loss",
        "unacc",
        "c/i",
        "degraded",
        "equal",
        "in-msg",
        "late"
    );
    for row in rows {
        println!(
            "{:<10} {:<9} {:>3.0}% {:>6}  {:<14} {:>7} {:>7} {:>5.2}% {:>6} {:>6.2} {:>4.1}/{:>4.1}% \
             {:>6.2} {:>6} {:>5}",
            row.pattern,
            row.degraded,
            row.load * 100.0,
            row.spines,
            if row.telemetry {
                format!("{} cdb", row.mode)
            } else {
                row.mode.clone()
            },
            row.totals.sent,
            row.totals.dropped,
            100.0 * row.totals.loss(),
            row.totals.unaccounted,
            row.totals.completion_ms / row.totals.ideal_ms.max(1.0),
            100.0 * row.degraded_share,
            100.0 * row.capacity_share,
            row.equal_paths_mmr,
            row.totals.in_message_reorders,
            row.totals.late_packets
        );
    }
    println!(
        "\nc/i: completion over the capacity-weighted ideal; degraded: the degraded ports' \
         share of the traffic toward their leaves / their share of those leaves' capacity; \
         equal: the busiest full-rate port toward a leaf over their mean, the worst leaf's; \
         cdb: steered by the spines' COUNTERS_DB; late: packets overtaken by a later one of \
         their QP"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testbed::scenario::FRAME_BYTES;

    /// A ring over 8 ranks on 4 leaves sends 2 connections into every
    /// leaf, each a whole sender's rate: at 90% of 130 Mbit/s (leaf 3 with
    /// one port at a quarter), 58.5 Mbit/s a sender, a second of it.
    #[test]
    fn a_cell_paces_its_busiest_leaf_to_the_load_for_a_second() {
        let ring = Cell {
            pattern: Pattern::Ring,
            degraded: Degraded::Link,
            load: 0.9,
            spines: 4,
        };
        let collective = ring.collective(Duration::from_secs(1));
        let pps = 0.9 * 130.0 / 2.0 * 1e6 / 8.0 / f64::from(FRAME_BYTES);
        assert_eq!(collective.pace.rate_pps, Some(pps.round() as u64));
        assert_eq!(collective.exchange.messages, (pps / 32.0).round() as u32);
        assert_eq!(
            Degraded::TwoLinks.ports(8),
            [(8, 3), (4, 1)],
            "two spines, two leaves"
        );
        assert_eq!(cells().len(), 14);
    }
}
