//! End to end through network namespaces: h1 sends real UDP frames, the
//! leaf's `fabriclb run` (the real binary, XDP in driver mode on a veth)
//! spreads them over four spines, the spines' kernels forward them to h2.
//! Checks the per-next-hop counters, arrival at the far side and the TTL
//! the leaf decremented. Needs root; the testbed is removed even when an
//! assertion fails.

use fabriclb::testbed::{self, Testbed};

#[test]
fn udp_flows_cross_the_leaf_over_every_spine() {
    let name = format!("flt{}", std::process::id() % 100_000);
    let bed = Testbed::up(&name, 4).expect("testbed");
    let workdir = std::env::temp_dir().join(format!("{name}-work"));
    std::fs::create_dir_all(&workdir).expect("workdir");
    let (flows, packets) = (64u16, 32u32);
    let report = testbed::run_traffic(
        &bed,
        env!("CARGO_BIN_EXE_fabriclb").as_ref(),
        &workdir,
        flows,
        packets,
    );
    let _ = std::fs::remove_dir_all(&workdir);
    let report = report.expect("traffic run");
    eprintln!("{report:#?}");
    // SIGTERM detached the program from the leaf's host port.
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
    assert_eq!(report.forwarded, sent, "every datagram forwarded by XDP");
    assert_eq!(report.received, sent, "every datagram arrived at h2");
    // Sent with 64; the leaf's XDP takes one, the spine's kernel another.
    assert_eq!(
        report.ttls.into_iter().collect::<Vec<_>>(),
        vec![(testbed::SENT_TTL - 2, sent)]
    );
    assert_eq!(report.nexthops.iter().map(|(_, p)| p).sum::<u64>(), sent);
    for (label, count) in &report.nexthops {
        // A flow never splits, so each spine carries whole flows; 64 flows
        // leave no spine idle (odds of one are 4 * (3/4)^64, about 4e-8).
        assert!(
            *count > 0 && count % u64::from(packets) == 0,
            "{label}: {count}"
        );
    }
}
