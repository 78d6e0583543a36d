//! The shared DLB next-hop MAC through the program: a port accepts frames
//! to the switch's DLB MAC like frames to its own, and to nothing else; a
//! group's next hops may all be another switch's DLB MAC.

use lb_common::{
    packet::craft::{Ipv4, udp},
    packet::parse::IPPROTO_UDP,
    verdict::Reason,
};

use fabriclb::config::{self, format_mac};
use fabriclb::inspect::explain::explain;
use fabriclb::inspect::maps::MapSet;

use crate::explain::now_ns;
use crate::harness::{Harness, LOOPBACK};
use crate::packets::PEER_MAC;
use crate::switch::LB_MAC;

/// Cisco's default DLB MAC.
pub const DLB_MAC: [u8; 6] = [0x00, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc];

/// Two next hops through two VLANs of `lo`, both the next switch's DLB
/// MAC, and the switch's own DLB MAC.
const CONFIG: &str = r#"
[switch]
interfaces = ["lo"]
dlb_mac = "00:cc:cc:cc:cc:cc"

[[group]]
name = "dlb"
next_hops = [
  { interface = "lo", mac = "00:cc:cc:cc:cc:cc", vlan = 10 },
  { interface = "lo", mac = "00:cc:cc:cc:cc:cc", vlan = 20 },
]

[[route]]
prefix = "198.19.0.0/16"
group = "dlb"
"#;

fn to(dst_mac: [u8; 6], port: u16) -> Vec<u8> {
    let ip = Ipv4 {
        dst: [198, 19, 0, 1],
        ..Ipv4::new(IPPROTO_UDP)
    };
    ip.frame(dst_mac, PEER_MAC, &[], &udp(port, 9000, &[0xab; 32]))
}

#[test]
fn frames_to_the_dlb_mac_are_taken_like_frames_to_the_ports_own() {
    let config = config::parse(CONFIG, "dlb.toml".as_ref()).expect("valid config");
    let dlb = config.switch.dlb_mac.expect("dlb_mac");
    assert_eq!(format_mac(dlb), "00:cc:cc:cc:cc:cc");
    let mut h = Harness::with_config(CONFIG);
    // What the daemon writes for the port once it read switch.dlb_mac.
    h.set_dlb(dlb);
    let maps = {
        let info = h.dp.program().expect("program").info().expect("info");
        MapSet::from_program(&info).expect("the program's maps")
    };
    let mut vlans = std::collections::BTreeSet::new();
    for port in 1000..1064 {
        let (own, to_own) = h.run(&to(LB_MAC, port));
        let (shared, to_dlb) = h.run(&to(DLB_MAC, port));
        assert_eq!(
            (own, shared),
            (Reason::Forwarded.xdp_action(), own),
            "port {port}"
        );
        // The same next hop, whichever MAC the frame came to.
        assert_eq!(to_own, to_dlb, "port {port}");
        assert_eq!(
            to_dlb[..6],
            DLB_MAC,
            "port {port}: sent to the next switch's DLB MAC"
        );
        assert_eq!(to_dlb[6..12], LB_MAC, "port {port}: from the egress port");
        assert_eq!(to_dlb[12..14], [0x81, 0x00], "port {port}: tagged");
        vlans.insert(u16::from_be_bytes([to_dlb[14], to_dlb[15]]));
        let e = explain(&maps, &to(DLB_MAC, port), LOOPBACK, Some(0), now_ns()).expect("explain");
        assert_eq!(e.verdict, Reason::Forwarded, "port {port}: explain");
    }
    assert_eq!(vlans, [10, 20].into(), "both next hops used");

    let before = h.dp.verdict_counts().expect("verdicts");
    let (verdict, out) = h.run(&to(PEER_MAC, 1000));
    assert_eq!(verdict, Reason::OtherHost.xdp_action());
    assert_eq!(out, to(PEER_MAC, 1000), "another host's frame untouched");
    let after = h.dp.verdict_counts().expect("verdicts");
    let other = Reason::OtherHost as usize;
    assert_eq!(after[other] - before[other], 1);
    let e = explain(&maps, &to(PEER_MAC, 1000), LOOPBACK, Some(0), now_ns()).expect("explain");
    assert_eq!(e.verdict, Reason::OtherHost, "explain agrees");

    // The switch's DLB MAC gone: frames to it are another host's.
    h.set_dlb([0; 6]);
    let (verdict, _) = h.run(&to(DLB_MAC, 1000));
    assert_eq!(verdict, Reason::OtherHost.xdp_action());
}
