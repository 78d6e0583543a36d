//! Destination classes: one group's routes toward two destinations, each
//! steered by its own row of path qualities, on the real program.

use lb_common::packet::roce::WRITE_ONLY;
use lb_common::route::quality_index;

use crate::flowlet::roce_packet;
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
