//! Destination classes: one group's routes toward two destinations, each
//! steered by its own row of path qualities, on the real program.

use std::time::Duration;

use fabriclb::dataplane::LoadRow;
use lb_common::packet::roce::WRITE_ONLY;
use lb_common::route::{class_load_index, quality_index};

use crate::flowlet::{roce_packet, udp_packet};
use crate::harness::{Harness, pin_to_one_cpu};
use crate::packets::PEER_MAC;
use crate::switch::LB_MAC;

/// A per-packet group over four next hops with destinations `a` and `b`
/// (and routes to neither), read from one exporter per next hop.
const CONFIG: &str = r#"
[switch]
interfaces = ["lo"]

[[group]]
name = "uplinks"
mode = "per-packet"
telemetry = "remote"
next_hops = [
  { interface = "lo", mac = "02:00:00:00:20:01", telemetry_url = "http://192.0.2.1:9100/metrics", telemetry_device = "own" },
  { interface = "lo", mac = "02:00:00:00:20:02", telemetry_url = "http://192.0.2.2:9100/metrics", telemetry_device = "own" },
  { interface = "lo", mac = "02:00:00:00:20:03", telemetry_url = "http://192.0.2.3:9100/metrics", telemetry_device = "own" },
  { interface = "lo", mac = "02:00:00:00:20:04", telemetry_url = "http://192.0.2.4:9100/metrics", telemetry_device = "own" },
]
destinations = [
  { name = "a", prefixes = ["10.20.0.0/16"], telemetry_device = "toward-a" },
  { name = "b", prefixes = ["10.21.0.0/16"], telemetry_device = "toward-b" },
]

[[route]]
prefix = "10.20.0.0/16"
group = "uplinks"

[[route]]
prefix = "10.21.0.0/16"
group = "uplinks"

[[route]]
prefix = "10.22.0.0/16"
group = "uplinks"
"#;

/// Sprays 64 self-contained packets to `dst`; what each member got.
fn spray(h: &mut Harness, dst: [u8; 4]) -> Vec<u64> {
    let before = member_packets(h);
    for psn in 0..64 {
        let (ip, l4) = roce_packet(dst, WRITE_ONLY, 0x100, psn);
        let (verdict, _) = h.run(&ip.frame(LB_MAC, PEER_MAC, &[], &l4));
        assert_eq!(verdict, lb_common::verdict::XDP_REDIRECT, "to {dst:?}");
    }
    (member_packets(h).iter().zip(before))
        .map(|(after, before)| after - before)
        .collect()
}

fn member_packets(h: &Harness) -> Vec<u64> {
    (h.tables.groups[0].members.iter())
        .map(|&id| h.dp.nexthop_stats(id).expect("stats").packets)
        .collect()
}

/// Destination `a` rates the first next hop 0 (its spine's port toward
/// `a` is congested): `a`'s packets avoid it, while `b`'s and those of
/// the route in no destination spray over all four, as the next hops' own
/// qualities and `b`'s say.
#[test]
fn each_destination_sprays_by_its_own_qualities() {
    pin_to_one_cpu();
    let mut h = Harness::with_config(CONFIG);
    let group = &h.tables.groups[0];
    let classes: Vec<(&str, u32)> = (group.classes.iter())
        .map(|c| (c.name.as_str(), c.id))
        .collect();
    assert_eq!(classes, [("a", 1), ("b", 2)]);
    let first = group.members[0];
    let changes = [(quality_index(1, first), 0)];
    h.tables
        .write_qualities(&mut h.dp, &changes)
        .expect("write qualities");
    let to_a = spray(&mut h, [10, 20, 0, 2]);
    assert_eq!(to_a[0], 0, "{to_a:?}");
    assert!(
        to_a[1..].iter().all(|&n| (21..=22).contains(&n)),
        "{to_a:?}"
    );
    assert_eq!(spray(&mut h, [10, 21, 0, 2]), [16; 4]);
    assert_eq!(spray(&mut h, [10, 22, 0, 2]), [16; 4]);
}

/// [`CONFIG`] in flowlet mode, with a gap of a millisecond; a new
/// flowlet weighs every member.
fn flowlet_config() -> String {
    CONFIG.replace(
        "mode = \"per-packet\"",
        "mode = \"flowlet\"\nflowlet_gap_us = 1000\nflowlet_choice = \"least-cost\"",
    )
}

/// A new flowlet toward a destination weighs what went toward it over
/// each member, not the next hops' loads toward every destination. The
/// other CPUs' flows are said to put a MiB on each of members 1-3 in all
/// and a MiB toward `a` on each of members 0-2: a flow toward `a` takes
/// member 3 at its second flowlet, where the next hops' loads would put
/// it on member 0. What it forwarded counts toward `a` on the member it
/// took, the first flowlet's bytes moved there with it, and nothing
/// toward `b`.
#[test]
fn a_flowlet_toward_a_destination_weighs_the_loads_toward_it() {
    pin_to_one_cpu();
    let mut h = Harness::with_config(&flowlet_config());
    let cpus = aya::util::nr_cpus().expect("CPUs");
    let members = h.tables.groups[0].members.clone();
    let (class_a, class_b) = (1, 2);
    for (slot, &id) in (0..).zip(&members) {
        let (all, toward_a) = match slot {
            0 => (0, 1 << 20),
            3 => (1 << 20, 0),
            _ => (1 << 20, 1 << 20),
        };
        let a = LoadRow::Class(class_load_index(class_a, slot));
        for (row, bytes) in [(LoadRow::Nexthop(id), all), (a, toward_a)] {
            h.dp.set_peer_loads(row, vec![bytes; cpus])
                .expect("set peer loads");
        }
    }
    let (ip, l4) = udp_packet([10, 20, 0, 2], 4000);
    let frame = ip.frame(LB_MAC, PEER_MAC, &[], &l4);
    let mut slots = Vec::new();
    for _ in 0..2 {
        let (verdict, out) = h.run(&frame);
        assert_eq!(verdict, lb_common::verdict::XDP_REDIRECT);
        slots.push(usize::from(out[5] & 0x0f) - 1);
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(slots[1], 3, "flowlets' members {slots:?}");
    let clocks = h.dp.load_clocks().expect("load clocks");
    let toward = |class, slot| {
        let row = LoadRow::Class(class_load_index(class, slot));
        h.dp.recent_loads(row, &clocks).expect("class loads")[0]
    };
    assert_eq!(toward(class_a, 3), 2 * frame.len() as u64);
    for slot in 0..4 {
        assert_eq!(toward(class_b, slot), 0, "toward b on member {slot}");
    }
    // The first flowlet's load moved with the flow.
    for slot in 0..3 {
        assert_eq!(toward(class_a, slot), 0, "toward a on member {slot}");
    }
}

/// [`CONFIG`] in flowlet mode with `weighted` choices and a gap of a
/// millisecond.
fn weighted_config() -> String {
    CONFIG.replace(
        "mode = \"per-packet\"",
        "mode = \"flowlet\"\nflowlet_gap_us = 1000\nflowlet_choice = \"weighted\"",
    )
}

/// The members five flowlets of one flow to `dst` take.
fn flowlet_members(h: &mut Harness, dst: [u8; 4]) -> Vec<usize> {
    let (ip, l4) = udp_packet(dst, 4000);
    let frame = ip.frame(LB_MAC, PEER_MAC, &[], &l4);
    (0..5)
        .map(|_| {
            let (verdict, out) = h.run(&frame);
            assert_eq!(verdict, lb_common::verdict::XDP_REDIRECT, "to {dst:?}");
            std::thread::sleep(Duration::from_millis(5));
            usize::from(out[5] & 0x0f) - 1
        })
        .collect()
}

/// A `weighted` flowlet toward a destination takes its turn in the
/// destination's sequence, wherever the flow is: after its first
/// flowlet, a flow toward `a` takes each of the four equal members in
/// turn. A flow on the route in no destination (the group's own row)
/// stays where it started: no other member is cheaper by the hysteresis
/// margin than the one it has to itself.
#[test]
fn a_weighted_flowlet_toward_a_destination_takes_its_turn() {
    pin_to_one_cpu();
    let mut h = Harness::with_config(&weighted_config());
    let toward_a = flowlet_members(&mut h, [10, 20, 0, 2]);
    let mut turns = toward_a[1..].to_vec();
    turns.sort_unstable();
    assert_eq!(turns, [0, 1, 2, 3], "flowlets' members {toward_a:?}");
    let elsewhere = flowlet_members(&mut h, [10, 22, 0, 2]);
    assert!(
        elsewhere.iter().all(|&m| m == elsewhere[0]),
        "flowlets' members {elsewhere:?}"
    );
}
