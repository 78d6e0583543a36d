//! `--scenario fabric-herd`: four leaves steering on the same spines'
//! samples, and spine 4 slowing to a quarter (every port of it) 300 ms
//! after the first packet the leaves forward. The all-to-all of
//! `fabric-slow-link` offers each leaf 80% of what it takes in once spine
//! 4 is slow.
//!
//! Every leaf that steers sees spine 4's queues at the same time; if each
//! moves its flowlets as if it were alone, all of them leave together and
//! pile onto the same other spines, then come back together. Measured per
//! 10 ms window: spine 4's share of what the steering leaves send (read in
//! their data planes' per-next-hop counters) and every spine port's queue;
//! then how long spine 4's share takes to settle near its capacity share
//! (`settle_ms`), how much it swings after (`oscillation`), and how often
//! flowlets change paths. The same with only leaf 1 steering (the others
//! blind in the same mode) tells herding from a single decider's noise.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use serde::Serialize;

use super::fabric_slow_link::{
    self, COUNTERS_DB, FabricTotals, choice_cell, source_cell, source_of, with_source,
};
use super::{FLOWLET_GAP_US, Mode, modes, on_own_fabric, with_choice, with_spray, write_runs};
use crate::config::{FlowletChoice, Spray};
use crate::testbed::fabric::{
    Fabric, FabricReport, FabricRun, FabricShape, FlexCounters, LinkRates, Sampling, rank_place,
    run_fabric_collective_with,
};
use crate::testbed::{Queues, Routing};
use crate::traffic::Pattern;

mod watch;

pub use watch::Window;
use watch::{Watch, watch};

pub const LEAVES: usize = fabric_slow_link::LEAVES;
pub const SPINES: usize = fabric_slow_link::SPINES;
const HOSTS: usize = 2;
const RATE_MBIT: u32 = 40;
/// Spine 4's rate on every port once it slows.
const SLOW_MBIT: u32 = 10;
pub const SLOW_SPINE: usize = 4;
/// Messages per connection at full length: about 1.7 s of sending.
pub const MESSAGES: u32 = fabric_slow_link::MESSAGES;
/// When spine 4 slows, from the first byte a leaf's data plane forwards:
/// timed from the watch's start instead, a loaded machine's slow start of
/// the senders (300 ms typically, over 600 at worst on two cores) would
/// decide how much of the run is slow.
const SLOW_AFTER: Duration = Duration::from_millis(300);
/// How long the windows are watched after the change (the full run sends
/// for about 1.1 s more).
const WATCH_AFTER: Duration = Duration::from_millis(1000);
/// The windows of the share and the queues.
pub const WINDOW: Duration = Duration::from_millis(10);
/// Windows the settling and the oscillation are judged over. A 10 ms
/// window holds about 250 packets of the four leaves (60 of one): their
/// draw alone swings a 7.7% share by about ±20% (±45% for one leaf), so
/// each window's share is reported, and judged over 50 ms.
const JUDGED_WINDOWS: usize = 5;
/// Settled: within this fraction of the capacity share.
const SETTLE_BAND: f64 = 0.2;
/// With no settling, the oscillation is taken from this long after the
/// change.
const UNSETTLED_FROM_MS: f64 = 300.0;
/// Where `share_after` starts: past the reaction.
const AFTER_FROM: Duration = Duration::from_millis(200);

/// The fabric before the change: every port at the same rate.
pub fn shape() -> FabricShape {
    FabricShape {
        leaves: LEAVES,
        spines: SPINES,
        hosts: HOSTS,
        rates: LinkRates::all(RATE_MBIT),
        queues: Queues::Lossy,
        routing: Routing::Static,
    }
}

/// The fabric after it: spine 4 at [`SLOW_MBIT`] toward every leaf.
fn slowed() -> FabricShape {
    let rates = (1..=LEAVES).fold(LinkRates::all(RATE_MBIT), |rates, leaf| {
        rates.with(SLOW_SPINE, leaf, SLOW_MBIT)
    });
    FabricShape { rates, ..shape() }
}

/// Spine 4's share of what every leaf can take in once it is slow.
pub fn capacity_share() -> f64 {
    let all = RATE_MBIT * (SPINES as u32 - 1) + SLOW_MBIT;
    f64::from(SLOW_MBIT) / f64::from(all)
}

/// What one flowlet carries of what the first `steering` leaves send
/// across the spines in a round of the collective: each connection sends
/// one message a round, each on the next of its QPs (each with a source
/// port of its own), spread over the round, so a QP pauses three rounds
/// between messages, far past the flowlet gap, and every message is a
/// flowlet of its own. A flowlet row's share of spine 4 moves in steps
/// of this: 1/48 for four leaves, of which the settling band (±20% of
/// 7.7%, 6.15-9.2%) holds only 3 or 4 on spine 4 in a round; 1/12 for
/// one leaf, exactly 1.
pub fn flowlet_share(steering: usize) -> f64 {
    let ranks = LEAVES * HOSTS;
    let leaf = |rank| rank_place(LEAVES, rank).0;
    let crossing: usize = (0..ranks)
        .filter(|&rank| leaf(rank) <= steering)
        .map(|rank| {
            (Pattern::AllToAll.peers(ranks, rank).into_iter())
                .filter(|&peer| leaf(peer) != leaf(rank))
                .count()
        })
        .sum();
    1.0 / crossing.max(1) as f64
}

/// A row: a mode, and how many leaves (the first ones) steer in it; the
/// others run the same mode blind.
#[derive(Clone, Debug)]
pub struct HerdMode {
    pub mode: Mode,
    pub steering_leaves: usize,
    pub sampling: Sampling,
}

/// ECMP; flowlet and per-packet steered by each spine's COUNTERS_DB on
/// every leaf and on leaf 1 alone; flowlet steered with least-cost
/// choices on every leaf, the rule that herds; per-packet spraying every
/// packet on every leaf, where no flowlet is too big to split: what the
/// qualities alone do, at the fabric's 40 ms samples and at 10 ms
/// ([`Sampling::FRESH`], the last two rows), and at 10 ms on leaf 1 alone
/// (the others spraying every packet blind).
pub fn herd_modes() -> Vec<HerdMode> {
    let all = modes();
    let steered: Vec<Mode> = (all.iter().filter(|m| m.telemetry))
        .map(|m| with_source(m, COUNTERS_DB))
        .collect();
    let row = |mode: &Mode, steering_leaves| HerdMode {
        mode: mode.clone(),
        steering_leaves,
        sampling: Sampling::FABRIC,
    };
    let least_cost = with_choice(steered[0].clone(), FlowletChoice::LeastCost);
    let sprayed = with_spray(steered[1].clone(), Spray::All);
    let fresh = |steering_leaves| HerdMode {
        sampling: Sampling::FRESH,
        ..row(&sprayed, steering_leaves)
    };
    std::iter::once(row(&all[0], 0))
        .chain(steered.iter().map(|m| row(m, LEAVES)))
        .chain(steered.iter().map(|m| row(m, 1)))
        .chain([row(&least_cost, LEAVES), row(&sprayed, LEAVES)])
        .chain([fresh(LEAVES), fresh(1)])
        .collect()
}

/// The group keys each leaf runs in `row`: the steering ones the mode's,
/// the others the blind row of the same mode.
fn groups(row: &HerdMode) -> Vec<String> {
    let blind = (modes().into_iter())
        .find(|m| m.name == row.mode.name && !m.telemetry)
        .map_or_else(String::new, |m| match row.mode.spray {
            Spray::SelfContained => m.group,
            spray => with_spray(m, spray).group,
        });
    (1..=LEAVES)
        .map(|k| {
            if k <= row.steering_leaves || !row.mode.telemetry {
                row.mode.group.clone()
            } else {
                blind.clone()
            }
        })
        .collect()
}

/// One row's run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HerdRow {
    pub mode: String,
    pub telemetry: bool,
    pub source: String,
    pub choice: String,
    /// `"all"` where every RoCEv2 packet was sprayed, `"self-contained"`
    /// where only those; `None` in the modes that spray none.
    pub spray: Option<&'static str>,
    /// How often the leaves read the spines, microseconds.
    pub sampling_interval_us: u32,
    /// How many leaves steered (leaves 1..=n); the others ran blind.
    pub steering_leaves: usize,
    /// The ideal reckoned with spine 4 slow from the start.
    #[serde(flatten)]
    pub totals: FabricTotals,
    /// Spine 4's share of what every leaf can take in once slow (10/130).
    pub capacity_share: f64,
    /// Its share of the steering leaves' bytes before the change, and
    /// from 200 ms after it to the end of the watch.
    pub share_before: Option<f64>,
    pub share_after: Option<f64>,
    /// From the change to the end of the first 50 ms span after which
    /// every span's share of spine 4 stays within ±20% of its capacity
    /// share; `None` if it never did.
    pub settle_ms: Option<f64>,
    /// The standard deviation of spine 4's share over 50 ms spans from
    /// settling (or 300 ms after the change) to the end of the watch.
    pub oscillation: Option<f64>,
    /// Of the 50 ms spans ending 300 ms or more after the change, the
    /// fraction whose share is within ±20% of the capacity share: how
    /// near the row came to settling where it did not; `None` without
    /// such spans.
    pub in_band: Option<f64>,
    /// What one flowlet carries of the steering leaves' bytes in a round
    /// ([`flowlet_share`]); `None` in the rows where no flowlet moves
    /// (ECMP, every packet sprayed).
    pub flowlet_share: Option<f64>,
    /// Flowlet moves per second of sending, summed over the steering
    /// leaves.
    pub path_changes_per_s: f64,
    /// `port_dropped[spine][leaf]`.
    pub port_dropped: Vec<Vec<u64>>,
    /// What the spine ports dropped from the change to [`AFTER_FROM`]
    /// after it, while the leaves react, and from then to the end of the
    /// watch: the first is how fast they see the slow spine and move,
    /// the second how well they share the spines once they have (herding
    /// shows there).
    pub dropped_reacting: u64,
    pub dropped_after: u64,
    pub windows: Vec<Window>,
}

/// When the spans' share settled within [`SETTLE_BAND`] of `target` for
/// good, and its standard deviation from then (or from
/// [`UNSETTLED_FROM_MS`]).
fn settling(spans: &[(f64, f64)], target: f64) -> (Option<f64>, Option<f64>) {
    let within = |share| within_band(share, target);
    let settled = match spans.iter().rposition(|&(_, share)| !within(share)) {
        // No span at all (nothing sent after the change) never settled.
        None => (!spans.is_empty()).then_some(0),
        Some(last_out) => (last_out + 1 < spans.len()).then_some(last_out + 1),
    };
    let settle_ms = settled.map(|i| spans[i].0);
    let after = shares_from(spans, settle_ms.unwrap_or(UNSETTLED_FROM_MS));
    (settle_ms, std_dev(&after))
}

/// Whether `share` is within [`SETTLE_BAND`] of `target`.
fn within_band(share: f64, target: f64) -> bool {
    (share - target).abs() <= SETTLE_BAND * target
}

/// The fraction of the spans ending [`UNSETTLED_FROM_MS`] or more after
/// the change whose share is within [`SETTLE_BAND`] of `target`.
fn in_band(spans: &[(f64, f64)], target: f64) -> Option<f64> {
    let judged = shares_from(spans, UNSETTLED_FROM_MS);
    let within = judged.iter().filter(|&&s| within_band(s, target)).count();
    (!judged.is_empty()).then(|| within as f64 / judged.len() as f64)
}

/// The shares of the spans ending `from_ms` or more after the change.
fn shares_from(spans: &[(f64, f64)], from_ms: f64) -> Vec<f64> {
    (spans.iter())
        .filter(|&&(at, _)| at >= from_ms)
        .map(|&(_, share)| share)
        .collect()
}

/// The population standard deviation of `values`; `None` for fewer than
/// two.
pub fn std_dev(values: &[f64]) -> Option<f64> {
    if values.len() < 2 {
        return None;
    }
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / values.len() as f64;
    Some(variance.sqrt())
}

impl HerdRow {
    fn new(row: &HerdMode, run: &FabricReport, watch: &Watch) -> Self {
        let mode = &row.mode;
        // A blind row's share is every leaf's.
        let steering = if mode.telemetry {
            row.steering_leaves
        } else {
            LEAVES
        };
        let spans = watch.spans(steering);
        let (settle_ms, oscillation) = settling(&spans, capacity_share());
        let (dropped_reacting, dropped_after) = watch.dropped_reacting_and_after();
        let moves: u64 = run
            .leaves
            .iter()
            .take(steering)
            .map(|l| l.flowlet_moves)
            .sum();
        Self {
            mode: mode.name.to_owned(),
            telemetry: mode.telemetry,
            source: source_of(mode).to_owned(),
            choice: mode.choice.to_string(),
            spray: (mode.name == "per-packet").then(|| mode.spray.name()),
            sampling_interval_us: row.sampling.interval_us,
            steering_leaves: if mode.telemetry { steering } else { 0 },
            totals: FabricTotals::of(run, &slowed(), Pattern::AllToAll),
            capacity_share: capacity_share(),
            share_before: watch.share_before(steering),
            share_after: watch.share_after(steering),
            settle_ms,
            oscillation,
            in_band: in_band(&spans, capacity_share()),
            flowlet_share: (mode.name != "ecmp" && mode.spray != Spray::All)
                .then(|| flowlet_share(steering)),
            path_changes_per_s: moves as f64 / run.elapsed.as_secs_f64().max(1e-9),
            port_dropped: fabric_slow_link::port_dropped(run, &shape()),
            dropped_reacting,
            dropped_after,
            windows: watch.windows(steering),
        }
    }
}

/// Runs every row of `rows` on `fabric` (built with [`shape`], and left
/// so: spine 4 is set back to full rate after each run).
pub fn measure(
    fabric: &Fabric,
    fabriclb: &Path,
    workdir: &Path,
    messages: u32,
    rows: &[HerdMode],
) -> Result<Vec<HerdRow>> {
    let _counters = (rows.iter().any(|r| source_of(&r.mode) == COUNTERS_DB))
        .then(|| FlexCounters::start(fabric))
        .transpose()?;
    let collective = fabric_slow_link::collective(messages);
    let mut out = Vec::new();
    for row in rows {
        let groups = groups(row);
        let args: Vec<&str> = row.mode.daemon_args.iter().map(String::as_str).collect();
        let run = FabricRun {
            collective: &collective,
            groups: &groups,
            args: &args,
            sampling: row.sampling,
        };
        let result = run_fabric_collective_with(fabric, fabriclb, workdir, &run, |queues| {
            watch(fabric, queues)
        });
        fabric.set_spine_rate(SLOW_SPINE, RATE_MBIT)?;
        let (report, watch) = result.with_context(|| format!("mode {}", row.mode.name))?;
        out.push(HerdRow::new(row, &report, &watch));
    }
    Ok(out)
}

/// Builds fabric `bed_name`, runs every row, prints the table, writes the
/// JSON to `json` if given, tears down (also on failure and Ctrl-C).
pub fn run(bed_name: &str, json: Option<&Path>) -> Result<()> {
    let rows = on_own_fabric(bed_name, shape(), |fabric, exe, workdir| {
        measure(fabric, exe, workdir, MESSAGES, &herd_modes())
    })
    .context("scenario fabric-herd")?;
    print(&rows);
    write_runs("fabric-herd", &rows, json)
}

fn print(rows: &[HerdRow]) {
    let collective = fabric_slow_link::collective(MESSAGES);
    println!(
        "scenario fabric-herd: {LEAVES} leaves, {SPINES} spines, {HOSTS} hosts per leaf, every \
         spine port at {RATE_MBIT} Mbit/s; spine {SLOW_SPINE} slows to {SLOW_MBIT} on every port \
         {} ms after the first packet forwarded; all-to-all over every host, {} packets/s per \
         sender (80% of what a leaf takes in once spine {SLOW_SPINE} is slow); flowlet gap {} \
         ms\n",
        SLOW_AFTER.as_millis(),
        collective.pace.rate_pps.unwrap_or_default(),
        FLOWLET_GAP_US / 1000,
    );
    println!(
        "{:<14} {:<11} {:<11} {:>5} {:>6} {:>6} {:>7} {:>6} {:>6} {:>6} {:>5} {:>9} {:>8} {:>7} {:>6} {:>7} {:>6} {:>7} {:>8} {:>8}",
        "mode",
        "telemetry",
        "choice",
        "steer",
        "sample",
        "sent",
        "dropped",
        "loss",
        "react",
        "later",
        "unacc",
        "complete",
        "ideal",
        "before",
        "after",
        "settle",
        "osc",
        "in band",
        "flowlet",
        "moves/s"
    );
    let ms = |v: Option<f64>| v.map_or_else(|| "never".to_owned(), |v| format!("{v:.0}ms"));
    for row in rows {
        println!(
            "{:<14} {:<11} {:<11} {:>5} {:>4}ms {:>6} {:>7} {:>5.2}% {:>6} {:>6} {:>5} {:>7.0}ms {:>6.0}ms \
             {:>6.1}% {:>5.1}% {:>7} {:>5.1}% {:>7} {:>8} {:>8.0}",
            match row.spray {
                Some(spray) if spray == Spray::All.name() => format!("{} all", row.mode),
                _ => row.mode.clone(),
            },
            source_cell(row.telemetry, &row.source),
            choice_cell(&row.mode, &row.choice),
            row.steering_leaves,
            row.sampling_interval_us / 1000,
            row.totals.sent,
            row.totals.dropped,
            100.0 * row.totals.loss(),
            row.dropped_reacting,
            row.dropped_after,
            row.totals.unaccounted,
            row.totals.completion_ms,
            row.totals.ideal_ms,
            100.0 * row.share_before.unwrap_or_default(),
            100.0 * row.share_after.unwrap_or_default(),
            ms(row.settle_ms),
            100.0 * row.oscillation.unwrap_or_default(),
            row.in_band
                .map_or_else(|| "-".to_owned(), |f| format!("{:.0}%", 100.0 * f)),
            row.flowlet_share
                .map_or_else(|| "-".to_owned(), |f| format!("{:.1}%", 100.0 * f)),
            row.path_changes_per_s,
        );
    }
    println!(
        "\nsteer: leaves steering (the others blind in the same mode); react, later: what the \
         spine ports dropped in the first 200 ms after spine {SLOW_SPINE} slowed, and from then \
         to the end of the watch; before, after: spine \
         {SLOW_SPINE}'s share of the steering leaves' bytes before it slowed and from 200 ms \
         after (every leaf's in a blind row); settle: until that share stays within ±{:.0}% of its capacity share \
         ({:.1}%) over every 50 ms span; osc: its standard deviation from then; in band: of the \
         50 ms spans ending 300 ms or more after it slowed, those within that band; flowlet: what one \
         flowlet carries of the steering leaves' bytes in a round (every message is one), the \
         step that share moves in; per-packet all: \
         every RoCEv2 packet sprayed (spray = \"all\"), for receivers that place packets out of \
         order, so no flowlet moves; sample: how often the leaves read the spines",
        SETTLE_BAND * 100.0,
        capacity_share() * 100.0
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Four leaves send 48 messages a round across the spines (two
    /// ranks each, to the six ranks on other leaves), one leaf 12.
    #[test]
    fn a_flowlet_is_one_cross_leaf_message_of_a_round() {
        assert!((flowlet_share(4) - 1.0 / 48.0).abs() < 1e-12);
        assert!((flowlet_share(1) - 1.0 / 12.0).abs() < 1e-12);
        // Wider than half the settling band: from 3 or 4 of 48, one
        // flowlet more or less on spine 4 takes the share out of it.
        let (low, high) = (
            (1.0 - SETTLE_BAND) * capacity_share(),
            (1.0 + SETTLE_BAND) * capacity_share(),
        );
        let within = |n: f64| (low..=high).contains(&(n * flowlet_share(LEAVES)));
        assert_eq!(
            (within(2.0), within(3.0), within(4.0), within(5.0)),
            (false, true, true, false)
        );
    }

    /// Settled from the first span after the last one out of the band;
    /// the oscillation from there on.
    #[test]
    fn settling_is_after_the_last_span_out_of_the_band() {
        let target = 0.1;
        let spans = [
            (10.0, 0.25),
            (20.0, 0.13),
            (30.0, 0.11),
            (40.0, 0.09),
            (50.0, 0.1),
        ];
        let (settle, osc) = settling(&spans, target);
        assert_eq!(settle, Some(30.0));
        let expected = std_dev(&[0.11, 0.09, 0.1]).expect("three values");
        assert!((osc.expect("settled") - expected).abs() < 1e-12);
        // Out of the band at the end: never settled.
        let (settle, _) = settling(&[(10.0, 0.1), (20.0, 0.2)], target);
        assert_eq!(settle, None);
        // In the band throughout: settled at the first span.
        assert_eq!(settling(&[(10.0, 0.1), (20.0, 0.1)], target).0, Some(10.0));
        // Nothing sent after the change: neither.
        assert_eq!(settling(&[], target), (None, None));
    }

    /// In band: the spans from 300 ms on within ±20% of the target,
    /// whether or not the last ones are.
    #[test]
    fn in_band_counts_the_spans_from_300_ms_within_the_band() {
        let target = 0.1;
        let spans = [
            (250.0, 0.3),
            (300.0, 0.1),
            (310.0, 0.119),
            (320.0, 0.121),
            (330.0, 0.08),
        ];
        assert_eq!(in_band(&spans, target), Some(0.75));
        assert_eq!(in_band(&spans[..1], target), None);
    }

    #[test]
    fn spine_four_can_take_a_thirteenth_once_slow() {
        assert!((capacity_share() - 10.0 / 130.0).abs() < 1e-12);
        assert_eq!(slowed().rates.rate(SLOW_SPINE, 2), Some(SLOW_MBIT));
        assert_eq!(slowed().rates.rate(1, 2), Some(RATE_MBIT));
    }

    #[test]
    fn sprayed_rows_spray_every_packet_on_every_leaf() {
        let rows = herd_modes();
        let sprayed: Vec<_> = (rows.iter())
            .filter(|r| r.mode.spray == Spray::All)
            .collect();
        let kinds: Vec<_> = (sprayed.iter())
            .map(|r| (r.sampling, r.steering_leaves))
            .collect();
        assert_eq!(
            kinds,
            [
                (Sampling::FABRIC, LEAVES),
                (Sampling::FRESH, LEAVES),
                (Sampling::FRESH, 1)
            ]
        );
        for row in sprayed {
            assert_eq!((row.mode.name, row.mode.telemetry), ("per-packet", true));
            // With leaf 1 alone steering, the others spray every packet
            // blind.
            let groups = groups(row);
            assert!(groups.iter().all(|g| g.ends_with("\nspray = \"all\"")));
            let blind = groups.iter().filter(|g| !g.contains("telemetry")).count();
            assert_eq!(blind, LEAVES - row.steering_leaves);
        }
        let fresh = (rows.iter())
            .filter(|r| r.sampling == Sampling::FRESH)
            .count();
        assert_eq!(fresh, 2, "only the last two rows sample every 10 ms");
    }

    #[test]
    fn one_leaf_steers_and_the_others_run_the_same_mode_blind() {
        let rows = herd_modes();
        let alone = (rows.iter())
            .find(|r| r.steering_leaves == 1 && r.mode.name == "flowlet")
            .expect("a row with leaf 1 steering");
        let groups = groups(alone);
        assert!(
            groups[0].contains("telemetry = \"counters-db\""),
            "{groups:?}"
        );
        for group in &groups[1..] {
            assert!(group.contains("mode = \"flowlet\"") && !group.contains("telemetry"));
        }
    }
}
