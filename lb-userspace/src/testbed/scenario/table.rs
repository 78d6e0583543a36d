//! A scenario's table for people.

use super::{Report, Scenario};

/// Prints the workload, one row per mode, and what the columns mean.
pub fn print(scenario: &Scenario, report: &Report) {
    println!("scenario {}: {}\n", report.scenario, scenario.workload);
    let mut header = format!("{:<12} {:>5}", "mode", "telem");
    for j in 1..=scenario.shape.spines {
        header.push_str(&format!(" {:>6}", format!("s{j}")));
    }
    println!(
        "{header} {:>7} {:>8} {:>7} {:>5} {:>10} {:>9} {:>8} {:>6} {:>6}",
        "sent", "received", "dropped", "lost", "max queue", "complete", "ideal", "moves", "in-msg"
    );
    for mode in &report.modes {
        let mut line = format!(
            "{:<12} {:>5}",
            mode.mode,
            if mode.telemetry { "yes" } else { "no" }
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
            "{line} {:>7} {:>8} {:>7} {:>5} {:>10} {:>7.0}ms {:>6.0}ms {:>6} {:>6}",
            mode.sent,
            mode.received,
            mode.dropped,
            mode.link_lost,
            format!("{}K s{spine}", queue / 1024),
            mode.completion_ms,
            mode.ideal_ms,
            mode.flowlet_moves,
            mode.in_message_reorders
        );
    }
    println!(
        "\nshares are of the bytes fabriclb forwarded per spine; dropped = packets the spines' \
         queues (TBF) dropped; lost = packets the testbed's own links dropped (a loaded \
         machine's); max queue = the largest queue sampled every 10 ms, and its spine; complete \
         = first packet sent to last packet received; ideal = all bytes sent over the sum of the \
         spines' rates; moves = flowlet moves; in-msg = MIDDLE/LAST packets that did not follow \
         their message's previous packet"
    );
}
