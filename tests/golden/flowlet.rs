//! Flowlet and per-packet modes: flowlets that stay or move, next hops
//! whose usable flag is cleared, and which packets are sprayed. Every test
//! pins itself to one CPU (see `Harness::on_one_cpu`). Members are named
//! by slot; where ECMP places a flow, the slot is pinned in [`pins`].

use std::time::Duration;

use lb_common::{
    abi::events::{CAUSE_FAILOVER, EVENT_MOVE, EventConfig, PathSeen},
    limits::NO_NEXTHOP,
    packet::craft::{Ipv4, tcp, udp},
    packet::parse::{FlowFields, IPPROTO_TCP, IPPROTO_UDP},
    select::flowlet::PATH_QUALITY_DEFAULT,
    verdict::Reason,
};

use crate::harness::{Harness, pin_to_cpu};
use crate::packets::{PEER_MAC, ipv4_to, rocev2_with_psn};
use crate::pins::Pin;
use crate::switch::{LB_MAC, SHORT_GAP_MS};

const PAYLOAD: usize = 1000;

/// A UDP packet of flow `src_port` to `dst`, and its L4 bytes.
pub fn udp_packet(dst: [u8; 4], src_port: u16) -> (Ipv4, Vec<u8>) {
    (
        ipv4_to(dst, IPPROTO_UDP),
        udp(src_port, 9000, &[0x5a; PAYLOAD]),
    )
}

/// A RoCEv2 packet of `opcode` on QP `qp` to `dst`; `psn` tells packets
/// apart in the output.
pub fn roce_packet(dst: [u8; 4], opcode: u8, qp: u32, psn: u32) -> (Ipv4, Vec<u8>) {
    (ipv4_to(dst, IPPROTO_UDP), rocev2_with_psn(opcode, qp, psn))
}

/// The flow `flowlet_packets_inside_the_gap_keep_their_next_hop` sends,
/// and the slot ECMP gives it.
const STICKY: ([u8; 4], u16, usize) = ([10, 5, 0, 2], 1000, 0);
/// Two flows ECMP puts on one next hop of the "flowlet" group.
pub const SHARED: ([u8; 4], [u16; 2], usize) = ([10, 6, 0, 2], [2000, 2007], 2);
/// The flow whose next hop goes down, and the slot ECMP gives it.
const GOES_DOWN: ([u8; 4], u16, usize) = ([10, 5, 0, 9], 1000, 1);

/// Where ECMP places this file's flows, with their hash inputs written out
/// (destination port 9000 is 0x2328).
pub fn pins() -> Vec<Pin> {
    let pin = |what: &str, group, (dst, port): ([u8; 4], u16), hash: &str, member| {
        let (ip, l4) = udp_packet(dst, port);
        Pin::new(
            what,
            group,
            ip.frame(LB_MAC, PEER_MAC, &[], &l4),
            hash,
            member,
        )
    };
    let (sticky_dst, sticky_port, sticky) = STICKY;
    let (shared_dst, [x, y], shared) = SHARED;
    let (down_dst, down_port, down) = GOES_DOWN;
    vec![
        pin(
            "sticky flow",
            "flowlet-sticky",
            (sticky_dst, sticky_port),
            "0a000001 0a050002 11 03e8 2328 000000",
            sticky,
        ),
        pin(
            "flow x",
            "flowlet",
            (shared_dst, x),
            "0a000001 0a060002 11 07d0 2328 000000",
            shared,
        ),
        pin(
            "flow y",
            "flowlet",
            (shared_dst, y),
            "0a000001 0a060002 11 07d7 2328 000000",
            shared,
        ),
        pin(
            "flow that goes down",
            "flowlet-sticky",
            (down_dst, down_port),
            "0a000001 0a050009 11 03e8 2328 000000",
            down,
        ),
    ]
}

/// New flowlets and flowlet moves `group` counted.
pub fn flowlets(h: &Harness, group: &str) -> (u64, u64) {
    let stats = h.group_stats(group);
    (stats.new_flowlets, stats.flowlet_moves)
}

#[test]
fn flowlet_packets_inside_the_gap_keep_their_next_hop() {
    let mut h = Harness::on_one_cpu();
    let (dst, port, ecmp) = STICKY;
    let packet = udp_packet(dst, port);
    let group = "flowlet-sticky";
    // A new flow starts where ECMP would put it...
    assert_eq!(
        h.forward(group, "first packet", &packet),
        ecmp,
        "first packet"
    );
    // ...and stays there for the whole flowlet (a second's gap), although
    // every other next hop is idle and its own is the only loaded one.
    for i in 1..40 {
        assert_eq!(
            h.forward(group, &format!("packet {i}"), &packet),
            ecmp,
            "packet {i}"
        );
    }
    let stats = h.group_stats(group);
    assert_eq!(
        (
            stats.new_flowlets,
            stats.flowlet_moves,
            stats.pinned,
            stats.sprayed
        ),
        (1, 0, 40, 0),
        "new flowlets, moves, pinned, sprayed"
    );
    let mut expected = vec![0; 4];
    expected[ecmp] = 40;
    assert_eq!(h.member_packets(group), expected, "packets per member");
}

/// Flowlet state lives in an array indexed by flow hash and group, so a
/// flow of another group can land on a live flowlet's entry: it must go
/// where a first flowlet goes and leave the entry alone. Overwriting it
/// would make the owner's next packet start over (a new flowlet, mid-burst).
#[test]
fn a_flow_of_another_group_leaves_a_live_flowlets_entry_alone() {
    let mut h = Harness::on_one_cpu();
    let (owner, guest) = ("flowlet-sticky", "per-packet");
    let (dst, port, ecmp) = STICKY;
    let own = udp_packet(dst, port);
    let frame = |(ip, l4): &(Ipv4, Vec<u8>)| ip.frame(LB_MAC, PEER_MAC, &[], l4);
    let index = h.flowlet_index(owner, &frame(&own));
    // A UDP flow of the per-packet group (never sprayed: not RoCE) that
    // hashes onto the same entry.
    let other = (0..=u16::MAX)
        .flat_map(|host| [1000u16, 2000, 3000].map(|port| (host, port)))
        .map(|(host, port)| udp_packet([10, 7, (host >> 8) as u8, host as u8], port))
        .find(|p| h.flowlet_index(guest, &frame(p)) == index)
        .expect("a flow of the other group on the same entry");

    assert_eq!(h.forward(owner, "owner starts", &own), ecmp);
    let held = h.flowlet_entry(index);
    assert_eq!(held.generation, h.group_entry(owner).generation);
    // Within the owner's one-second gap.
    let guest_slot = h.forward(guest, "guest", &other);
    assert_eq!(
        h.flowlet_entry(index),
        held,
        "the owner's entry is untouched"
    );
    let stats = h.group_stats(guest);
    assert_eq!(
        (stats.new_flowlets, stats.pinned),
        (0, 1),
        "the guest: no flowlet of its own, pinned"
    );
    assert_eq!(
        h.forward(guest, "guest again", &other),
        guest_slot,
        "placed alike each time"
    );
    assert_eq!(h.forward(owner, "owner goes on", &own), ecmp);
    assert_eq!(flowlets(&h, owner), (1, 0), "the owner's flowlet goes on");
}

#[test]
fn a_flowlet_after_the_gap_moves_off_a_shared_next_hop() {
    let mut h = Harness::on_one_cpu();
    let group = "flowlet";
    let (_, _, shared) = SHARED;
    let [fx, fy] = split_shared(&mut h);
    // And both keep those inside their new flowlets: four test runs take
    // a few milliseconds of the gap.
    assert_eq!(h.forward(group, "x again", &fx), SPLIT_X, "x again");
    assert_eq!(h.forward(group, "y again", &fy), shared, "y again");
    assert_eq!(flowlets(&h, group), (4, 1), "new flowlets, moves");
}

/// A CPU weighs what the daemon says the other CPUs' flows put on each
/// next hop: with their load on slots 0 and 1, idle here, x's next
/// flowlet takes slot 3, the one idle everywhere, and no longer the first
/// idle one here.
#[test]
fn a_flowlet_weighs_the_loads_other_cpus_put_on_each_next_hop() {
    let mut h = Harness::on_one_cpu();
    let group = "flowlet";
    let (_, _, shared) = SHARED;
    let [fx, fy] = share_one_next_hop(&mut h);
    // Each flow's 20 packets here weigh 20 * 1042 bytes; the others' flows
    // a MiB on each of slots 0 and 1.
    h.set_peer_load(group, 0, 1 << 20);
    h.set_peer_load(group, 1, 1 << 20);
    std::thread::sleep(Duration::from_millis(5 * u64::from(SHORT_GAP_MS)));
    assert_eq!(h.forward(group, "x after the gap", &fx), 3, "x");
    assert_eq!(h.forward(group, "y after the gap", &fy), shared, "y");
    assert_eq!(flowlets(&h, group), (4, 1), "new flowlets, moves");
}

/// The slot flow x of [`SHARED`] moves to in [`split_shared`]: the first
/// idle one.
pub const SPLIT_X: usize = 0;

/// Sends [`SHARED`]'s two flows in the "flowlet" group, one flowlet each
/// on their shared next hop, then after the gap one packet each: x moves
/// to [`SPLIT_X`], y stays. Returns their packets.
pub fn split_shared(h: &mut Harness) -> [(Ipv4, Vec<u8>); 2] {
    let group = "flowlet";
    let (_, _, shared) = SHARED;
    let [fx, fy] = share_one_next_hop(h);
    // Well past the gap, x's next flowlet leaves the next hop it shares for
    // the first idle one; y then has its next hop to itself and stays.
    std::thread::sleep(Duration::from_millis(5 * u64::from(SHORT_GAP_MS)));
    assert_eq!(
        h.forward(group, "x after the gap", &fx),
        SPLIT_X,
        "x after the gap"
    );
    assert_eq!(
        h.forward(group, "y after the gap", &fy),
        shared,
        "y after the gap"
    );
    [fx, fy]
}

/// Sends [`SHARED`]'s two flows in the "flowlet" group, 20 packets each,
/// microseconds apart inside the kernel: one flowlet each, both on their
/// shared next hop. Returns their packets.
fn share_one_next_hop(h: &mut Harness) -> [(Ipv4, Vec<u8>); 2] {
    let group = "flowlet";
    let (dst, [x, y], shared) = SHARED;
    let (fx, fy) = (udp_packet(dst, x), udp_packet(dst, y));
    for (ip, l4) in [&fx, &fy] {
        let (verdict, _) = h.run_repeated(&ip.frame(LB_MAC, PEER_MAC, &[], l4), 20);
        assert_eq!(verdict, Reason::Forwarded.xdp_action());
    }
    let mut expected = vec![0; 4];
    expected[shared] = 40;
    assert_eq!(h.member_packets(group), expected, "packets per member");
    assert_eq!(flowlets(h, group), (2, 0), "new flowlets, moves");
    [fx, fy]
}

/// Every CPU's spray cursors start at 0, and each CPU's draws are turned
/// ahead by its share of the members (`cpu_turn`): over four equal next
/// hops CPU 1 starts two entries on, so two CPUs spraying at one pace
/// take each member once in a round, where unturned both took the first
/// two.
#[test]
fn two_cpus_spraying_at_one_pace_take_each_member_once() {
    let mut h = Harness::new();
    let dst = [10, 7, 0, 2];
    let group = "per-packet";
    let mut slots = Vec::new();
    for cpu in [0, 1] {
        pin_to_cpu(cpu);
        for psn in 0..2 {
            let packet = roce_packet(dst, 0x0a, 0x100, psn);
            slots.push(h.forward(group, &format!("CPU {cpu}, packet {psn}"), &packet));
        }
    }
    assert_eq!(slots, [0, 1, 2, 3], "slots taken by CPU 0, then CPU 1");
}

/// What the data plane does on its own when a next hop's usable flag is
/// cleared before anything rewrote the buckets and spray sequences that
/// name it (the daemon's rewrite on a real link loss is the netns tests'
/// business).
#[test]
fn next_hops_whose_usable_flag_is_cleared_are_never_chosen() {
    let mut h = Harness::on_one_cpu();
    let dst = [10, 7, 0, 2];
    let group = "per-packet";

    // Per-packet: the spray sequence still names slot 1 every fourth
    // packet; the least loaded usable next hop stands in for it.
    h.clear_usable(group, 1);
    for psn in 0..300 {
        h.forward(group, "sprayed", &roce_packet(dst, 0x0a, 0x100, psn));
    }
    assert_eq!(h.member_packets(group), [100, 0, 100, 100], "slot 1 down");
    h.clear_usable(group, 2);
    for psn in 300..390 {
        h.forward(group, "sprayed", &roce_packet(dst, 0x0a, 0x100, psn));
    }
    assert_eq!(
        h.member_packets(group),
        [145, 0, 100, 145],
        "slots 1 and 2 down"
    );

    // Flowlet: a flow whose next hop goes down moves at once, gap or not,
    // to the least loaded usable one, and stays there.
    let group = "flowlet-sticky";
    let (dst, port, first) = GOES_DOWN;
    let packet = udp_packet(dst, port);
    assert_eq!(h.forward(group, "first", &packet), first, "first");
    h.clear_usable(group, first);
    let moved = 0;
    assert_eq!(
        h.forward(group, "after its next hop went down", &packet),
        moved,
        "after its next hop went down"
    );
    assert_eq!(h.forward(group, "next", &packet), moved, "next");
    assert_eq!(flowlets(&h, group), (2, 1), "new flowlets, moves");

    // ECMP: a packet whose bucket names a next hop that is down goes to
    // the kernel as it came.
    let (ip, l4) = (Ipv4::new(IPPROTO_UDP), udp(1234, 5678, b"payload"));
    let frame = ip.frame(LB_MAC, PEER_MAC, &[], &l4);
    assert_eq!(h.forward("spines", "before", &(ip, l4)), 1, "before");
    h.clear_usable("spines", 1);
    let (verdict, out) = h.run(&frame);
    assert_eq!(
        verdict,
        Reason::NoNextHop.xdp_action(),
        "ECMP to a next hop that is down"
    );
    assert_eq!(out, frame, "ECMP to a next hop that is down");
}

/// The failover above, reported: one event whose every field is what the
/// packet, the tables and the loads say; a first flowlet and the packets
/// after the move report nothing; with a budget of one event a window, a
/// second move in the window is counted, not sent.
#[test]
fn a_flow_failing_over_reports_one_event_with_what_the_choice_saw() {
    let mut h = Harness::on_one_cpu();
    let mut ring = h.flow_events(EventConfig::new(10, 1));
    let group = "flowlet-sticky";
    let (dst, port, first) = GOES_DOWN;
    let packet = udp_packet(dst, port);
    assert_eq!(h.forward(group, "first", &packet), first, "first");
    assert_eq!(
        Harness::events_in(&mut ring),
        [],
        "a first flowlet moves nothing"
    );
    h.clear_usable(group, first);
    let moved = h.forward(group, "after its next hop went down", &packet);
    h.forward(group, "next", &packet);
    let events = Harness::events_in(&mut ring);
    let [event] = events.as_slice() else {
        panic!("one event: {events:#?}")
    };
    let frame_bytes = packet.0.frame(LB_MAC, PEER_MAC, &[], &packet.1).len() as u64;
    let mut flow = FlowFields {
        src_port: port,
        dst_port: 9000,
        protocol: IPPROTO_UDP,
        ..FlowFields::default()
    };
    flow.src[..4].copy_from_slice(&packet.0.src);
    flow.dst[..4].copy_from_slice(&dst);
    assert_eq!(
        (
            event.kind,
            event.cause,
            event.group,
            event.class,
            event.override_index
        ),
        (EVENT_MOVE, CAUSE_FAILOVER, h.group_id(group), 0, NO_NEXTHOP)
    );
    assert_eq!(event.flow, flow);
    // Read at the verdict: the flow's own load has moved with it, and the
    // moving packet counted where it went.
    assert_eq!(
        (event.from, event.to),
        (
            PathSeen {
                nh_id: h.id(group, first),
                quality: PATH_QUALITY_DEFAULT,
                load: 0,
            },
            PathSeen {
                nh_id: h.id(group, moved),
                quality: PATH_QUALITY_DEFAULT,
                load: 2 * frame_bytes,
            }
        )
    );
    assert!(event.gap_ns < 1_000_000_000, "{event:#?}");

    h.restore_usable(group, first);
    h.clear_usable(group, moved);
    assert_eq!(h.forward(group, "back", &packet), first, "back");
    assert_eq!(
        Harness::events_in(&mut ring),
        [],
        "over the window's budget"
    );
    let totals = h.dp.event_totals().expect("budgets");
    assert_eq!(
        (totals.sent, totals.over_budget, totals.ring_full),
        (1, 1, 0)
    );
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
        let mut ordered_to = Vec::new();
        let mut single_to = vec![0u64; 4];
        for (psn, &opcode) in (0u32..).zip(&packets) {
            let slot = h.forward(
                group,
                &format!("{group} opcode {opcode:#x}"),
                &roce_packet(dst, opcode, 0x200, psn),
            );
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
            assert_eq!(single_to, [2, 2, 2, 2], "ONLY/ACK per member");
            assert!(
                ordered_to.iter().all(|&s| s == ordered_to[0]),
                "{ordered_to:?}"
            );
            assert_eq!((stats.sprayed, stats.pinned), (8, 8), "sprayed, pinned");
        } else {
            // Everything is sprayed, the message's packets too.
            let mut all = single_to.clone();
            for &slot in &ordered_to {
                all[slot] += 1;
            }
            assert_eq!(all, [4, 4, 4, 4], "packets per member");
            assert!(
                ordered_to.iter().any(|&s| s != ordered_to[0]),
                "{ordered_to:?}"
            );
            assert_eq!((stats.sprayed, stats.pinned), (16, 0), "sprayed, pinned");
        }
    }

    // Non-RoCE traffic in a per-packet group follows flowlets.
    let tcp_packet = (ipv4_to([10, 7, 0, 4], IPPROTO_TCP), tcp(40000, 443));
    let first = h.forward("per-packet", "tcp", &tcp_packet);
    for _ in 0..7 {
        assert_eq!(h.forward("per-packet", "tcp", &tcp_packet), first);
    }
    assert_eq!(h.group_stats("per-packet").pinned, 16);
}

/// `fabriclb_flowlet_table_entries` is estimated from 1024 entries spread
/// over the table: with 20000 flows in the default 65536 entries, within a
/// tenth of the full count `fabriclb status` makes.
#[test]
fn the_flowlet_table_occupancy_estimate_is_near_the_full_count() {
    let mut h = Harness::on_one_cpu();
    for flow in 0..20_000u16 {
        let (ip, l4) = udp_packet(STICKY.0, flow);
        let (verdict, _) = h.run(&ip.frame(LB_MAC, PEER_MAC, &[], &l4));
        assert_eq!(verdict, Reason::Forwarded.xdp_action(), "flow {flow}");
    }
    let capacity = h.dp.maps.flowlet_capacity().expect("capacity");
    let generations: Vec<u32> = (h.tables.groups.iter())
        .map(|g| g.entry.generation)
        .collect();
    let full = (h.dp.maps.flowlets.iter())
        .map(|states| states.expect("flowlet entry"))
        .filter(|states| states.iter().any(|s| generations.contains(&s.generation)))
        .count() as u64;
    let estimate = (h.dp)
        .flowlet_entries_estimate(capacity, &generations)
        .expect("estimate");
    eprintln!("20000 flows: {full} entries held, {estimate} estimated");
    // At most one entry a flow (a collision shares one).
    assert!((16_000..=20_000).contains(&full), "{full}");
    assert!(
        estimate.abs_diff(full) * 10 <= full,
        "{estimate} for {full}"
    );
}
