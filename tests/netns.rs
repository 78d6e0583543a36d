//! End to end through network namespaces, with the real `fabriclb run`
//! (XDP in driver mode on the leaf's veths) and the kernel forwarding on
//! the spines and the far leaf.
//!
//! Needs root; every testbed is removed even when an assertion fails.

use std::path::{Path, PathBuf};

use fabriclb::testbed::{self, Leaf, Shape, Testbed};
use fabriclb::traffic::{Pace, Pattern};

fn fabriclb() -> &'static Path {
    env!("CARGO_BIN_EXE_fabriclb").as_ref()
}

/// A testbed and a scratch directory named after this process and `tag`.
fn setup(tag: &str, shape: Shape) -> (Testbed, PathBuf) {
    let name = format!("fl{}{tag}", std::process::id() % 100_000);
    let bed = Testbed::up(&name, shape).expect("testbed");
    let workdir = std::env::temp_dir().join(format!("{name}-work"));
    std::fs::create_dir_all(&workdir).expect("workdir");
    (bed, workdir)
}

/// h1 sends real UDP frames over sockets; checks the per-next-hop
/// counters, arrival at r1, the TTL, and that SIGTERM detached XDP.
#[test]
fn udp_flows_cross_the_leaf_over_every_spine() {
    let (bed, workdir) = setup(
        "u",
        Shape {
            hosts: 1,
            spines: 4,
            spine_rate_mbit: None,
        },
    );
    let (flows, packets) = (64u16, 32u32);
    let report = testbed::run_traffic(&bed, fabriclb(), &workdir, flows, packets);
    let _ = std::fs::remove_dir_all(&workdir);
    let report = report.expect("traffic run");
    eprintln!("{report:#?}");
    let link = std::process::Command::new("ip")
        .args(["-n", &bed.ns("leaf"), "-d", "link", "show", "h1"])
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
    assert_eq!(report.leaf.nexthops.iter().map(|n| n.1).sum::<u64>(), sent);
    for (label, count, _) in &report.leaf.nexthops {
        // A flow never splits, so each spine carries whole flows; 64 flows
        // leave no spine idle (odds of one are 4 * (3/4)^64, about 4e-8).
        assert!(
            *count > 0 && count % u64::from(packets) == 0,
            "{label}: {count}"
        );
    }
}

/// Ring all-reduce of RoCEv2 from the generator: every packet arrives, in
/// PSN order (ECMP never splits a QP), and the QP hash spreads one
/// five-tuple per connection over the spines.
#[test]
fn rocev2_ring_all_reduce_arrives_in_order() {
    let (bed, workdir) = setup(
        "r",
        Shape {
            hosts: 4,
            spines: 4,
            spine_rate_mbit: None,
        },
    );
    let collective = testbed::Collective {
        pattern: Pattern::Ring,
        qps_per_connection: 16,
        message_bytes: 4 * testbed::ROCE_MTU,
        mtu: testbed::ROCE_MTU,
        messages: 32,
        pace: Pace {
            rate_pps: Some(200_000),
            gap: std::time::Duration::ZERO,
        },
        senders: 4,
        leaf: Leaf::Fabriclb { hash_fields: None },
    };
    let report = testbed::run_collective(&bed, fabriclb(), &workdir, &collective);
    let _ = std::fs::remove_dir_all(&workdir);
    let report = report.expect("collective run");
    eprintln!("{report:#?}");
    // 4 ranks x 1 connection x 32 messages x 4 packets.
    assert_eq!(report.sent_packets, 4 * 32 * 4);
    assert_eq!(report.received.packets, report.sent_packets);
    assert_eq!(report.received.bytes, report.sent_bytes);
    assert_eq!(report.received.qps, 4 * 16);
    assert_eq!(report.received.out_of_order, 0);
    assert_eq!(report.leaf.forwarded, report.sent_packets);
    // 64 QPs of 4 one-port connections: no spine idle.
    for (label, packets, _) in &report.leaf.nexthops {
        assert!(*packets > 0, "{label} idle: {:?}", report.leaf.nexthops);
    }
}

/// Building, dropping, keeping and removing a testbed leave no namespace
/// behind, also when the code using it panics; spine links get their TBF.
#[test]
fn testbed_teardown_leaves_nothing_behind() {
    let name = format!("fl{}t", std::process::id() % 100_000);
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
