//! Program cost: every packet kind through the whole path, the baseline
//! and the path cut short after each stage, all behind the same restore
//! wrapper and timed in interleaved rounds with the empty program, whose
//! cost each figure is taken above (per round, then the median).

use std::fmt::Write as _;

use anyhow::Result;
use fabriclb::dataplane::Dataplane;
use lb_common::{
    abi::bench::{ABLATIONS, PROGRAM_BASELINE, PROGRAM_BENCH, PROGRAM_CLOCK, PROGRAM_EMPTY},
    verdict::{XDP_DROP, XDP_REDIRECT},
};
use serde::Serialize;

use super::{Budget, keeps_to_a_flowlet, packet_kinds, spread, time};

/// One packet kind's cost above the empty program, ns/packet.
#[derive(Serialize)]
pub struct CostRow {
    pub kind: &'static str,
    /// The group mode the packet's route leads to.
    pub mode: &'static str,
    /// fabriclb above the empty program: median of the rounds.
    pub ns: f64,
    pub ns_min: f64,
    pub ns_max: f64,
    /// The baseline (parse, redirect, rewrite) above the empty program.
    pub baseline_ns: f64,
    pub baseline_min: f64,
    pub baseline_max: f64,
    /// `ns / baseline_ns`.
    pub ratio: f64,
    /// The empty program itself (wrapper and test run).
    pub empty_ns: f64,
    /// What each stage adds, in path order (`stages`), the counters last.
    pub stages: Vec<f64>,
    /// The flowlet clock's read alone above the empty program, timed in the
    /// same rounds.
    pub clock_ns: f64,
    /// Whether the packet keeps to a flowlet, and so reads the clock.
    pub reads_clock: bool,
}

/// The breakdown's column names: the ablations' stages, then the counters.
fn stage_names() -> Vec<&'static str> {
    ABLATIONS
        .iter()
        .map(|&(_, stage)| stage)
        .chain(["counters"])
        .collect()
}

pub fn section(dp: &mut Dataplane, budget: &Budget, report: &mut String) -> Result<Vec<CostRow>> {
    // Loading the entry points shares the maps programmed above.
    let mut programs = vec![PROGRAM_EMPTY, PROGRAM_BASELINE];
    programs.extend(ABLATIONS.iter().map(|&(name, _)| name));
    programs.extend([PROGRAM_BENCH, PROGRAM_CLOCK]);
    let (bench, clock) = (programs.len() - 2, programs.len() - 1);
    for name in &programs {
        dp.load_program(name)?;
    }
    let mut rows = Vec::new();
    for (kind, mode, frame) in packet_kinds() {
        // samples[p][round]: ns/packet of program p.
        let mut samples = vec![Vec::new(); programs.len()];
        for _ in 0..budget.runs {
            // Interleaved, so drift on this noisy machine hits all alike.
            for (p, name) in programs.iter().enumerate() {
                let verdict = if p == 0 || p == clock {
                    XDP_DROP
                } else {
                    XDP_REDIRECT
                };
                samples[p].push(time(dp.named(name)?, &frame, budget.repeat, verdict)?);
            }
        }
        let above = |p: usize| -> Vec<f64> {
            samples[p]
                .iter()
                .zip(&samples[0])
                .map(|(s, e)| s - e)
                .collect()
        };
        let medians: Vec<f64> = (0..programs.len())
            .map(|p| spread(&mut above(p)).1)
            .collect();
        let (b, l) = (spread(&mut above(1)), spread(&mut above(bench)));
        rows.push(CostRow {
            kind,
            mode,
            ns: l.1,
            ns_min: l.0,
            ns_max: l.2,
            baseline_ns: b.1,
            baseline_min: b.0,
            baseline_max: b.2,
            ratio: l.1 / b.1,
            empty_ns: spread(&mut samples[0]).1,
            // Ablations and the whole path follow the baseline; the first
            // stage is taken above nothing (the empty program).
            stages: medians[2..=bench]
                .iter()
                .scan(0.0, |before, &now| {
                    let added = now - *before;
                    *before = now;
                    Some(added)
                })
                .collect(),
            clock_ns: medians[clock],
            reads_clock: keeps_to_a_flowlet(mode),
        });
    }
    write_tables(&rows, budget, report);
    Ok(rows)
}

fn write_tables(rows: &[CostRow], budget: &Budget, report: &mut String) {
    let _ = writeln!(
        report,
        "## Program cost (BPF_PROG_TEST_RUN, {} repeats per run, {} interleaved runs, ns/packet above the empty program, min / median / max)\n",
        budget.repeat, budget.runs
    );
    report.push_str("Every program runs behind the same restore wrapper; the empty program is that wrapper around nothing, and each figure is a run's time minus the empty program's in the same round.\n\n");
    report.push_str("| packet | mode | empty program | baseline: parse + redirect + rewrite | fabriclb | ratio of medians |\n|---|---|---|---|---|---|\n");
    for r in rows {
        let _ = writeln!(
            report,
            "| {} | {} | {:.0} | {:.0} / {:.0} / {:.0} | {:.0} / {:.0} / {:.0} | {:.2} |",
            r.kind,
            r.mode,
            r.empty_ns,
            r.baseline_min,
            r.baseline_ns,
            r.baseline_max,
            r.ns_min,
            r.ns,
            r.ns_max,
            r.ratio
        );
    }
    clock_note(rows, report);
    let names = stage_names();
    report.push_str("\n### Breakdown: what each stage adds (ns/packet, medians)\n\n");
    report.push_str("Programs built from the forwarding path cut short after each stage (`lb_ebpf::forward::stage`); a stage's cost is the difference of two medians, so noise can make a small one negative.\n\n| packet |");
    for name in &names {
        let _ = write!(report, " {name} |");
    }
    report.push_str(" total |\n|---|");
    report.push_str(&"---|".repeat(names.len() + 1));
    report.push('\n');
    for r in rows {
        let _ = write!(report, "| {} |", r.kind);
        for ns in &r.stages {
            let _ = write!(report, " {ns:.0} |");
        }
        let _ = writeln!(report, " {:.0} |", r.ns);
    }
    report.push('\n');
}

/// What the flowlet clock's read costs alone, and the rows that pay it
/// without it: the share of their cost the kernel's clock takes.
fn clock_note(rows: &[CostRow], report: &mut String) {
    let mut clock: Vec<f64> = rows.iter().map(|r| r.clock_ns).collect();
    let (_, clock, _) = spread(&mut clock);
    let _ = write!(
        report,
        "\nOne read of the clock flowlet gaps are measured on (`bpf_ktime_get_ns`, the only clock finer than a jiffy an XDP program has on this kernel), alone behind the wrapper: **{clock:.0} ns** above the empty program, median of every round."
    );
    for r in rows.iter().filter(|r| r.reads_clock) {
        let without = r.ns - r.clock_ns;
        let _ = write!(
            report,
            " {} {}: {:.0} ns less the read, {:.2} times the baseline.",
            r.kind,
            r.mode,
            without,
            without / r.baseline_ns
        );
    }
    report.push('\n');
}
