//! A scenario's table for people.

use super::{Report, Scenario};

/// Prints the workload, one row per mode, and what the columns mean.
pub fn print(scenario: &Scenario, report: &Report) {
    println!("scenario {}: {}\n", report.scenario, scenario.workload);
    let mut header = format!("{:<12} {:>5} {:<11}", "mode", "telem", "choice");
    for j in 1..=scenario.shape.spines {
        header.push_str(&format!(" {:>6}", format!("s{j}")));
    }
    println!(
        "{header} {:>5} {:>7} {:>8} {:>7} {:>5} {:>6} {:>5} {:>10} {:>9} {:>8} {:>6} {:>6}",
        "mmr",
        "sent",
        "received",
        "dropped",
        "lost",
        "tx err",
        "unacc",
        "max queue",
        "complete",
        "ideal",
        "moves",
        "in-msg"
    );
    for mode in &report.modes {
        let mut line = format!(
            "{:<12} {:>5} {:<11}",
            mode.mode,
            if mode.telemetry { "yes" } else { "no" },
            if mode.mode == "ecmp" {
                ""
            } else {
                mode.choice.as_str()
            }
        );
        for share in &mode.spine_share {
            line.push_str(&format!(" {:>5.1}%", 100.0 * share));
        }
        let (spine, queue) = mode
            .max_queue_bytes
            .iter()
            .enumerate()
            .max_by_key(|(_, q)| **q)
            .map_or((0, 0), |(j, q)| (j + 1, *q));
        println!(
            "{line} {:>5.2} {:>7} {:>8} {:>7} {:>5} {:>6} {:>5} {:>10} {:>7.0}ms {:>6.0}ms {:>6} {:>6}",
            mode.spine_mmr,
            mode.sent,
            mode.received,
            mode.dropped,
            mode.link_lost,
            mode.tx_errors,
            mode.unaccounted,
            format!("{}K s{spine}", queue / 1024),
            mode.completion_ms,
            mode.ideal_ms,
            mode.flowlet_moves,
            mode.in_message_reorders
        );
    }
    let examples: Vec<_> = (report.modes.iter())
        .filter_map(|m| Some((m, m.flow_events.as_ref()?.example.as_ref()?)))
        .collect();
    if !examples.is_empty() {
        println!(
            "\nfabriclb watch: each row's flowlet moved by the choice off the slowest spine to the path rated most above it"
        );
        for (mode, line) in examples {
            let telemetry = if mode.telemetry { ", telemetry" } else { "" };
            println!("  {} ({}{telemetry}): {line}", mode.mode, mode.choice);
        }
    }
    let simulated: Vec<_> = (report.modes.iter())
        .filter_map(|m| Some((m, m.simulated.as_ref()?)))
        .collect();
    if !simulated.is_empty() {
        println!(
            "\nfabriclb simulate, the leaf's config and the same collective in memory: the \
             largest gap between a spine's share here and there, busiest/mean, flowlet moves, \
             in-message reorders"
        );
        for (mode, sim) in simulated {
            println!(
                "  {:<11} gap {:>4.1} points   busiest/mean {:.2} (testbed {:.2})   moves {} \
                 (testbed {})   reorders {} (testbed {})",
                mode.mode,
                sim.share_gap * 100.0,
                sim.spine_mmr,
                mode.spine_mmr,
                sim.flowlet_moves,
                mode.flowlet_moves,
                sim.in_message_reorders,
                mode.in_message_reorders
            );
        }
    }
    if let Some(change) = &scenario.change {
        println!(
            "\nreaction to spine {} slowing to {} Mbit/s: from the tc change to the first \
             lowered path quality at the leaf, and to the end of the first 20 ms in which the \
             spine carried at most half its share of before, if it did so to the end of the \
             500 ms watch ('-': never); the spine's share in the 300 ms before and the 500 ms \
             after the change",
            change.spine, change.rate_mbit
        );
        let ms = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.1} ms"));
        for mode in &report.modes {
            let reaction = mode.reaction.unwrap_or_default();
            let share =
                |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{:.1}%", 100.0 * v));
            println!(
                "{:<12} {:>5}  quality {:>9}  shift {:>9}  share {:>6} -> {:>6}",
                mode.mode,
                if mode.telemetry { "yes" } else { "no" },
                ms(reaction.quality_ms),
                ms(reaction.shift_ms),
                share(reaction.share_before),
                share(reaction.share_after)
            );
        }
    }
    if let Some(flap) = &scenario.flap {
        println!(
            "\nspine {}'s link down at {} ms, up at {} ms: failover = from the change to the \
             last packet the leaf's program still sent to it (sampled every ms); rejoin = from \
             the link set up to the first packet it sent to it again; flows moved when it went \
             (of those that were on it) and when it came back, and flows not back where they \
             were",
            flap.spine,
            flap.down_after.as_millis(),
            flap.up_after.as_millis()
        );
        for mode in &report.modes {
            let f = mode.failover().unwrap_or_default();
            println!(
                "{:<12} failover {:>6} ms  rejoin {:>6} ms  lost {:>5}  moved {}/{} (of {} on \
                 it)  back {}  displaced {}",
                mode.mode,
                optional_ms(f.failover_ms),
                optional_ms(f.rejoin_ms),
                f.lost,
                f.moved_flows,
                f.total_flows,
                f.dead_link_flows,
                f.rejoin_moved_flows,
                f.displaced_flows
            );
        }
    }
    if let Some(plan) = &scenario.drain {
        println!(
            "\nspine {} drained by BGP: kernel = from the vtysh command to the first route \
             change in the leaf's kernel; fabriclb = to the first sample of the leaf's group \
             without the spine; flows moved when it left (of those on it) and when it came back",
            plan.spine
        );
        for mode in &report.modes {
            let Some(d) = mode.drains() else { continue };
            for drain in &d.drains {
                println!(
                    "{:<12} {:<18} kernel {:>6.1} ms  fabriclb {:>6.1} ms (+{:.1})  moved {}/{} \
                     (of {} on it)  back {}",
                    mode.mode,
                    drain.how.as_str(),
                    drain.kernel_ms,
                    drain.convergence_ms,
                    drain.added_ms,
                    drain.moved_flows,
                    d.total_flows,
                    drain.drained_flows,
                    drain.rejoin_moved_flows
                );
            }
            println!("{:<12} lost {}", mode.mode, d.lost);
        }
    }
    println!(
        "\nshares are of the bytes fabriclb forwarded per spine; dropped = packets the spines' \
         queues (TBF) dropped; lost = packets the testbed's own links dropped (a loaded \
         machine's); tx err = packets fabriclb redirected that the leaf's kernel failed to send \
         (fabriclb_egress_tx_errors_total); unacc = sent - received - dropped - lost - tx err, \
         0 when every loss was counted; max queue = the largest queue sampled every 10 ms, and its spine; complete \
         = first packet sent to last packet received; ideal = what a split in proportion to capacity \
         would take: all bytes sent over the sum of the spines' rates, or the paced sending \
         time if longer; moves = flowlet moves; in-msg = MIDDLE/LAST packets that did not follow \
         their message's previous packet"
    );
}

/// A time in milliseconds, or `n/a` when it was not measured.
pub(super) fn optional_ms(ms: Option<f64>) -> String {
    ms.map_or_else(|| "n/a".into(), |ms| format!("{ms:.1}"))
}
