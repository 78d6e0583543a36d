//! Golden packets through BPF_PROG_TEST_RUN on the real program: for each
//! fixture the verdict, the exact output bytes, the verdict counters and
//! every next hop's counters. Expected outputs are literal hex, or built by
//! etherparse where a test sends many packets; the member a forwarded
//! frame goes to is pinned literally and recomputed on the host from a
//! hash input written out by hand (`pins`), so every forwarded fixture
//! also checks hash parity between the kernel and the host. Nothing on
//! the expected side comes from the frames' builder, the daemon's tables
//! or the data plane's own parser and hash.
//!
//! Needs root (loads an XDP program). Frames shorter than 14 bytes cannot
//! be fed to BPF_PROG_TEST_RUN (the kernel refuses them); the parser's unit
//! tests cover those.

mod bench;
mod destinations;
mod dlb;
mod drain;
mod expected;
mod explain;
mod fixtures;
mod flowlet;
mod harness;
mod offline;
mod overrides;
mod packets;
mod pins;
mod rollback;
mod route_table;
mod status;
mod switch;

use lb_common::{packet::parse::IPPROTO_UDP, verdict::Reason};

use fixtures::Fixture;
use harness::Harness;
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

#[test]
fn l4_length_fields_are_held_to_the_datagram() {
    check_all("l4 length", fixtures::l4_lengths::fixtures());
}

/// The rewrite the tests that send many packets expect (etherparse's)
/// makes the literal frames of every forwarded fixture: two sources that
/// share no code agree before either is held against the data plane.
#[test]
fn etherparse_rewrite_makes_the_literal_frames() {
    for fixture in fixtures::forwarding::fixtures() {
        let to = fixture.to.expect("forwarded");
        let group = switch::group(to.group);
        assert_eq!(
            expected::forwarded(&fixture.input, group.mac(to.member), group.vlan),
            to.frame,
            "{}",
            fixture.name
        );
    }
}

/// Sends 256 RoCEv2 packets of one five-tuple to `dst`, each on its own
/// QP; returns how many each member of `group` got, in slot order.
fn spread(h: &mut Harness, group: &str, dst: [u8; 4]) -> Vec<usize> {
    let mut per_member = vec![0usize; 4];
    for qp in 0..256u32 {
        let frame =
            ipv4_to(dst, IPPROTO_UDP).frame(LB_MAC, PEER_MAC, &[], &rocev2(0x0a, 0x1000 + qp));
        let (verdict, out) = h.run(&frame);
        assert_eq!(verdict, Reason::Forwarded.xdp_action());
        per_member[h.slot_of(group, &out)] += 1;
    }
    per_member
}

/// The QPs differ only in the last byte of the hash input, and CRC-32 is
/// linear: the two low bits of the hash, which pick the member (bucket
/// `crc & 511` of 512 dealt round robin over four), take each value for
/// exactly a quarter of the 256 values of that byte. So the split is
/// exact, not merely even.
#[test]
fn destination_qp_spreads_one_five_tuple() {
    let mut h = Harness::new();
    let with_qp = spread(&mut h, "spines", [10, 1, 0, 2]);
    eprintln!("256 QPs of one RoCEv2 five-tuple, hash with rdma_bth_dest_qp: {with_qp:?}");
    assert_eq!(with_qp, [64, 64, 64, 64], "with the QP hashed");
    // Kernel counters agree with what left.
    assert_eq!(
        h.member_packets("spines"),
        [64, 64, 64, 64],
        "next-hop counters"
    );

    // The five-tuple alone hashes to member 0:
    // 0a000001 0a040002 11 c001 12b7 000000.
    let without_qp = spread(&mut h, "five-tuple", [10, 4, 0, 2]);
    eprintln!("same packets, hash without rdma_bth_dest_qp: {without_qp:?}");
    assert_eq!(without_qp, [256, 0, 0, 0], "without the QP hashed");
}

#[test]
fn every_reason_has_a_fixture() {
    let all: Vec<Fixture> = [
        fixtures::forwarding::fixtures(),
        fixtures::l4_lengths::fixtures(),
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
