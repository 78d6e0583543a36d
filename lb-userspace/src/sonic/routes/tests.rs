//! Rows as fpmsyncd writes them (`routesync.cpp`: `nexthop`, `ifname`,
//! `weight` lists, `protocol`, `blackhole` only when `true`; host routes
//! without their length) and as `nhgorch.cpp` reads next-hop groups.

use super::*;

fn rows(entries: &[(&str, &[(&str, &str)])]) -> Rows {
    Rows::appl_of(entries)
}

fn prefix(text: &str) -> Prefix {
    let (addr, len) = text.split_once('/').expect("a prefix");
    Prefix {
        addr: addr.parse().expect("an address"),
        len: len.parse().expect("a length"),
    }
}

fn hop(gateway: &str, ifname: &str, weight: u32) -> Hop {
    Hop {
        gateway: Some(gateway.parse().expect("an address")),
        ifname: ifname.into(),
        weight,
    }
}

#[test]
fn multipath_routes_with_weights_and_host_routes() {
    let read = ApplRoutes::from_rows(&rows(&[
        (
            "ROUTE_TABLE:198.19.0.0/16",
            &[
                ("nexthop", "198.18.1.2,198.18.2.2"),
                ("ifname", "Ethernet0,Ethernet4"),
                ("weight", "1,3"),
                ("protocol", "bgp"),
            ],
        ),
        (
            "ROUTE_TABLE:2001:db8:19::/48",
            &[("nexthop", "fe80::2"), ("ifname", "Ethernet8")],
        ),
        (
            "ROUTE_TABLE:10.9.9.9",
            &[("nexthop", "198.18.1.2"), ("ifname", "Ethernet0")],
        ),
    ]));
    assert_eq!(read.refusals, []);
    let bgp = &read.routes[&prefix("198.19.0.0/16")];
    assert_eq!(bgp.protocol.as_deref(), Some("bgp"));
    assert_eq!(
        bgp.via,
        Via::Hops(vec![
            hop("198.18.1.2", "Ethernet0", 1),
            hop("198.18.2.2", "Ethernet4", 3)
        ])
    );
    let v6 = &read.routes[&prefix("2001:db8:19::/48")];
    assert_eq!(v6.protocol, None);
    assert_eq!(v6.via, Via::Hops(vec![hop("fe80::2", "Ethernet8", 1)]));
    assert!(read.routes.contains_key(&prefix("10.9.9.9/32")));
}

#[test]
fn next_hop_groups_blackholes_connected_and_other_vrfs() {
    let read = ApplRoutes::from_rows(&rows(&[
        ("ROUTE_TABLE:198.19.0.0/16", &[("nexthop_group", "7")]),
        (
            "NEXTHOP_GROUP_TABLE:7",
            &[
                ("nexthop", "198.18.1.2,198.18.2.2"),
                ("ifname", "Ethernet0,Ethernet4"),
            ],
        ),
        ("ROUTE_TABLE:10.0.0.0/8", &[("blackhole", "true")]),
        (
            "ROUTE_TABLE:198.18.1.0/24",
            &[("nexthop", "0.0.0.0"), ("ifname", "Ethernet0")],
        ),
        (
            "ROUTE_TABLE:Vrf-red:198.19.0.0/16",
            &[("nexthop", "198.18.1.2"), ("ifname", "Ethernet0")],
        ),
        (
            "ROUTE_TABLE:10.1.0.0/16",
            &[
                ("nexthop", "198.18.1.2"),
                ("ifname", "Ethernet0"),
                ("vni_label", "1000"),
            ],
        ),
    ]));
    assert_eq!(read.refusals, []);
    assert_eq!(read.routes.len(), 4, "the VRF's route is not the default's");
    assert_eq!(
        read.routes[&prefix("198.19.0.0/16")].via,
        Via::Group("7".into())
    );
    assert_eq!(read.groups["7"].len(), 2);
    assert_eq!(read.routes[&prefix("10.0.0.0/8")].via, Via::Blackhole);
    assert_eq!(
        read.routes[&prefix("198.18.1.0/24")].via,
        Via::Hops(vec![Hop {
            gateway: None,
            ifname: "Ethernet0".into(),
            weight: 1
        }])
    );
    assert_eq!(
        read.routes[&prefix("10.1.0.0/16")].via,
        Via::Other("vni_label".into())
    );
}

#[test]
fn invalid_rows_are_refused_with_their_key_and_field() {
    let mut input = rows(&[
        (
            "ROUTE_TABLE:198.19.0.0/16",
            &[
                ("nexthop", "198.18.1.2,198.18.2.2"),
                ("ifname", "Ethernet0"),
            ],
        ),
        (
            "ROUTE_TABLE:198.19.0.1/16",
            &[("nexthop", "198.18.1.2"), ("ifname", "Ethernet0")],
        ),
        (
            "ROUTE_TABLE:10.0.0.0/33",
            &[("nexthop", "198.18.1.2"), ("ifname", "Ethernet0")],
        ),
        (
            "ROUTE_TABLE:10.2.0.0/16",
            &[
                ("nexthop", "198.18.1.2"),
                ("ifname", "Ethernet0"),
                ("weight", "0"),
            ],
        ),
        (
            "ROUTE_TABLE:10.3.0.0/16",
            &[("nexthop", "bogus"), ("ifname", "Ethernet0")],
        ),
        (
            "ROUTE_TABLE:10.4.0.0/16",
            &[("nexthop_group", "1"), ("ifname", "Ethernet0")],
        ),
        ("ROUTE_TABLE:10.5.0.0/16", &[("nexthop", "198.18.1.2")]),
        (
            "ROUTE_TABLE:10.7.0.0/16",
            &[("nexthop", "198.18.1.2"), ("ifname", "Ethernet0")],
        ),
    ]);
    input
        .appl
        .insert("NEXTHOP_GROUP_TABLE:9".into(), Err("not a hash".into()));
    let read = ApplRoutes::from_rows(&input);
    let said: Vec<String> = read.refusals.iter().map(ToString::to_string).collect();
    assert_eq!(
        said,
        [
            "\"NEXTHOP_GROUP_TABLE:9\": not a hash",
            "\"ROUTE_TABLE:10.0.0.0/33\": invalid prefix \"10.0.0.0/33\": length 33 is out of \
             range for IPv4 (0..=32)",
            "\"ROUTE_TABLE:10.2.0.0/16\" field \"weight\": \"0\" is not a weight (a number from 1)",
            "\"ROUTE_TABLE:10.3.0.0/16\" field \"nexthop\": \"bogus\" is not an IP address",
            "\"ROUTE_TABLE:10.4.0.0/16\" field \"nexthop_group\": set with nexthop or ifname: a \
             route has one or the other",
            "\"ROUTE_TABLE:10.5.0.0/16\" field \"ifname\": missing or empty",
            "\"ROUTE_TABLE:198.19.0.0/16\" field \"nexthop\": 2 addresses for 1 interfaces in \
             ifname: the lists go in pairs",
            "\"ROUTE_TABLE:198.19.0.1/16\": prefix \"198.19.0.1/16\" has host bits set; did you \
             mean \"198.19.0.0/16\"?",
        ]
    );
    assert_eq!(
        read.routes.keys().collect::<Vec<_>>(),
        [&prefix("10.7.0.0/16")],
        "the valid row stays"
    );
}
