//! A group switched from flowlet or per-packet mode back to ECMP drains:
//! a busy flow keeps its flowlet's next hop until it pauses longer than
//! the gap, then takes its ECMP one; hashing it there at once could
//! overtake its own packets. One pinned CPU, gaps of 200 ms and 1 s.

use std::time::Duration;

use fabriclb::inspect::explain::{Dynamic, explain};
use fabriclb::inspect::maps::MapSet;
use lb_common::packet::craft::Ipv4;
use lb_common::packet::roce::{WRITE_FIRST, WRITE_LAST, WRITE_MIDDLE, WRITE_ONLY};
use lb_common::select::flowlet::{MODE_ECMP, MODE_FLOWLET, MODE_PER_PACKET};

use crate::explain::now_ns;
use crate::flowlet::{SHARED, SPLIT_X, flowlets, roce_packet, split_shared};
use crate::harness::{Harness, LOOPBACK};
use crate::packets::PEER_MAC;
use crate::pins::Pin;
use crate::switch::{self, GAP_ONE_SECOND_US, Group, LB_MAC, SHORT_GAP_MS};

const ECMP: &[&str] = &[r#"mode = "ecmp""#];

/// A RoCEv2 flow (QP 0x300) of the "per-packet" group, and the slot ECMP
/// gives it.
const MESSAGE: ([u8; 4], u32, usize) = ([10, 7, 0, 5], 0x300, 3);

pub fn pins() -> Vec<Pin> {
    let (dst, qp, ecmp) = MESSAGE;
    let (ip, l4) = roce_packet(dst, WRITE_FIRST, qp, 0);
    vec![Pin::new(
        "draining message",
        "per-packet",
        ip.frame(LB_MAC, PEER_MAC, &[], &l4),
        // src | dst | UDP | 0xc001 -> 4791 | QP
        "0a000001 0a070005 11 c001 12b7 000300",
        ecmp,
    )]
}

/// [`Harness::forward`], after `explain` said where the packet goes, from
/// the maps as they are: the same slot, through a draining flowlet or not
/// (`draining_flowlet`).
fn forward(
    h: &mut Harness,
    group: &str,
    name: &str,
    packet: &(Ipv4, Vec<u8>),
    draining_flowlet: bool,
) -> usize {
    let info = h.dp.program().expect("program").info().expect("info");
    let maps = MapSet::from_program(&info).expect("the program's maps");
    let (ip, l4) = packet;
    let frame = ip.frame(LB_MAC, PEER_MAC, &[], l4);
    let e = explain(&maps, &frame, LOOPBACK, Some(0), now_ns()).expect("explain");
    let kind = e.dynamic.as_ref().map(|d| &d.kind);
    assert_eq!(
        matches!(kind, Some(Dynamic::Flowlet { draining: true, .. })),
        draining_flowlet,
        "{name}: explained as {kind:?}"
    );
    let (_, nh) = e.next_hop.expect("explain's next hop");
    let explained = switch::group(group).slot_of(&nh.dst_mac).expect("a member");
    let slot = h.forward(group, name, packet);
    assert_eq!(explained, slot, "{name}: explained slot");
    slot
}

/// The switch config with `group` in ECMP mode, its gap kept.
fn to_ecmp(group: &str) -> String {
    let changed = Group {
        settings: ECMP,
        ..*switch::group(group)
    };
    switch::config_with(&[changed])
}

#[test]
fn a_busy_flow_keeps_its_flowlet_after_a_switch_to_ecmp_until_it_pauses() {
    let mut h = Harness::on_one_cpu();
    let group = "flowlet";
    let (_, _, shared) = SHARED;
    // x on the next hop its last flowlet chose, not its ECMP one.
    let [fx, fy] = split_shared(&mut h);
    assert_ne!(SPLIT_X, shared);

    h.reload(&to_ecmp(group));
    let entry = h.group_entry(group);
    assert_eq!(
        (entry.mode, entry.draining),
        (MODE_ECMP, MODE_FLOWLET),
        "mode, draining"
    );
    // Busy: x stays inside its flowlet although ECMP hashes it elsewhere.
    for i in 0..10 {
        let name = format!("x busy {i}");
        assert_eq!(forward(&mut h, group, &name, &fx, true), SPLIT_X, "{name}");
    }
    assert_eq!(
        forward(&mut h, group, "y busy", &fy, true),
        shared,
        "y busy"
    );
    // After a pause longer than the gap, x's next flowlet takes its ECMP
    // next hop, and stays there.
    std::thread::sleep(Duration::from_millis(5 * u64::from(SHORT_GAP_MS)));
    for i in 0..3 {
        let name = format!("x after the pause {i}");
        assert_eq!(forward(&mut h, group, &name, &fx, true), shared, "{name}");
    }
    assert_eq!(flowlets(&h, group), (5, 2), "new flowlets, moves");

    // The daemon ends the drain: plain ECMP, no flowlet state read.
    assert_eq!(h.end_drains(), [group]);
    assert_eq!(h.group_entry(group).draining, MODE_ECMP, "draining");
    assert_eq!(forward(&mut h, group, "x drained", &fx, false), shared);
    assert_eq!(forward(&mut h, group, "y drained", &fy, false), shared);
    assert_eq!(flowlets(&h, group), (5, 2), "new flowlets, moves");
    let mut expected = vec![0; 4];
    expected[SPLIT_X] = 11;
    expected[shared] = 40 + 1 + 1 + 3 + 2;
    assert_eq!(h.member_packets(group), expected, "packets per member");
}

/// Per-packet -> ECMP: the multi-packet message in flight finishes on its
/// flowlet; single-packet messages, which per-packet mode sprayed, take
/// their ECMP next hop at once; after a pause the flow is ECMP's.
#[test]
fn a_message_in_flight_finishes_on_its_flowlet_after_a_switch_from_per_packet() {
    let mut h = Harness::on_one_cpu();
    let group = "per-packet";
    let (dst, qp, ecmp) = MESSAGE;
    let packet = |opcode, psn| roce_packet(dst, opcode, qp, psn);
    // The message starts on its ECMP next hop; that one goes down for a
    // moment, so the message moves to the first idle one and comes back
    // up: the flowlet is now off ECMP's next hop.
    assert_eq!(h.forward(group, "FIRST", &packet(WRITE_FIRST, 0)), ecmp);
    h.clear_usable(group, ecmp);
    let flowlet = usize::from(ecmp == 0);
    let middle = h.forward(group, "MIDDLE 1", &packet(WRITE_MIDDLE, 1));
    assert_eq!(middle, flowlet, "MIDDLE 1");
    h.restore_usable(group, ecmp);

    h.reload(&to_ecmp(group));
    assert_eq!(h.group_entry(group).draining, MODE_PER_PACKET, "draining");
    // The rest of the message stays; a single-packet message between its
    // packets is not held to it.
    let sent = [
        ("MIDDLE 2", WRITE_MIDDLE, flowlet, true),
        ("ONLY", WRITE_ONLY, ecmp, false),
        ("MIDDLE 3", WRITE_MIDDLE, flowlet, true),
        ("LAST", WRITE_LAST, flowlet, true),
    ];
    for (psn, (name, opcode, slot, drains)) in (2..).zip(sent) {
        let taken = forward(&mut h, group, name, &packet(opcode, psn), drains);
        assert_eq!(taken, slot, "{name}");
    }
    // The next message, after a pause longer than the gap: ECMP's.
    let gap = Duration::from_micros(u64::from(GAP_ONE_SECOND_US));
    std::thread::sleep(gap + Duration::from_millis(200));
    let next = [WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST];
    for (psn, opcode) in (6..).zip(next) {
        let name = format!("next message {opcode:#x}");
        assert_eq!(
            forward(&mut h, group, &name, &packet(opcode, psn), true),
            ecmp,
            "{name}"
        );
    }
    let stats = h.group_stats(group);
    assert_eq!(stats.sprayed, 0, "sprayed");
    let mut expected = vec![0; 4];
    expected[ecmp] = 1 + 1 + 3;
    expected[flowlet] = 1 + 3;
    assert_eq!(h.member_packets(group), expected, "packets per member");
}

/// Back to a flowlet mode while a drain is under way: the flowlet state
/// the drain kept current stays, so a busy flow on its ECMP next hop is
/// not moved mid-burst, nor one still on its old flowlet.
#[test]
fn a_group_back_to_flowlet_during_a_drain_moves_no_busy_flow() {
    let mut h = Harness::on_one_cpu();
    let group = "flowlet";
    let (_, _, shared) = SHARED;
    let [fx, fy] = split_shared(&mut h);
    let generation = h.group_entry(group).generation;
    h.reload(&to_ecmp(group));
    assert_eq!(h.forward(group, "x draining", &fx), SPLIT_X, "x draining");
    h.reload(&switch::config());
    let entry = h.group_entry(group);
    assert_eq!(
        (entry.mode, entry.draining, entry.generation),
        (MODE_FLOWLET, MODE_ECMP, generation),
        "mode, draining, generation"
    );
    assert_eq!(h.forward(group, "x back", &fx), SPLIT_X, "x back");
    assert_eq!(h.forward(group, "y back", &fy), shared, "y back");
}
