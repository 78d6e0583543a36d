//! `fabriclb testbed demo`: the same ring all-reduce through every mode,
//! one table row per mode.

use anyhow::{Context, Result};

use super::drops::unaccounted;
use super::{
    Collective, FIVE_TUPLE, Leaf, ROCE_MTU, Shape, Testbed, leftovers, run_collective,
    tear_down_on_signal,
};
use crate::traffic::{Exchange, Pace, Pattern};

/// Builds testbed `name`, runs the collective once per mode, prints the
/// table, tears down (also on Ctrl-C).
pub fn run(name: &str, s: Shape, messages: u32) -> Result<()> {
    let exe = std::env::current_exe().context("locating the fabriclb binary")?;
    let workdir = std::env::temp_dir().join(format!("fabriclb-demo-{}", std::process::id()));
    std::fs::create_dir_all(&workdir)?;
    leftovers::hold(&workdir);
    println!(
        "testbed: {} hosts -> leaf (fabriclb, XDP) -> {} spines -> far leaf -> {} receivers",
        s.hosts, s.spines, s.hosts
    );
    tear_down_on_signal(name)?;
    let bed = Testbed::up(name, s.clone())?;
    let flowlet = format!("mode = \"flowlet\"\n{}", FIVE_TUPLE);
    let modes = [
        ("ecmp, five-tuple", FIVE_TUPLE.to_owned()),
        ("ecmp + dest QP", String::new()),
        ("flowlet, five-tuple", flowlet),
        ("per-packet", "mode = \"per-packet\"".to_owned()),
        (
            "per-packet, spray all",
            "mode = \"per-packet\"\nspray = \"all\"".to_owned(),
        ),
    ];
    println!(
        "workload: ring all-reduce, {} ranks, 4 QPs per connection with a UDP source port each, \
         {messages} messages of 64 KiB per connection, each followed by 2 single-packet WRITEs; \
         1 ms between rounds; {} B RoCE MTU\n",
        s.hosts, ROCE_MTU
    );
    let mut header = format!("{:<22}", "mode");
    for j in 1..=s.spines {
        header.push_str(&format!(" {:>6}", format!("s{j}")));
    }
    println!(
        "{header} {:>6} {:>7} {:>7} {:>7} {:>8} {:>5} {:>6} {:>5} {:>9} {:>10}",
        "MMR",
        "sprayed",
        "moves",
        "sent",
        "received",
        "lost",
        "tx err",
        "unacc",
        "reordered",
        "in-message"
    );
    let mut result = Ok(());
    for (mode, group) in modes {
        let collective = Collective {
            exchange: Exchange {
                pattern: Pattern::Ring,
                qps_per_connection: 4,
                message_bytes: 65536,
                mtu: ROCE_MTU,
                source_port_per_qp: true,
                messages,
                small_messages: 2,
            },
            // Gaps between rounds of messages, as collectives have: what
            // lets flowlets move.
            pace: Pace {
                rate_pps: None,
                gap: std::time::Duration::from_millis(1),
                spread: false,
            },
            senders: s.hosts,
            leaf: Leaf::Fabriclb { group },
        };
        match run_collective(&bed, &exe, &workdir, &collective) {
            Ok(report) => {
                let mut line = format!("{mode:<22}");
                for share in report.leaf.byte_shares() {
                    line.push_str(&format!(" {:>5.1}%", 100.0 * share));
                }
                let lost = report.drops.lost_on_the_way() + report.spine_drops();
                println!(
                    "{line} {:>6} {:>7} {:>7} {:>7} {:>8} {:>5} {:>6} {:>5} {:>9} {:>10}",
                    report
                        .leaf
                        .byte_mmr()
                        .map_or_else(|| "n/a".into(), |mmr| format!("{mmr:.3}")),
                    report.leaf.sprayed,
                    report.leaf.flowlet_moves,
                    report.sent_packets,
                    report.received.packets,
                    lost,
                    report.leaf.tx_errors,
                    unaccounted(
                        report.sent_packets,
                        report.received.packets,
                        lost + report.leaf.tx_errors
                    ),
                    report.received.out_of_order,
                    report.received.message_out_of_order
                );
            }
            Err(e) => {
                result = Err(e.context(format!("mode {mode}")));
                break;
            }
        }
    }
    drop(bed);
    leftovers::remove(&workdir);
    println!(
        "\nshares are of bytes per spine as fabriclb counted them; MMR = busiest spine over the mean; \
         lost = packets the testbed's links and the spines' queues dropped; tx err = packets \
         fabriclb redirected that the leaf's kernel failed to send \
         (fabriclb_egress_tx_errors_total); unacc = sent - received - lost - tx err, 0 when every \
         loss was counted; reordered = packets out of their QP's PSN order at the receivers (single-packet messages \
         may overtake each other when sprayed); in-message = MIDDLE/LAST packets that did not \
         follow their message's previous packet"
    );
    result
}
