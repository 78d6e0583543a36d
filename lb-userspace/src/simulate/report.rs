//! A simulation's results: a table for people, JSON for scripts.

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::{Outcome, PathRates};
use crate::config::Mode;

/// One mode's run.
#[derive(Clone, Debug)]
pub struct ModeRun {
    pub mode: Mode,
    pub outcome: Outcome,
}

/// The runs as a table: one row per mode, then each next hop's share
/// of its group's bytes per mode.
pub fn table(runs: &[ModeRun]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<11} {:>9} {:>10} {:>9} {:>8} {:>9} {:>13} {:>14}",
        "mode",
        "sent",
        "forwarded",
        "flowlets",
        "moves",
        "reorders",
        "busiest/mean",
        "completion ms"
    );
    for run in runs {
        let o = &run.outcome;
        let busiest = o
            .busiest_over_mean()
            .map_or_else(|| "-".to_owned(), |b| format!("{b:.2}"));
        let _ = writeln!(
            out,
            "{:<11} {:>9} {:>10} {:>9} {:>8} {:>9} {:>13} {:>14.1}",
            run.mode.name(),
            o.sent_packets,
            forwarded(o),
            o.new_flowlets,
            o.flowlet_moves,
            o.reorders,
            busiest,
            o.completion_ns as f64 / 1e6
        );
    }
    let Some(first) = runs.first() else {
        return out;
    };
    let _ = writeln!(out, "\nshare of the group's bytes per next hop:");
    let width = (first.outcome.paths.iter())
        .map(|p| p.group.len() + p.next_hop.len() + 1)
        .max()
        .unwrap_or(0);
    let _ = write!(out, "{:<width$}", "");
    for run in runs {
        let _ = write!(out, " {:>11}", run.mode.name());
    }
    out.push('\n');
    let shares: Vec<Vec<f64>> = runs.iter().map(|r| r.outcome.shares()).collect();
    for (i, path) in first.outcome.paths.iter().enumerate() {
        let label = format!("{} {}", path.group, path.next_hop);
        let _ = write!(out, "{label:<width$}");
        for run_shares in &shares {
            match run_shares.get(i) {
                Some(share) => {
                    let _ = write!(out, " {:>10.1}%", share * 100.0);
                }
                None => out.push_str("           -"),
            }
        }
        out.push('\n');
    }
    for (verdict, count) in (runs.iter())
        .flat_map(|r| r.outcome.verdicts.iter().map(move |v| (r.mode, v)))
        .filter(|(_, (name, _))| **name != "forwarded")
        .map(|(mode, (name, count))| (format!("{mode}: {name}"), count))
    {
        let _ = writeln!(out, "not forwarded, {verdict}: {count}");
    }
    out
}

fn forwarded(outcome: &Outcome) -> u64 {
    outcome.verdicts.get("forwarded").copied().unwrap_or(0)
}

/// `{"simulation": {"config", "traffic", "path_bits_per_s",
/// "path_bits_per_s_by_interface", "assumed"}, "modes": [...]}`.
pub fn json(
    config: &str,
    traffic: &str,
    rates: &PathRates,
    assumed: &[String],
    runs: &[ModeRun],
) -> Value {
    let modes: Vec<Value> = runs
        .iter()
        .map(|run| {
            let o = &run.outcome;
            let paths: Vec<Value> = (o.paths.iter().zip(o.shares()))
                .map(|(p, share)| {
                    json!({
                        "group": p.group,
                        "interface": p.interface,
                        "next_hop": p.next_hop,
                        "packets": p.packets,
                        "bytes": p.bytes,
                        "share": share,
                    })
                })
                .collect();
            json!({
                "mode": run.mode.name(),
                "sent": o.sent_packets,
                "sent_bytes": o.sent_bytes,
                "forwarded": forwarded(o),
                "verdicts": o.verdicts,
                "paths": paths,
                "busiest_over_mean": o.busiest_over_mean(),
                "new_flowlets": o.new_flowlets,
                "flowlet_moves": o.flowlet_moves,
                "moves_by_cause": o.moves,
                "sprayed": o.sprayed,
                "reorders": o.reorders,
                "completion_ms": o.completion_ns as f64 / 1e6,
            })
        })
        .collect();
    json!({
        "simulation": {
            "config": config,
            "traffic": traffic,
            "path_bits_per_s": rates.default,
            "path_bits_per_s_by_interface": rates.by_interface,
            "assumed": assumed,
        },
        "modes": modes,
    })
}
