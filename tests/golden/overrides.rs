//! Traffic-engineering overrides through the program: the most specific
//! matching override pins a packet to its next hop (a QP before none, the
//! longer destination, the longer source, an ingress interface); no match
//! leaves the group's own choice; an unusable pinned next hop falls back
//! to it, counted; each override counts its packets and bytes.

use lb_common::{
    packet::craft::{Ipv4, bth, udp},
    packet::parse::{IPPROTO_UDP, ROCEV2_UDP_PORT},
    packet::roce::WRITE_ONLY,
    select::flowlet::MODE_ECMP,
    select::overrides::override_index,
    verdict::XDP_REDIRECT,
};

use fabriclb::inspect::explain::explain;
use fabriclb::inspect::maps::MapSet;

use crate::explain::now_ns;
use crate::harness::{Harness, LOOPBACK, pin_to_one_cpu};
use crate::packets::PEER_MAC;
use crate::switch::LB_MAC;

/// Group `fabric` (ECMP) over four next hops `02:00:00:00:71:0N`, group
/// `dyn` (flowlet) over two `02:00:00:00:72:0N`, and their overrides.
const CONFIG: &str = r#"
[switch]
interfaces = ["lo"]

[[group]]
name = "fabric"
flowlet_gap_us = 1000000
next_hops = [
  { interface = "lo", mac = "02:00:00:00:71:01" },
  { interface = "lo", mac = "02:00:00:00:71:02" },
  { interface = "lo", mac = "02:00:00:00:71:03" },
  { interface = "lo", mac = "02:00:00:00:71:04" },
]

[[group]]
name = "dyn"
mode = "flowlet"
next_hops = [
  { interface = "lo", mac = "02:00:00:00:72:01" },
  { interface = "lo", mac = "02:00:00:00:72:02" },
]

[[route]]
prefix = "198.19.0.0/16"
group = "fabric"

[[route]]
prefix = "198.20.0.0/16"
group = "dyn"

[[override]]
name = "all"
dst = "198.19.0.0/16"
next_hop = { interface = "lo", mac = "02:00:00:00:71:03" }

[[override]]
name = "from-racks"
dst = "198.19.1.0/24"
src = "198.18.0.0/16"
next_hop = { interface = "lo", mac = "02:00:00:00:71:02" }

[[override]]
name = "qp"
dst = "198.19.0.0/16"
dest_qp = 0x42
next_hop = { interface = "lo", mac = "02:00:00:00:71:04" }

[[override]]
name = "on-lo"
dst = "198.19.2.0/24"
ingress = "lo"
next_hop = { interface = "lo", mac = "02:00:00:00:71:01" }

[[override]]
name = "dyn"
dst = "198.20.0.0/16"
next_hop = { interface = "lo", mac = "02:00:00:00:72:02" }
"#;

fn to(src: [u8; 4], dst: [u8; 4], l4: &[u8]) -> Vec<u8> {
    let ip = Ipv4 {
        src,
        dst,
        ..Ipv4::new(IPPROTO_UDP)
    };
    ip.frame(LB_MAC, PEER_MAC, &[], l4)
}

fn udp_to(src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
    to(src, dst, &udp(40000, 9000, &[0xab; 64]))
}

fn roce_to(src: [u8; 4], dst: [u8; 4], qp: u32) -> Vec<u8> {
    let bth = bth(WRITE_ONLY, qp, 1, &[0xab; 64]);
    to(src, dst, &udp(0xc001, ROCEV2_UDP_PORT, &bth))
}

/// The next hop's MAC the program sent `frame` to, which `explain`, asked
/// first, names too.
fn sent_to(harness: &mut Harness, frame: &[u8]) -> String {
    let info = harness.dp.program().expect("program").info().expect("info");
    let maps = MapSet::from_program(&info).expect("the program's maps");
    let e = explain(&maps, frame, LOOPBACK, Some(0), now_ns()).expect("explain");
    let (verdict, out) = harness.run(frame);
    assert_eq!(verdict, XDP_REDIRECT);
    let mac: Vec<String> = out[..6].iter().map(|b| format!("{b:02x}")).collect();
    let (_, nh) = e.next_hop.expect("explained to a next hop");
    assert_eq!(nh.dst_mac, out[..6], "explain: {e:?}");
    mac.join(":")
}

/// Override `name`'s packets and fallbacks.
fn counted(harness: &Harness, name: &str) -> (u64, u64) {
    let group = harness
        .tables
        .groups
        .iter()
        .find(|g| g.overrides.iter().any(|(n, _)| n == name))
        .expect("an override of that name");
    let i = group
        .overrides
        .iter()
        .position(|(n, _)| n == name)
        .expect("in it");
    let index = override_index(group.id, group.entry.override_half, i as u32);
    let stats = harness.dp.override_stats(index).expect("stats");
    (stats.packets, stats.fallbacks)
}

#[test]
fn the_most_specific_override_pins_and_an_unusable_one_falls_back_counted() {
    let mut harness = Harness::with_config(CONFIG);
    let rack = [198, 18, 0, 1];
    assert_eq!(
        sent_to(&mut harness, &udp_to(rack, [198, 19, 5, 5])),
        "02:00:00:00:71:03"
    );
    assert_eq!(
        sent_to(&mut harness, &udp_to(rack, [198, 19, 1, 5])),
        "02:00:00:00:71:02"
    );
    let elsewhere = [10, 0, 0, 1];
    assert_eq!(
        sent_to(&mut harness, &udp_to(elsewhere, [198, 19, 1, 5])),
        "02:00:00:00:71:03",
        "the /24 wants a source in 198.18/16"
    );
    assert_eq!(
        sent_to(&mut harness, &roce_to(rack, [198, 19, 1, 5], 0x42)),
        "02:00:00:00:71:04",
        "a QP before any prefix"
    );
    assert_eq!(
        sent_to(&mut harness, &roce_to(rack, [198, 19, 5, 5], 0x43)),
        "02:00:00:00:71:03"
    );
    // A test run's packets come in on lo.
    assert_eq!(
        sent_to(&mut harness, &udp_to(rack, [198, 19, 2, 9])),
        "02:00:00:00:71:01"
    );
    assert_eq!(counted(&harness, "all"), (3, 0));
    assert_eq!(counted(&harness, "from-racks"), (1, 0));
    assert_eq!(counted(&harness, "qp"), (1, 0));
    assert_eq!(counted(&harness, "on-lo"), (1, 0));
    // A new flow of the flowlet group starts on its pin.
    assert_eq!(
        sent_to(&mut harness, &udp_to(rack, [198, 20, 0, 7])),
        "02:00:00:00:72:02"
    );
    assert_eq!(counted(&harness, "dyn"), (1, 0));

    // The pinned next hop unusable: the group's own choice, a fallback.
    harness.clear_usable("fabric", 2);
    let out = sent_to(&mut harness, &udp_to(rack, [198, 19, 5, 5]));
    assert_ne!(out, "02:00:00:00:71:03");
    assert_eq!(counted(&harness, "all"), (3, 1));
    harness.restore_usable("fabric", 2);
    assert_eq!(
        sent_to(&mut harness, &udp_to(rack, [198, 19, 5, 5])),
        "02:00:00:00:71:03"
    );
    assert_eq!(counted(&harness, "all"), (4, 1));
}

/// A reload that changes a group's overrides writes them into the other
/// half before the group entry flips: the new set applies whole, with
/// counters from zero; one that keeps them keeps half and counters. A
/// flowlet group flips at once; an ECMP group keeps flowlet state first
/// and flips after a gap, and a flow busy since moves off its pin only at
/// its flowlet's end (the group's gap is a second here).
#[test]
fn a_reload_flips_a_changed_set_to_the_other_half() {
    // Flowlet state is per CPU: the program's and explain's the same one.
    pin_to_one_cpu();
    let mut harness = Harness::with_config(CONFIG);
    let rack = [198, 18, 0, 1];
    let busy = udp_to(rack, [198, 19, 5, 5]);
    assert_eq!(sent_to(&mut harness, &busy), "02:00:00:00:71:03", "all");
    let half = |h: &Harness| h.tables.groups[0].entry.override_half;
    let before = half(&harness);
    // Only the `dyn` group's override changes.
    harness.reload(&CONFIG.replace(
        "name = \"dyn\"\ndst = \"198.20.0.0/16\"\nnext_hop = { interface = \"lo\", mac = \"02:00:00:00:72:02\" }",
        "name = \"dyn\"\ndst = \"198.20.0.0/16\"\nnext_hop = { interface = \"lo\", mac = \"02:00:00:00:72:01\" }",
    ));
    assert_eq!(half(&harness), before, "fabric's set stays");
    assert_eq!(counted(&harness, "all"), (1, 0));
    assert_eq!(
        sent_to(&mut harness, &udp_to(rack, [198, 20, 0, 9])),
        "02:00:00:00:72:01",
        "dyn's flips at once"
    );
    // Without the `all` override, 198.19.5.5 takes ECMP's choice.
    let fewer = CONFIG.replace(
        "[[override]]\nname = \"all\"\ndst = \"198.19.0.0/16\"\nnext_hop = { interface = \"lo\", mac = \"02:00:00:00:71:03\" }\n",
        "",
    );
    harness.reload(&fewer);
    assert_eq!(
        half(&harness),
        before,
        "fabric waits a gap for flowlet state"
    );
    assert_eq!(
        sent_to(&mut harness, &busy),
        "02:00:00:00:71:03",
        "still all's"
    );
    assert_eq!(counted(&harness, "all"), (2, 0));
    harness.flip_pins();
    assert_ne!(
        half(&harness),
        before,
        "fabric's set changed: the other half"
    );
    assert_eq!(
        sent_to(&mut harness, &busy),
        "02:00:00:00:71:03",
        "a busy flow stays until its flowlet ends"
    );
    assert_eq!(
        sent_to(&mut harness, &udp_to(rack, [198, 19, 1, 5])),
        "02:00:00:00:71:02"
    );
    assert_eq!(counted(&harness, "from-racks"), (1, 0), "counted from zero");
}

/// An ECMP group's changed set given up before its flip (the next reload
/// brings the running set back): nothing flips, and the flowlet state the
/// group kept for the wait drains out like a flip's instead of for ever.
#[test]
fn a_change_given_up_before_its_flip_drains_out() {
    let mut harness = Harness::with_config(CONFIG);
    let fabric = |h: &Harness| h.tables.groups[0].clone();
    let before = fabric(&harness);
    assert_eq!(before.entry.draining, MODE_ECMP);
    // `all` pins to another next hop.
    harness.reload(&CONFIG.replace(
        "dst = \"198.19.0.0/16\"\nnext_hop = { interface = \"lo\", mac = \"02:00:00:00:71:03\" }",
        "dst = \"198.19.0.0/16\"\nnext_hop = { interface = \"lo\", mac = \"02:00:00:00:71:04\" }",
    ));
    let waiting = fabric(&harness);
    assert!(waiting.pending.is_some(), "the changed set waits");
    assert_eq!(waiting.entry.override_half, before.entry.override_half);
    assert_ne!(waiting.entry.draining, MODE_ECMP, "keeping flowlet state");
    assert_eq!(waiting.drain_until, None, "until the flip");
    harness.reload(CONFIG);
    let given_up = fabric(&harness);
    assert!(given_up.pending.is_none());
    assert_eq!(given_up.entry.override_half, before.entry.override_half);
    assert!(given_up.drain_until.is_some(), "the drain ends");
    assert_eq!(harness.group_entry("fabric"), given_up.entry, "in the maps");
}
