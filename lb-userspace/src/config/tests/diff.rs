//! The live-reload log lines of `changes`.

use std::net::{IpAddr, Ipv4Addr};

use lb_common::select::hash::HashFields;

use super::{ok, with_groups};
use crate::config::{
    Destination, FlowletChoice, Mode, NextHopAddr, NextHopSpec, Prefix, Route, Spray,
    XdpModeSetting, changes,
};

#[test]
fn changes_name_every_difference() {
    let old = ok(&with_groups(
        &[("a", "eth1", "10.0.0.1"), ("b", "eth2", "10.0.0.2")],
        "[[route]]\nprefix = \"10.1.0.0/16\"\ngroup = \"a\"\n\
         [[route]]\nprefix = \"10.2.0.0/16\"\ngroup = \"b\"\n",
    ));
    assert!(changes(&old, &old).is_empty());
    let mut new = old.clone();
    new.switch.hash_seed = 7;
    new.groups[0].mode = Mode::Flowlet;
    new.groups[0].flowlet_gap_us = 500;
    new.groups[0].spray = Spray::All;
    new.groups[0].hash_fields = HashFields::SRC_IP.union(HashFields::DST_IP);
    new.groups[0].flowlet_choice = FlowletChoice::TwoChoices;
    new.groups[0].destinations = vec![Destination {
        name: "leaf2".into(),
        prefixes: vec![Prefix::parse("10.2.0.0/16").expect("prefix")],
        telemetry_device: "l2".into(),
    }];
    new.groups[0].next_hops.push(NextHopSpec {
        interface: "eth3".into(),
        addr: NextHopAddr::Mac([2, 0, 0, 0, 0, 3]),
        vlan: None,
    });
    new.groups.remove(1);
    new.routes[1].group = 0;
    new.routes.push(Route {
        prefix: Prefix {
            addr: IpAddr::V4(Ipv4Addr::new(10, 3, 0, 0)),
            len: 16,
        },
        group: 0,
    });
    assert_eq!(
        changes(&old, &new),
        [
            "switch.hash_seed 0x0 -> 0x7",
            "group \"a\": mode ecmp -> flowlet",
            "group \"a\": flowlet_gap_us 256 -> 500",
            "group \"a\": spray self-contained -> all",
            "group \"a\": hash_fields [src_ip, dst_ip, ip_protocol, l4_src_port, \
             l4_dst_port, rdma_bth_dest_qp] -> [src_ip, dst_ip]",
            "group \"a\": flowlet_choice weighted -> two-choices",
            "group \"a\": destinations [] -> [leaf2 10.2.0.0/16 via l2]",
            "group \"a\": next hop \"eth3 02:00:00:00:00:03\" added",
            "group \"b\" removed",
            "route 10.2.0.0/16: group \"b\" -> \"a\"",
            "route 10.3.0.0/16 -> \"a\" added",
        ]
    );
}

/// The lines `changes_name_every_difference` does not reach: interfaces,
/// xdp_mode, table size, a next hop removed, a group added, a route removed.
#[test]
fn changes_name_the_other_differences() {
    let old = ok(&with_groups(
        &[("a", "eth1", "10.0.0.1")],
        "[[route]]\nprefix = \"10.1.0.0/16\"\ngroup = \"a\"\n\
         [[route]]\nprefix = \"10.2.0.0/16\"\ngroup = \"a\"\n",
    ));
    let mut new = old.clone();
    new.switch.interfaces = vec!["eth9".into()];
    new.switch.xdp_mode = XdpModeSetting::Generic;
    new.switch.flowlet_table_size = 1024;
    new.groups[0].next_hops[0].vlan = Some(5);
    let mut b = new.groups[0].clone();
    b.name = "b".into();
    b.mode = Mode::PerPacket;
    new.groups.push(b);
    new.routes.pop();
    assert_eq!(
        changes(&old, &new),
        [
            "switch.interfaces: \"eth9\" added",
            "switch.interfaces: \"eth0\" removed",
            "switch.xdp_mode auto -> generic",
            "switch.flowlet_table_size 65536 -> 1024",
            "group \"a\": next hop \"eth1 10.0.0.1 vlan 5\" added",
            "group \"a\": next hop \"eth1 10.0.0.1\" removed",
            "group \"b\" added: mode per-packet, 1 next hops",
            "route 10.2.0.0/16 removed",
        ]
    );
}

/// Warnings carry lines: the same config with a comment above it warns at
/// other lines, and is no change.
#[test]
fn warnings_are_no_change() {
    let text = with_groups(
        &[("a", "eth1", "10.0.0.1"), ("unused", "eth2", "10.0.0.2")],
        "[[route]]\nprefix = \"10.1.0.0/16\"\ngroup = \"a\"\n",
    );
    let (old, new) = (ok(&text), ok(&format!("# moved down\n{text}")));
    assert_ne!(old.warnings, new.warnings);
    assert_eq!(changes(&old, &new), Vec::<String>::new());
}
