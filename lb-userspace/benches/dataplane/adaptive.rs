//! Adaptive routing: the testbed scenarios `slow-spine` (lossy queues) and
//! `slow-spine-lossless` through every balancing mode, as
//! `fabriclb testbed demo --scenario` runs them, one row per mode: how
//! much the slow spine carried, what its queue dropped, how long the
//! collective took against the ideal.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result, ensure};
use fabriclb::testbed::{
    Testbed,
    scenario::{self, ModeReport, Name, Report, SLOW_SPINE_RATES_MBIT},
};

use super::{Bar, paired_bars};

/// The scenarios run, in table order; [`chart`] takes their reports so.
const SCENARIOS: [Name; 2] = [Name::SlowSpine, Name::SlowSpineLossless];

/// Runs each of [`SCENARIOS`] on a testbed of its own, `{base}-a{i}` (so
/// the signal watcher of `base` removes it too), appends the section to
/// `report`, returns the scenarios' reports.
pub fn section(base: &str, report: &mut String) -> Result<Vec<Report>> {
    let fabriclb: &Path = env!("CARGO_BIN_EXE_fabriclb").as_ref();
    let workdir = std::env::temp_dir().join(format!("{base}-adaptive-work"));
    std::fs::create_dir_all(&workdir)?;
    let result = SCENARIOS
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let scenario = name
                .scenario()
                .with_context(|| format!("{} is a single-leaf scenario", name.as_str()))?;
            Testbed::up(&format!("{base}-a{i}"), scenario.shape.clone())
                .and_then(|bed| {
                    scenario::measure(&bed, fabriclb, &workdir, &scenario, &scenario::modes())
                })
                .map(|report| (scenario.workload, report))
                .with_context(|| format!("scenario {}", name.as_str()))
        })
        .collect::<Result<Vec<_>>>();
    let _ = std::fs::remove_dir_all(&workdir);
    let scenarios = result?;

    let rates = SLOW_SPINE_RATES_MBIT;
    let slow = rates[rates.len() - 1];
    let capacity: u32 = rates.iter().sum();
    report.push_str("\n## Adaptive routing (testbed scenarios)\n\n");
    for (workload, run) in &scenarios {
        let _ = writeln!(report, "- `{}`: {workload}", run.scenario);
    }
    report.push_str(
        "\n| scenario | mode | telemetry | slow-spine share | dropped, % of sent | completion / ideal | in-message reorders |\n|---|---|---|---|---|---|---|\n",
    );
    for (_, run) in &scenarios {
        for mode in &run.modes {
            let _ = writeln!(
                report,
                "| {} | {} | {} | {:.1}% | {:.2}% | {:.2} | {} |",
                run.scenario,
                mode.mode,
                if mode.telemetry { "yes" } else { "no" },
                100.0 * slow_share(mode),
                dropped_percent(mode),
                completion_ratio(mode),
                mode.in_message_reorders
            );
        }
    }
    let _ = writeln!(
        report,
        "\nThe slow spine (the last, {slow} of {capacity} Mbit/s) has {:.1}% of the capacity; \
         a balancer blind to capacity sends it a quarter. Share = of the bytes the leaf \
         forwarded; dropped = what the spines' queues dropped; completion = first packet sent \
         to last received; ideal = every byte sent over the spines' summed rates, or the paced \
         sending time if longer; in-message reorders = MIDDLE/LAST packets that did not follow \
         their message's previous one.",
        100.0 * f64::from(slow) / f64::from(capacity)
    );
    let reports: Vec<Report> = scenarios.into_iter().map(|(_, run)| run).collect();
    // `chart` pairs the scenarios' rows by position.
    ensure!(
        reports.windows(2).all(|w| rows(&w[0]).eq(rows(&w[1]))),
        "the scenarios ran different modes"
    );
    Ok(reports)
}

/// Per mode, dropped % of sent in `slow-spine` and completion / ideal in
/// `slow-spine-lossless` (`reports` in [`SCENARIOS`] order), each measure
/// scaled to its own largest value.
pub fn chart(reports: &[Report]) -> String {
    let (lossy, lossless) = match reports {
        [lossy, lossless, ..] => (lossy.modes.as_slice(), lossless.modes.as_slice()),
        _ => (&[][..], &[][..]),
    };
    // At least 1% and 1x, so a handful of drops is not a full bar.
    let max = |values: Vec<f64>| values.into_iter().fold(1.0, f64::max);
    let max_dropped = max(lossy.iter().map(dropped_percent).collect());
    let max_ratio = max(lossless.iter().map(completion_ratio).collect());
    let bars: Vec<_> = lossy
        .iter()
        .zip(lossless)
        .map(|(lossy, lossless)| {
            let (dropped, ratio) = (dropped_percent(lossy), completion_ratio(lossless));
            (
                label(lossy),
                [
                    Bar {
                        fraction: dropped / max_dropped,
                        fill: "#c0504d",
                        text: format!("{dropped:.2}%"),
                    },
                    Bar {
                        fraction: ratio / max_ratio,
                        fill: "#2f6fbb",
                        text: format!("{ratio:.2}x"),
                    },
                ],
            )
        })
        .collect();
    paired_bars(
        "Adaptive routing: slow-spine dropped % of sent (red), slow-spine-lossless completion / ideal (blue)",
        &bars,
    )
}

/// Each mode's row name and telemetry, to check two reports line up.
fn rows(report: &Report) -> impl Iterator<Item = (&str, bool)> {
    report.modes.iter().map(|m| (m.mode.as_str(), m.telemetry))
}

fn label(mode: &ModeReport) -> String {
    if mode.telemetry {
        format!("{} + telemetry", mode.mode)
    } else {
        mode.mode.clone()
    }
}

/// The last spine's (the slow one's) share of the leaf's bytes.
fn slow_share(mode: &ModeReport) -> f64 {
    mode.spine_share.last().copied().unwrap_or(0.0)
}

fn dropped_percent(mode: &ModeReport) -> f64 {
    100.0 * mode.dropped as f64 / (mode.sent as f64).max(1.0)
}

fn completion_ratio(mode: &ModeReport) -> f64 {
    mode.completion_ms / mode.ideal_ms
}
