//! Golden packets through BPF_PROG_TEST_RUN on the real program: for each
//! fixture the verdict, the exact output bytes, the verdict counters and
//! the next hop's counters. Expected outputs are built from scratch
//! (fresh IPv4 checksum, new L2 header), and the expected next hop is
//! predicted on the host with `crc32fast`, so every forwarded fixture also
//! checks hash parity between the kernel and the host.
//!
//! Needs root (loads an XDP program). Frames shorter than 14 bytes cannot
//! be fed to BPF_PROG_TEST_RUN (the kernel refuses them); the parser's unit
//! tests cover those.

mod expected;
mod fixtures;
mod flowlet;
mod harness;
mod packets;
mod switch;

use lb_common::{packet::parse::IPPROTO_UDP, verdict::Reason};

use fixtures::Fixture;
use harness::{Harness, nexthop_of};
use packets::{PEER_MAC, ipv4_to, rocev2};
use switch::LB_MAC;

/// Checks every fixture on one harness; each check compares counter deltas,
/// so the fixtures before it do not matter.
fn check_all(kind: &str, fixtures: Vec<Fixture>) {
    let mut h = Harness::new();
    for fixture in &fixtures {
        h.check(fixture);
    }
    eprintln!("{} {kind} fixtures passed", fixtures.len());
}

#[test]
fn forwarding_fixtures_rewrite_and_redirect() {
    check_all("forwarding", fixtures::forwarding::fixtures());
}

#[test]
fn pass_and_drop_fixtures_leave_the_packet_alone() {
    check_all("pass/drop", fixtures::pass_drop::fixtures());
}

#[test]
fn truncated_frames_at_every_header_boundary() {
    check_all("truncation", fixtures::truncation::fixtures());
}

/// Sends 256 RoCEv2 packets of one five-tuple to `dst`, each on its own
/// QP; returns how many each member of `group` got, in member order.
fn spread(h: &mut Harness, group: &str, dst: [u8; 4]) -> Vec<usize> {
    let mut per_nexthop = vec![0usize; h.tables.nexthops.len()];
    for qp in 0..256u32 {
        let frame =
            ipv4_to(dst, IPPROTO_UDP).frame(LB_MAC, PEER_MAC, &[], &rocev2(0x0a, 0x1000 + qp));
        let (verdict, out) = h.run(&frame);
        assert_eq!(verdict, Reason::Forwarded.xdp_action());
        per_nexthop[nexthop_of(h, &out)] += 1;
    }
    h.members(group)
        .iter()
        .map(|&id| per_nexthop[id as usize])
        .collect()
}

#[test]
fn destination_qp_spreads_one_five_tuple() {
    let mut h = Harness::new();
    let with_qp = spread(&mut h, "spines", [10, 1, 0, 2]);
    eprintln!("256 QPs of one RoCEv2 five-tuple, hash with rdma_bth_dest_qp: {with_qp:?}");
    for (i, count) in with_qp.iter().enumerate() {
        assert!(
            (40..=88).contains(count),
            "next hop {i} got {count} of 256: {with_qp:?}"
        );
    }
    // Kernel counters agree with what left.
    for (&id, &count) in h.members("spines").iter().zip(&with_qp) {
        assert_eq!(h.dp.nexthop_stats(id).expect("stats").packets, count as u64);
    }

    let without_qp = spread(&mut h, "five-tuple", [10, 4, 0, 2]);
    eprintln!("same packets, hash without rdma_bth_dest_qp: {without_qp:?}");
    assert_eq!(
        without_qp.iter().filter(|&&c| c == 256).count(),
        1,
        "{without_qp:?}"
    );
    assert_eq!(without_qp.iter().sum::<usize>(), 256);
}

#[test]
fn every_reason_has_a_fixture() {
    let all: Vec<Fixture> = [
        fixtures::forwarding::fixtures(),
        fixtures::local::fixtures(),
        fixtures::pass_drop::fixtures(),
        fixtures::truncation::fixtures(),
    ]
    .into_iter()
    .flatten()
    .collect();
    for reason in Reason::ALL {
        assert!(
            all.iter().any(|f| f.reason == reason),
            "no fixture for {}",
            reason.name()
        );
    }
    eprintln!("{} golden fixtures in total", all.len());
}
