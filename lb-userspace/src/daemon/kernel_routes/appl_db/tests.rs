//! APPL_DB's routes to fabriclb routes and groups, beside a group that
//! follows the kernel: the same sets, weights and skips.

use std::collections::BTreeMap;
use std::path::Path;

use super::super::kernel::{KernelTable, Skip};
use super::super::learned::Learned;
use super::select;
use crate::config::{self, Config, NextHopAddr, Prefix};
use crate::sonic::{ApplRoutes, Rows};

/// "fabric" follows APPL_DB's BGP routes, "uplinks" the kernel's.
fn file() -> Config {
    let text = "[switch]\ninterfaces = [\"eth0\"]\n\
        [[group]]\nname = \"uplinks\"\nkernel_routes = { protocol = \"bgp\" }\n\
        [[group]]\nname = \"fabric\"\nmode = \"flowlet\"\nsonic_routes = { protocol = \"bgp\" }\n";
    config::parse(text, Path::new("sonic.toml")).expect("valid config")
}

fn rows(entries: &[(&str, &[(&str, &str)])]) -> ApplRoutes {
    ApplRoutes::from_rows(&Rows::appl_of(entries))
}

fn prefix(s: &str) -> Prefix {
    let (addr, len) = s.split_once('/').expect("a prefix");
    Prefix {
        addr: addr.parse().expect("an address"),
        len: len.parse().expect("a length"),
    }
}

fn is_port(name: &str) -> bool {
    name.starts_with("Ethernet")
}

#[test]
fn appl_db_routes_become_groups_with_the_parents_settings_and_weights() {
    let bgp = ("protocol", "bgp");
    let routes = rows(&[
        (
            "ROUTE_TABLE:198.19.0.0/16",
            &[
                ("nexthop", "198.18.1.2,198.18.2.2"),
                ("ifname", "Ethernet0,Ethernet4"),
                ("weight", "1,3"),
                bgp,
            ],
        ),
        ("ROUTE_TABLE:198.20.0.0/16", &[("nexthop_group", "7"), bgp]),
        (
            "NEXTHOP_GROUP_TABLE:7",
            &[
                ("nexthop", "198.18.1.2,198.18.2.2"),
                ("ifname", "Ethernet0,Ethernet4"),
                ("weight", "1,3"),
            ],
        ),
        (
            "ROUTE_TABLE:10.0.0.0/8",
            &[
                ("nexthop", "10.0.0.1"),
                ("ifname", "Ethernet0"),
                ("protocol", "static"),
            ],
        ),
    ]);
    let file = file();
    let filter = file.groups[1].sonic_routes.clone().expect("follows");
    let selected = BTreeMap::from([
        ("fabric".to_string(), select(&routes, &filter, &is_port)),
        (
            "uplinks".to_string(),
            KernelTable::default().select(&file.groups[0].kernel_routes.expect("k"), &|_| None),
        ),
    ]);
    let mut learned = Learned::default();
    let report = learned.update(&file, &selected);
    assert_eq!(report.skipped, []);
    assert_eq!(
        report.groups,
        ["group fabric#1: learned: Ethernet0 198.18.1.2, Ethernet4 198.18.2.2 weight 3, 2 routes"]
    );
    let config = learned.effective(&file);
    assert_eq!(config.groups.len(), 1, "the parents carry nothing");
    let group = &config.groups[0];
    assert_eq!(group.name, "fabric#1");
    assert_eq!(group.mode, config::Mode::Flowlet);
    assert_eq!(group.weights, [1, 3]);
    assert_eq!(group.sonic_routes, None);
    assert_eq!(
        group.next_hops[1].addr,
        NextHopAddr::Ip("198.18.2.2".parse().expect("ip"))
    );
    let routes: Vec<String> = config.routes.iter().map(|r| r.prefix.to_string()).collect();
    assert_eq!(
        routes,
        ["198.19.0.0/16", "198.20.0.0/16"],
        "the static one is not BGP's"
    );
}

#[test]
fn routes_fabriclb_cannot_forward_are_skipped_with_why() {
    let routes = rows(&[
        ("ROUTE_TABLE:10.1.0.0/16", &[("blackhole", "true")]),
        (
            "ROUTE_TABLE:10.2.0.0/16",
            &[("nexthop", "0.0.0.0"), ("ifname", "Ethernet0")],
        ),
        (
            "ROUTE_TABLE:10.3.0.0/16",
            &[("nexthop", "10.0.0.1"), ("ifname", "Loopback0")],
        ),
        ("ROUTE_TABLE:10.4.0.0/16", &[("nexthop_group", "404")]),
        (
            "ROUTE_TABLE:10.5.0.0/16",
            &[
                ("nexthop", "10.0.0.1"),
                ("ifname", "Ethernet0"),
                ("mpls_nh", "push100"),
            ],
        ),
    ]);
    let filter = config::SonicRoutes { protocol: None };
    let selected = select(&routes, &filter, &is_port);
    let skips: Vec<(String, String)> = selected
        .iter()
        .map(|(p, s)| {
            let skip = s.as_ref().expect_err("skipped");
            (p.to_string(), skip.to_string())
        })
        .collect();
    assert_eq!(
        skips,
        [
            ("10.1.0.0/16".into(), Skip::NotUnicast.to_string()),
            ("10.2.0.0/16".into(), Skip::NoGateway.to_string()),
            (
                "10.3.0.0/16".into(),
                "interface \"Loopback0\" is not an Ethernet port of this box".into()
            ),
            (
                "10.4.0.0/16".into(),
                "no usable NEXTHOP_GROUP_TABLE row \"404\"".into()
            ),
            (
                "10.5.0.0/16".into(),
                "mpls_nh is set: fabriclb forwards over plain IP next hops only".into()
            ),
        ]
    );
    assert!(selected.contains_key(&prefix("10.1.0.0/16")));
}
