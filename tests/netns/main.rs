//! End to end through network namespaces, with the real `fabriclb run`
//! (XDP in driver mode on the leaf's veths) and the kernel forwarding on
//! the spines and the far leaf.
//!
//! Needs root; every testbed is removed even when an assertion fails.

mod bed;
mod local;

use std::time::{Duration, Instant};

use fabriclb::testbed::{self, Collective, Shape, Testbed};

use bed::{Bed, gaps, rate, ring};

/// h1 sends real UDP frames over sockets; checks the per-next-hop
/// counters, arrival at r1, the TTL, and that SIGTERM detached XDP.
#[test]
fn udp_flows_cross_the_leaf_over_every_spine() {
    let bed = Bed::up("u", 1);
    let (flows, packets) = (64u16, 32u32);
    let report = bed.traffic(flows, packets).expect("traffic run");
    eprintln!("{report:#?}");
    let link = std::process::Command::new("ip")
        .args(["-n", &bed.testbed.ns("leaf"), "-d", "link", "show", "h1"])
        .output()
        .expect("ip link show");
    let link = String::from_utf8_lossy(&link.stdout);
    assert!(
        link.contains("h1@") && !link.contains("xdp"),
        "XDP still attached: {link}"
    );

    let sent = u64::from(flows) * u64::from(packets);
    assert_eq!(report.sent, sent);
    assert_eq!(
        report.leaf.forwarded, sent,
        "every datagram forwarded by XDP"
    );
    assert_eq!(report.received, sent, "every datagram arrived at r1");
    // Sent with 64: the leaf's XDP, the spine and the far leaf take one each.
    assert_eq!(
        report.ttls.into_iter().collect::<Vec<_>>(),
        vec![(testbed::SENT_TTL - 3, sent)]
    );
    assert_eq!(
        report.leaf.spines.iter().map(|n| n.packets).sum::<u64>(),
        sent
    );
    for spine in &report.leaf.spines {
        // A flow never splits, so each spine carries whole flows; 64 flows
        // leave no spine idle (odds of one are 4 * (3/4)^64, about 4e-8).
        assert!(
            spine.packets > 0 && spine.packets % u64::from(packets) == 0,
            "{spine:?}"
        );
    }
}

/// Ring all-reduce of RoCEv2 from the generator: every packet arrives, in
/// PSN order (ECMP never splits a QP), and the QP hash spreads one
/// five-tuple per connection over the spines.
#[test]
fn rocev2_ring_all_reduce_arrives_in_order() {
    let bed = Bed::up("r", 4);
    let collective = Collective {
        qps_per_connection: 16,
        message_bytes: 4 * testbed::ROCE_MTU,
        messages: 32,
        pace: rate(200_000),
        ..ring(4, "")
    };
    let report = bed.collective(&collective).expect("collective run");
    eprintln!("{report:#?}");
    // 4 ranks x 1 connection x 32 messages x 4 packets.
    assert_eq!(report.sent_packets, 4 * 32 * 4);
    assert_eq!(report.received.packets, report.sent_packets);
    assert_eq!(report.received.bytes, report.sent_bytes);
    assert_eq!(report.received.qps, 4 * 16);
    assert_eq!(report.received.out_of_order, 0);
    assert_eq!(report.leaf.forwarded, report.sent_packets);
    // 64 QPs of 4 one-port connections: no spine idle.
    for spine in &report.leaf.spines {
        assert!(spine.packets > 0, "idle: {:?}", report.leaf.spines);
    }
}

/// 16 flows (4 ranks, 4 QPs each with its own UDP port) of 64 KiB messages
/// with 1 ms between rounds: flowlet mode spreads the bytes within 25% of
/// even where ECMP on the same five-tuples cannot, and moves flows only in
/// gaps, so nothing arrives out of order.
#[test]
fn flowlet_mode_balances_sixteen_flows_that_five_tuple_ecmp_cannot() {
    let bed = Bed::up("f", 4);
    let run = |group: &str| {
        bed.collective(&Collective {
            qps_per_connection: 4,
            message_bytes: 65536,
            messages: 64,
            pace: gaps(Duration::from_millis(1)),
            source_port_per_qp: true,
            ..ring(4, group)
        })
    };
    let ecmp = run(testbed::FIVE_TUPLE);
    let flowlet = run(&format!("mode = \"flowlet\"\n{}", testbed::FIVE_TUPLE));
    let (ecmp, flowlet) = (ecmp.expect("ecmp run"), flowlet.expect("flowlet run"));
    let shares = |r: &testbed::CollectiveReport| -> Vec<u64> {
        r.leaf.spines.iter().map(|s| s.bytes).collect()
    };
    eprintln!(
        "16 flows over 4 spines, bytes per spine:\n  ecmp five-tuple: {:?} MMR {:.3}\n  \
         flowlet:         {:?} MMR {:.3} ({} new flowlets, {} moves)",
        shares(&ecmp),
        ecmp.leaf.byte_mmr(),
        shares(&flowlet),
        flowlet.leaf.byte_mmr(),
        flowlet.leaf.new_flowlets,
        flowlet.leaf.flowlet_moves
    );
    for report in [&ecmp, &flowlet] {
        assert_eq!(report.sent_packets, 4 * 64 * 32);
        assert_eq!(report.received.packets, report.sent_packets);
        assert_eq!(report.received.out_of_order, 0);
        assert_eq!(report.received.message_out_of_order, 0);
    }
    assert!(
        flowlet.leaf.byte_mmr() <= 1.25,
        "flowlet MMR {:.3}",
        flowlet.leaf.byte_mmr()
    );
    assert!(
        ecmp.leaf.byte_mmr() > 1.25,
        "ECMP MMR {:.3}: these flows no longer collide; pick ports that do",
        ecmp.leaf.byte_mmr()
    );
    assert!(flowlet.leaf.flowlet_moves > 0);
    assert_eq!(flowlet.leaf.pinned, flowlet.sent_packets);
}

/// Per-packet mode, self-contained spraying: each 8-packet WRITE is
/// followed by 4 single-packet WRITEs on its QP. The single-packet ones
/// spread evenly over the spines; every multi-packet message arrives in
/// order.
#[test]
fn per_packet_mode_sprays_single_packet_messages_and_keeps_messages_in_order() {
    let bed = Bed::up("p", 4);
    let collective = Collective {
        qps_per_connection: 4,
        message_bytes: 8 * testbed::ROCE_MTU,
        messages: 64,
        pace: gaps(Duration::from_micros(200)),
        small_messages: 4,
        ..ring(4, "mode = \"per-packet\"")
    };
    let report = bed.collective(&collective).expect("collective run");
    let sprayed: Vec<u64> = report.leaf.spines.iter().map(|s| s.sprayed).collect();
    eprintln!(
        "sprayed per spine {sprayed:?} (MMR {:.3}); PSN order breaks {}, in-message {}",
        report.leaf.sprayed_mmr(),
        report.received.out_of_order,
        report.received.message_out_of_order
    );
    let (messages, single) = (4 * 64, 4 * 64 * 4);
    assert_eq!(report.sent_packets, messages * 8 + single);
    assert_eq!(report.received.packets, report.sent_packets);
    assert_eq!(report.received.message_out_of_order, 0);
    assert_eq!(report.leaf.sprayed, single);
    assert_eq!(report.leaf.pinned, messages * 8);
    assert_eq!(sprayed.iter().sum::<u64>(), single);
    assert!(report.leaf.sprayed_mmr() <= 1.05, "{sprayed:?}");
}

/// Under steady load, the group goes ecmp -> (an invalid config, refused)
/// -> per-packet -> flowlet -> ecmp by editing the file and sending SIGHUP.
/// Each change shows in the data plane's counters within a second, and no
/// packet is lost.
#[test]
fn live_mode_changes_lose_nothing_and_apply_within_a_second() {
    let bed = Bed::up("m", 2);
    let collective = Collective {
        qps_per_connection: 16,
        message_bytes: testbed::ROCE_MTU,
        // 8 single-packet WRITEs per round, 16k packets/s per sender: 6 s.
        messages: 12_000,
        pace: rate(16_000),
        small_messages: 7,
        ..ring(2, "")
    };
    let config = |group: &str| bed.testbed.leaf_config(group);
    let result = bed.collective_with(&collective, |daemon| {
        let daemon = daemon.expect("fabriclb leaf");
        let counters = || -> anyhow::Result<testbed::LeafCounters> {
            testbed::LeafCounters::from_metrics(&bed.testbed, &daemon.metrics()?)
        };
        // Waits until `changed` holds of two snapshots taken 100 ms apart
        // (the metrics file is rewritten every 100 ms); returns how long
        // after `since` that was.
        let wait = |since: Instant,
                    changed: &dyn Fn(&testbed::LeafCounters, &testbed::LeafCounters) -> bool|
         -> anyhow::Result<Duration> {
            loop {
                let a = counters()?;
                std::thread::sleep(Duration::from_millis(100));
                let b = counters()?;
                if b.forwarded > a.forwarded && changed(&a, &b) {
                    return Ok(since.elapsed());
                }
                anyhow::ensure!(
                    since.elapsed() < Duration::from_secs(3),
                    "no effect after 3 s"
                );
            }
        };
        let mut took = Vec::new();
        std::thread::sleep(Duration::from_millis(800));
        let start = counters()?;
        anyhow::ensure!(start.forwarded > 0 && start.sprayed == 0 && start.pinned == 0);

        daemon.reconfigure(&config("mode = \"sprinkle\""))?;
        std::thread::sleep(Duration::from_millis(500));
        let refused = counters()?;
        anyhow::ensure!(
            refused.mode.as_deref() == Some("ecmp") && refused.sprayed == 0 && refused.pinned == 0,
            "an invalid config changed something: {refused:?}"
        );

        let sent = daemon.reconfigure(&config("mode = \"per-packet\""))?;
        took.push((
            "per-packet",
            wait(sent, &|a, b| b.sprayed > a.sprayed && b.pinned == a.pinned)?,
        ));
        let sent = daemon.reconfigure(&config("mode = \"flowlet\""))?;
        took.push((
            "flowlet",
            wait(sent, &|a, b| b.pinned > a.pinned && b.sprayed == a.sprayed)?,
        ));
        let sent = daemon.reconfigure(&config(""))?;
        took.push((
            "ecmp",
            wait(sent, &|a, b| b.pinned == a.pinned && b.sprayed == a.sprayed)?,
        ));
        Ok(took)
    });
    let (report, took) = result.expect("run with mode changes");
    eprintln!(
        "mode changes took effect after {took:?}; sent {}, received {}, forwarded {}, to the kernel {}",
        report.sent_packets,
        report.received.packets,
        report.leaf.forwarded,
        report.leaf.passed_to_kernel
    );
    assert_eq!(report.sent_packets, 2 * 12_000 * 8);
    assert_eq!(report.received.packets, report.sent_packets, "packets lost");
    assert_eq!(report.leaf.forwarded, report.sent_packets);
    for (mode, elapsed) in took {
        assert!(elapsed < Duration::from_secs(1), "{mode} took {elapsed:?}");
    }
}

/// Building, dropping, keeping and removing a testbed leave no namespace
/// behind, also when the code using it panics; spine links get their TBF.
#[test]
fn testbed_teardown_leaves_nothing_behind() {
    let name = bed::name("t");
    let shape = Shape {
        hosts: 2,
        spines: 2,
        spine_rate_mbit: Some(100),
    };
    let panicked = std::panic::catch_unwind(|| {
        let bed = Testbed::up(&name, shape).expect("testbed");
        // leaf, far leaf, 2 senders, 2 receivers, 2 spines.
        assert_eq!(testbed::namespaces(&name).expect("list").len(), 8);
        let qdisc = std::process::Command::new("tc")
            .args(["-n", &bed.ns("s2"), "qdisc", "show", "dev", "fleaf"])
            .output()
            .expect("tc");
        let qdisc = String::from_utf8_lossy(&qdisc.stdout);
        assert!(
            qdisc.contains("tbf") && qdisc.contains("100Mbit"),
            "{qdisc}"
        );
        panic!("on purpose");
    });
    assert!(panicked.is_err());
    assert_eq!(
        testbed::namespaces(&name).expect("list"),
        Vec::<String>::new()
    );

    Testbed::up(&name, shape).expect("testbed").keep();
    assert_eq!(testbed::namespaces(&name).expect("list").len(), 8);
    assert_eq!(testbed::remove_namespaces(&name).expect("down"), 8);
    assert_eq!(
        testbed::namespaces(&name).expect("list"),
        Vec::<String>::new()
    );
}
