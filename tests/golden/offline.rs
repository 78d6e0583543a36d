//! `explain` with no instance: a config's tables built in memory
//! (`Offline`) against every golden fixture, whose verdict and next hop
//! the other golden tests hold the program to; and `fabriclb explain
//! --offline` as a user without root runs it.

use std::process::Command;

use fabriclb::config;
use fabriclb::dataplane::tables;
use fabriclb::inspect::explain::explain;
use fabriclb::inspect::offline::Offline;
use lb_common::abi::PortMacs;
use lb_common::verdict::Reason;

use crate::fixtures::{self, Fixture};
use crate::harness::LOOPBACK;
use crate::switch::{self, LB_MAC};

/// `toml`'s tables with `local` as the box's addresses, next hops given
/// by address unresolved, and frames to [`LB_MAC`] taken in on
/// [`LOOPBACK`]: the state the harness programs the maps with.
fn offline(toml: &str, local: &[&str]) -> Offline {
    let config = config::parse(toml, "golden.toml".as_ref()).expect("golden config");
    let local = local.iter().map(|a| a.parse().expect("address")).collect();
    let port = PortMacs {
        ifindex: LOOPBACK,
        own: LB_MAC,
        dlb: [0; 6],
    };
    let nexthop = |spec: &_| tables::static_nexthop(spec, LOOPBACK, LB_MAC);
    (Offline::with_nexthops(&config, nexthop).expect("tables"))
        .with_local(&local)
        .expect("local addresses")
        .with_port(port)
}

/// Each fixture explained from `offline`: its verdict, and a forwarded
/// one's next hop (MAC and VLAN) the member it pins.
fn agree(offline: &Offline, fixtures: &[Fixture]) {
    for fixture in fixtures {
        let name = &fixture.name;
        let e = explain(offline, &fixture.input, LOOPBACK, None, 0).expect(name);
        assert_eq!(e.verdict, fixture.reason, "{name}: verdict");
        let Some(to) = &fixture.to else {
            continue;
        };
        let group = switch::group(to.group);
        let (_, nh) = e.next_hop.expect("a forwarded frame's next hop");
        assert_eq!(nh.dst_mac, group.mac(to.member), "{name}: next hop");
        assert_eq!(nh.vlan, group.vlan.unwrap_or(0), "{name}: VLAN");
    }
}

#[test]
fn explained_offline_every_golden_fixture_gets_the_programs_verdict_and_next_hop() {
    let on_switch = offline(&switch::config(), &[]);
    let sets = [
        fixtures::forwarding::fixtures(),
        fixtures::l4_lengths::fixtures(),
        fixtures::pass_drop::fixtures(),
        fixtures::truncation::fixtures(),
    ];
    for set in &sets {
        agree(&on_switch, set);
    }
    let local = fixtures::local::fixtures();
    agree(
        &offline(fixtures::local::CONFIG, &fixtures::local::LOCAL),
        &local,
    );
    let all: Vec<&Fixture> = sets.iter().flatten().chain(&local).collect();
    let forwarded = all.iter().filter(|f| f.reason == Reason::Forwarded).count();
    eprintln!(
        "{} golden fixtures explained offline, {forwarded} forwarded",
        all.len()
    );
    // Every verdict, and the forwarded ones over every group of the
    // switch, are covered (`every_reason_has_a_fixture`).
    assert!(
        all.len() >= 90 && forwarded >= 30,
        "{} fixtures, {forwarded} forwarded",
        all.len()
    );
}

/// What `explain --offline` prints for a packet of the example config, run
/// as `nobody`: no root, no instance, no bpffs.
#[test]
fn explain_offline_needs_no_root_and_says_what_it_assumed() {
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/two-tier-leaf.toml");
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_fabriclb"))
        .args([
            "explain",
            "--offline",
            "--config",
            config,
            "--ingress",
            "eth0",
        ])
        .arg("udp 10.1.1.2:49152 -> 10.1.2.3:4791 qp 0x1a2b")
        .output()
        .expect("setpriv");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .collect::<Vec<_>>(),
        [
            "note: explained from the config alone, with no instance: every next hop up, path \
             qualities at their default (no telemetry), no flowlet state (each packet its \
             flow's first), spray cursors and recent loads at zero, CPU 0; interfaces \
             numbered in the config's order",
            "note: MACs only a running box knows show as 00:00:00:00:00:00 (the ports' own, \
             next hops' given by address), and no frame is refused as another host's",
            "note: no address is taken as the box's own",
            "verdict: forwarded (XDP_REDIRECT): routed, rewritten, sent to the next hop",
            "packet: udp 10.1.1.2:49152 -> 10.1.2.3:4791 qp 0x001a2b opcode 0x07 psn 0, ttl 64, \
             58 bytes",
            "route: 10.1.2.0/24 -> group spines (id 0)",
            "group: spines (id 0): mode ecmp, gap 256us, spray self-contained, hash \
             src_ip,dst_ip,ip_protocol,l4_src_port,l4_dst_port,rdma_bth_dest_qp, seed \
             0x1eaf0001, generation 1, 4 members",
            "hash input: 0a010102 0a010203 11 c000 12b7 001a2b",
            "hash: 0x4873a2a6, bucket 166 -> next hop 2 (eth6 02:00:00:00:03:01)",
            "next hop: next hop 2 (eth6 02:00:00:00:03:01): out eth6 (ifindex 7), \
             00:00:00:00:00:00 -> 02:00:00:00:03:01, untagged, usable",
        ]
    );
}
