//! Flowlet and per-packet modes: flowlets that stay or move, next hops
//! that go down, and which packets are sprayed. Every test pins itself to
//! one CPU (see `Harness::on_one_cpu`).

use lb_common::{
    packet::craft::{Ipv4, tcp, udp},
    packet::parse::{IPPROTO_TCP, IPPROTO_UDP},
    verdict::Reason,
};

use crate::harness::Harness;
use crate::packets::{PEER_MAC, ipv4_to, rocev2_with_psn};
use crate::switch::LB_MAC;

const PAYLOAD: usize = 1000;

/// A UDP packet of flow `src_port` to `dst`, and its L4 bytes.
fn udp_packet(dst: [u8; 4], src_port: u16) -> (Ipv4, Vec<u8>) {
    (
        ipv4_to(dst, IPPROTO_UDP),
        udp(src_port, 9000, &[0x5a; PAYLOAD]),
    )
}

/// A RoCEv2 packet of `opcode` on QP `qp` to `dst`; `psn` tells packets
/// apart in the output.
fn roce_packet(dst: [u8; 4], opcode: u8, qp: u32, psn: u32) -> (Ipv4, Vec<u8>) {
    (ipv4_to(dst, IPPROTO_UDP), rocev2_with_psn(opcode, qp, psn))
}

#[test]
fn flowlet_packets_inside_the_gap_keep_their_next_hop() {
    let mut h = Harness::on_one_cpu();
    let packet = udp_packet([10, 5, 0, 2], 1000);
    let frame = packet.0.frame(LB_MAC, PEER_MAC, &[], &packet.1);
    // A new flow starts where ECMP would put it...
    let first = h.forward("first packet", &packet);
    assert_eq!(first, h.predict("flowlet-sticky", &frame));
    // ...and stays there for the whole flowlet, although every other next
    // hop is idle and its own is the only loaded one.
    for i in 1..40 {
        assert_eq!(h.forward(&format!("packet {i}"), &packet), first);
    }
    let stats = h.group_stats("flowlet-sticky");
    assert_eq!(
        (
            stats.new_flowlets,
            stats.flowlet_moves,
            stats.pinned,
            stats.sprayed
        ),
        (1, 0, 40, 0)
    );
    let per_member = h.member_packets("flowlet-sticky");
    assert_eq!(per_member.iter().sum::<u64>(), 40);
    assert_eq!(
        per_member.iter().filter(|&&p| p == 40).count(),
        1,
        "{per_member:?}"
    );
}

#[test]
fn a_flowlet_after_the_gap_moves_off_a_shared_next_hop() {
    let mut h = Harness::on_one_cpu();
    let dst = [10, 6, 0, 2];
    // Two flows ECMP puts on the same next hop.
    let predict = |h: &Harness, port| {
        let (ip, l4) = udp_packet(dst, port);
        h.predict("flowlet", &ip.frame(LB_MAC, PEER_MAC, &[], &l4))
    };
    let x = 2000u16;
    let shared = predict(&h, x);
    let y = (x + 1..x + 500)
        .find(|&p| predict(&h, p) == shared)
        .expect("a second flow on the same next hop");
    let (fx, fy) = (udp_packet(dst, x), udp_packet(dst, y));
    // 20 packets each, microseconds apart inside the kernel: one flowlet each.
    for (ip, l4) in [&fx, &fy] {
        let (verdict, _) = h.run_repeated(&ip.frame(LB_MAC, PEER_MAC, &[], l4), 20);
        assert_eq!(verdict, Reason::Forwarded.xdp_action());
    }
    let members = h.members("flowlet");
    let shared_slot = members.iter().position(|&id| id == shared).expect("member");
    let mut expected = vec![0; members.len()];
    expected[shared_slot] = 40;
    assert_eq!(h.member_packets("flowlet"), expected);
    let stats = h.group_stats("flowlet");
    assert_eq!((stats.new_flowlets, stats.flowlet_moves), (2, 0));

    // Past the 2 ms gap, x's next flowlet leaves the next hop it shares for
    // the first idle one; y then has its next hop to itself and stays.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let idle = *members
        .iter()
        .find(|&&id| id != shared)
        .expect("idle member");
    assert_eq!(h.forward("x after the gap", &fx), idle);
    assert_eq!(h.forward("y after the gap", &fy), shared);
    // And both keep those inside their new flowlets.
    assert_eq!(h.forward("x again", &fx), idle);
    assert_eq!(h.forward("y again", &fy), shared);
    let stats = h.group_stats("flowlet");
    assert_eq!((stats.new_flowlets, stats.flowlet_moves), (4, 1));
}

#[test]
fn down_next_hops_are_never_chosen() {
    let mut h = Harness::on_one_cpu();
    let members = h.members("per-packet");
    let dst = [10, 7, 0, 2];

    // Per-packet: the spray sequence skips a next hop the daemon took down.
    h.take_down(members[1]);
    for psn in 0..300 {
        h.forward("sprayed", &roce_packet(dst, 0x0a, 0x100, psn));
    }
    assert_eq!(h.member_packets("per-packet"), [100, 0, 100, 100]);

    // A next hop that went down before the daemon rewrote the sequence is
    // still skipped: the least loaded usable one stands in.
    let id = members[2];
    h.dp.set_nexthop(id, h.unusable(id)).expect("set next hop");
    for psn in 300..390 {
        h.forward("sprayed", &roce_packet(dst, 0x0a, 0x100, psn));
    }
    let after = h.member_packets("per-packet");
    assert_eq!((after[1], after[2]), (0, 100), "{after:?}");
    assert_eq!(after.iter().sum::<u64>(), 390);

    // Flowlet: a flow whose next hop goes down moves at once, gap or not.
    let packet = udp_packet([10, 5, 0, 9], 1000);
    let first = h.forward("first", &packet);
    h.take_down(first);
    let moved = h.forward("after its next hop went down", &packet);
    assert_ne!(moved, first);
    assert_eq!(h.forward("next", &packet), moved);
    let stats = h.group_stats("flowlet-sticky");
    assert_eq!((stats.new_flowlets, stats.flowlet_moves), (2, 1));
}

#[test]
fn only_self_contained_packets_are_sprayed() {
    use lb_common::packet::roce::*;
    let mut h = Harness::on_one_cpu();
    // One QP: a multi-packet WRITE with single-packet messages between its
    // packets, as a NIC interleaves a QP's work requests.
    let mut sequence = vec![WRITE_FIRST];
    sequence.extend([WRITE_MIDDLE; 6]);
    sequence.push(WRITE_LAST);
    let only = [WRITE_ONLY, SEND_ONLY, WRITE_ONLY_IMM, ACKNOWLEDGE];
    let packets: Vec<u8> = sequence
        .iter()
        .zip(only.iter().cycle())
        .flat_map(|(&ordered, &single)| [ordered, single])
        .collect();

    for (group, dst) in [("per-packet", [10, 7, 0, 3]), ("spray-all", [10, 8, 0, 3])] {
        let members = h.members(group);
        let mut ordered_to = Vec::new();
        let mut single_to = vec![0u64; members.len()];
        for (psn, &opcode) in (0u32..).zip(&packets) {
            let id = h.forward(
                &format!("{group} opcode {opcode:#x}"),
                &roce_packet(dst, opcode, 0x200, psn),
            );
            let slot = members.iter().position(|&m| m == id).expect("member");
            if self_contained(opcode) {
                single_to[slot] += 1;
            } else {
                ordered_to.push(slot);
            }
        }
        let stats = h.group_stats(group);
        eprintln!(
            "{group}: FIRST/MIDDLE/LAST went to slots {ordered_to:?}, ONLY/ACK to {single_to:?}"
        );
        if group == "per-packet" {
            // ONLY and ACK packets spread evenly; the message's own
            // packets all stay on one next hop.
            assert_eq!(single_to, [2, 2, 2, 2]);
            assert!(
                ordered_to.iter().all(|&s| s == ordered_to[0]),
                "{ordered_to:?}"
            );
            assert_eq!((stats.sprayed, stats.pinned), (8, 8));
        } else {
            // Everything is sprayed, the message's packets too.
            let mut all = single_to.clone();
            for &slot in &ordered_to {
                all[slot] += 1;
            }
            assert_eq!(all, [4, 4, 4, 4]);
            assert!(
                ordered_to.iter().any(|&s| s != ordered_to[0]),
                "{ordered_to:?}"
            );
            assert_eq!((stats.sprayed, stats.pinned), (16, 0));
        }
    }

    // Non-RoCE traffic in a per-packet group follows flowlets.
    let tcp_packet = (ipv4_to([10, 7, 0, 4], IPPROTO_TCP), tcp(40000, 443));
    let first = h.forward("tcp", &tcp_packet);
    for _ in 0..7 {
        assert_eq!(h.forward("tcp", &tcp_packet), first);
    }
    assert_eq!(h.group_stats("per-packet").pinned, 16);
}
