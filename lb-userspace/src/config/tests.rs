use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use lb_common::limits::{FLOWLET_TABLE_DEFAULT, MAX_GROUPS, MAX_NEXTHOPS_PER_GROUP, MAX_ROUTES};
use lb_common::select::hash::HashFields;

use super::*;

const FILE: &str = "configs/x.toml";

fn ok(text: &str) -> Config {
    match parse(text, Path::new(FILE)) {
        Ok(config) => config,
        Err(e) => panic!("expected a valid config, got: {e}"),
    }
}

fn err(text: &str) -> String {
    match parse(text, Path::new(FILE)) {
        Ok(config) => panic!("expected an error, got {config:?}"),
        Err(e) => e.to_string(),
    }
}

/// Lines 1-2.
const SWITCH: &str = "[switch]\ninterfaces = [\"eth0\"]\n";

/// `SWITCH`, then a group with a single next hop on lines 3-5, then
/// `route` (starting on line 6).
fn with_route(route: &str) -> String {
    format!(
        "{SWITCH}[[group]]\nname = \"spines\"\n\
         next_hops = [{{ interface = \"eth1\", mac = \"02:00:00:00:01:02\" }}]\n{route}"
    )
}

/// `SWITCH`, then `[[group]]` on line 3 followed by `group` (starting on
/// line 4), then a route to it.
fn with_group(group: &str) -> String {
    format!("{SWITCH}[[group]]\n{group}[[route]]\nprefix = \"10.0.0.0/8\"\ngroup = \"g\"\n")
}

/// A group "g" whose only next hop is `{ interface = "eth1", <next_hop> }`
/// on line 5, column 14.
fn with_next_hop(next_hop: &str) -> String {
    with_group(&format!(
        "name = \"g\"\nnext_hops = [{{ interface = \"eth1\", {next_hop} }}]\n"
    ))
}

/// A `next_hops` line with a single next hop.
const NEXT_HOPS: &str = "next_hops = [{ interface = \"eth1\", ip = \"10.0.0.1\" }]\n";

/// A group "g" with `key` on line 5 (column 1), then `NEXT_HOPS`.
fn with_group_key(key: &str) -> String {
    with_group(&format!("name = \"g\"\n{key}\n{NEXT_HOPS}"))
}

/// `SWITCH`, then for each `(name, interface, ip)` a group of that one
/// next hop (`[[group]]` on line 3, 6, ..., its name at column 8), then
/// `routes`.
fn with_groups(groups: &[(&str, &str, &str)], routes: &str) -> String {
    let mut text = String::from(SWITCH);
    for (name, interface, ip) in groups {
        text += &format!(
            "[[group]]\nname = \"{name}\"\n\
             next_hops = [{{ interface = \"{interface}\", ip = \"{ip}\" }}]\n"
        );
    }
    text + routes
}

#[test]
fn good_config_parses_to_exact_structure() {
    let text = r#"
# a comment
[switch]
hash_seed = 0x5eed1234
interfaces = ["eth0", "eth9"]
xdp_mode = "generic"

[[group]]
name = "spines"
mode = "ecmp"
hash_fields = ["rdma_bth_dest_qp", "dst_ip"]
next_hops = [
  { interface = "eth1", mac = "02:00:00:00:01:02" },
  { interface = "eth2", ip = "10.0.2.2" },
  { interface = "eth3", ip = "fe80::2", vlan = 100 },
  { interface = "eth3", mac = "0A:bC:00:00:00:FF", vlan = 4094 },
]

[[group]]
name = "unused"
next_hops = [{ interface = "eth1", ip = "10.0.1.1", vlan = 1 }]

[[group]]
name = "storage"
hash_fields = ["src_ip"]
next_hops = [{ interface = "eth4", mac = "02:00:00:00:04:01" }]

[[route]]
prefix = "10.1.0.0/16"
group = "spines"

[[route]]
prefix = "2001:DB8:0:0::/32"
group = "storage"

[[route]]
prefix = "0.0.0.0/0"
group = "spines"

[[route]]
prefix = "2001:db8:1::1/128"
group = "spines"
"#;
    let expected = Config {
        switch: Switch {
            hash_seed: 0x5eed_1234,
            interfaces: vec!["eth0".into(), "eth9".into()],
            xdp_mode: XdpModeSetting::Generic,
            flowlet_table_size: FLOWLET_TABLE_DEFAULT,
        },
        groups: vec![
            Group {
                name: "spines".into(),
                mode: Mode::Ecmp,
                hash_fields: HashFields::RDMA_BTH_DEST_QP.union(HashFields::DST_IP),
                flowlet_gap_us: FLOWLET_GAP_DEFAULT_US,
                spray: Spray::SelfContained,
                next_hops: vec![
                    NextHopSpec {
                        interface: "eth1".into(),
                        addr: NextHopAddr::Mac([2, 0, 0, 0, 1, 2]),
                        vlan: None,
                    },
                    NextHopSpec {
                        interface: "eth2".into(),
                        addr: NextHopAddr::Ip(IpAddr::V4(Ipv4Addr::new(10, 0, 2, 2))),
                        vlan: None,
                    },
                    NextHopSpec {
                        interface: "eth3".into(),
                        addr: NextHopAddr::Ip(IpAddr::V6(Ipv6Addr::new(
                            0xfe80, 0, 0, 0, 0, 0, 0, 2,
                        ))),
                        vlan: Some(100),
                    },
                    NextHopSpec {
                        interface: "eth3".into(),
                        addr: NextHopAddr::Mac([0x0a, 0xbc, 0, 0, 0, 0xff]),
                        vlan: Some(4094),
                    },
                ],
            },
            Group {
                name: "unused".into(),
                mode: Mode::Ecmp,
                hash_fields: HashFields::ALL,
                flowlet_gap_us: FLOWLET_GAP_DEFAULT_US,
                spray: Spray::SelfContained,
                next_hops: vec![NextHopSpec {
                    interface: "eth1".into(),
                    addr: NextHopAddr::Ip(IpAddr::V4(Ipv4Addr::new(10, 0, 1, 1))),
                    vlan: Some(1),
                }],
            },
            Group {
                name: "storage".into(),
                mode: Mode::Ecmp,
                hash_fields: HashFields::SRC_IP,
                flowlet_gap_us: FLOWLET_GAP_DEFAULT_US,
                spray: Spray::SelfContained,
                next_hops: vec![NextHopSpec {
                    interface: "eth4".into(),
                    addr: NextHopAddr::Mac([2, 0, 0, 0, 4, 1]),
                    vlan: None,
                }],
            },
        ],
        routes: vec![
            Route {
                prefix: Prefix {
                    addr: IpAddr::V4(Ipv4Addr::new(10, 1, 0, 0)),
                    len: 16,
                },
                group: 0,
            },
            Route {
                prefix: Prefix {
                    addr: IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0)),
                    len: 32,
                },
                group: 2,
            },
            Route {
                prefix: Prefix {
                    addr: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                    len: 0,
                },
                group: 0,
            },
            Route {
                prefix: Prefix {
                    addr: IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 1)),
                    len: 128,
                },
                group: 0,
            },
        ],
    };
    assert_eq!(ok(text), expected);
}

#[test]
fn defaults() {
    let config = ok(&with_route(
        "[[route]]\nprefix = \"10.1.0.0/16\"\ngroup = \"spines\"\n",
    ));
    assert_eq!(
        config.switch,
        Switch {
            hash_seed: 0,
            interfaces: vec!["eth0".into()],
            xdp_mode: XdpModeSetting::Auto,
            flowlet_table_size: FLOWLET_TABLE_DEFAULT,
        }
    );
    assert_eq!(config.groups[0].flowlet_gap_us, FLOWLET_GAP_DEFAULT_US);
    assert_eq!(config.groups[0].spray, Spray::SelfContained);
    assert_eq!(config.groups.len(), 1);
    assert_eq!(config.groups[0].mode, Mode::Ecmp);
    assert_eq!(config.groups[0].hash_fields, HashFields::ALL);
    assert_eq!(config.groups[0].next_hops[0].vlan, None);
    assert_eq!(XdpModeSetting::default(), XdpModeSetting::Auto);
    assert_eq!(Mode::default(), Mode::Ecmp);
}

#[test]
fn xdp_modes() {
    for (name, mode) in [
        ("auto", XdpModeSetting::Auto),
        ("driver", XdpModeSetting::Driver),
        ("generic", XdpModeSetting::Generic),
    ] {
        let text = with_group(&format!("name = \"g\"\n{NEXT_HOPS}")).replacen(
            SWITCH,
            &format!("{SWITCH}xdp_mode = \"{name}\"\n"),
            1,
        );
        assert_eq!(ok(&text).switch.xdp_mode, mode);
        assert_eq!(mode.to_string(), name);
    }
    let text = "[switch]\ninterfaces = [\"eth0\"]\nxdp_mode = \"native\"\n";
    assert_eq!(
        err(text),
        "configs/x.toml:3:12: unknown xdp_mode \"native\" \
         (valid modes: \"auto\", \"driver\", \"generic\")"
    );
}

#[test]
fn unsupported_group_mode() {
    assert_eq!(
        err(&with_group_key("mode = \"adaptive\"")),
        "configs/x.toml:5:8: unsupported group mode \"adaptive\" \
         (supported modes: \"ecmp\", \"flowlet\", \"per-packet\")"
    );
}

#[test]
fn group_modes_gap_and_spray() {
    for (name, mode) in Mode::NAMES {
        let config = ok(&with_group_key(&format!("mode = \"{name}\"")));
        assert_eq!(config.groups[0].mode, mode);
        assert_eq!(mode.to_string(), name);
    }
    let config = ok(&with_group_key(
        "mode = \"per-packet\"\nflowlet_gap_us = 50\nspray = \"all\"",
    ));
    assert_eq!(config.groups[0].flowlet_gap_us, 50);
    assert_eq!(config.groups[0].spray, Spray::All);
    assert_eq!(
        err(&with_group_key("flowlet_gap_us = 0")),
        "configs/x.toml:5:18: group \"g\" flowlet_gap_us 0 is out of range 1..=1000000"
    );
    assert_eq!(
        err(&with_group_key("flowlet_gap_us = 1000001")),
        "configs/x.toml:5:18: group \"g\" flowlet_gap_us 1000001 is out of range 1..=1000000"
    );
    assert_eq!(
        err(&with_group_key("spray = \"middle\"")),
        "configs/x.toml:5:9: unknown spray \"middle\" (valid values: \"self-contained\", \"all\")"
    );
}

#[test]
fn flowlet_table_size() {
    let text = |size: &str| {
        with_route("[[route]]\nprefix = \"10.1.0.0/16\"\ngroup = \"spines\"\n").replacen(
            SWITCH,
            &format!("{SWITCH}flowlet_table_size = {size}\n"),
            1,
        )
    };
    assert_eq!(ok(&text("1024")).switch.flowlet_table_size, 1024);
    assert_eq!(
        err(&text("1023")),
        "configs/x.toml:3:22: switch.flowlet_table_size 1023 is out of range 1024..=4194304"
    );
    assert_eq!(
        err(&text("-1")),
        "configs/x.toml:3:22: switch.flowlet_table_size -1 is out of range 1024..=4194304"
    );
}

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
            "group \"a\": next hop \"eth3 02:00:00:00:00:03\" added",
            "group \"b\" removed",
            "route 10.2.0.0/16: group \"b\" -> \"a\"",
            "route 10.3.0.0/16 -> \"a\" added",
        ]
    );
}

#[test]
fn syntax_error() {
    assert_eq!(
        err("[switch\ninterfaces = [\"eth0\"]\n"),
        "configs/x.toml:1:8: unclosed table, expected `]`"
    );
    assert_eq!(
        err("[switch]\ninterfaces = [\"eth0\"\n"),
        "configs/x.toml:2:21: unclosed array, expected `]`"
    );
}

#[test]
fn type_errors() {
    assert_eq!(
        err("[switch]\nhash_seed = -1\ninterfaces = [\"eth0\"]\n"),
        "configs/x.toml:2:13: invalid value: integer `-1`, expected u32"
    );
    assert_eq!(
        err("[switch]\nhash_seed = 0x1_0000_0000\ninterfaces = [\"eth0\"]\n"),
        "configs/x.toml:2:13: invalid value: integer `4294967296`, expected u32"
    );
    assert_eq!(
        err(&with_next_hop("ip = \"10.0.0.1\", vlan = \"100\"")),
        "configs/x.toml:5:60: invalid type: string \"100\", expected i64"
    );
}

#[test]
fn unknown_key() {
    assert_eq!(
        err("[switch]\ninterfaces = [\"eth0\"]\nhash_sead = 1\n"),
        "configs/x.toml:3:1: unknown field `hash_sead`, \
         expected one of `hash_seed`, `interfaces`, `xdp_mode`, `flowlet_table_size`"
    );
    assert_eq!(
        err(&with_group_key("weight = 2")),
        "configs/x.toml:5:1: unknown field `weight`, \
         expected one of `name`, `mode`, `hash_fields`, `flowlet_gap_us`, `spray`, \
         `next_hops`"
    );
    assert_eq!(
        err(&with_next_hop("ip = \"10.0.0.1\", vlna = 5")),
        "configs/x.toml:5:53: unknown field `vlna`, \
         expected one of `interface`, `mac`, `ip`, `vlan`"
    );
    assert_eq!(
        err(&with_route(
            "[[route]]\nprefix = \"10.0.0.0/8\"\ngroup = \"spines\"\nmetric = 1\n"
        )),
        "configs/x.toml:9:1: unknown field `metric`, expected `prefix` or `group`"
    );
    assert_eq!(
        err(&format!("{}[routes]\n", with_route(""))),
        "configs/x.toml:6:2: unknown field `routes`, expected one of `switch`, `group`, `route`"
    );
}

#[test]
fn missing_switch() {
    assert_eq!(
        err("# empty\n"),
        "configs/x.toml:1:1: missing field `switch`"
    );
    assert_eq!(
        err(&with_route("").replacen(SWITCH, "", 1)),
        "configs/x.toml:1:1: missing field `switch`"
    );
}

#[test]
fn unknown_hash_field() {
    assert_eq!(
        err(&with_group_key(
            "hash_fields = [\"src_ip\", \"inner_dst_ip\"]"
        )),
        "configs/x.toml:5:26: unknown hash field \"inner_dst_ip\" (valid fields: \
         \"src_ip\", \"dst_ip\", \"ip_protocol\", \"l4_src_port\", \"l4_dst_port\", \
         \"rdma_bth_dest_qp\")"
    );
}

#[test]
fn duplicate_hash_field() {
    assert_eq!(
        err(&with_group_key(
            "hash_fields = [\"src_ip\", \"dst_ip\", \"src_ip\"]"
        )),
        "configs/x.toml:5:36: duplicate hash field \"src_ip\""
    );
}

#[test]
fn empty_hash_fields() {
    assert_eq!(
        err(&with_group_key("hash_fields = []")),
        "configs/x.toml:5:15: group \"g\" has empty hash_fields; list at least one of \
         \"src_ip\", \"dst_ip\", \"ip_protocol\", \"l4_src_port\", \"l4_dst_port\", \
         \"rdma_bth_dest_qp\" or omit the key to hash on all of them"
    );
}

#[test]
fn mac_and_ip_both() {
    assert_eq!(
        err(&with_next_hop(
            "mac = \"02:00:00:00:01:02\", ip = \"10.0.0.1\""
        )),
        "configs/x.toml:5:14: next hop has both `mac` and `ip`; give exactly one"
    );
}

#[test]
fn mac_and_ip_neither() {
    assert_eq!(
        err(&with_next_hop("vlan = 7")),
        "configs/x.toml:5:14: next hop has neither `mac` nor `ip`; give exactly one"
    );
}

#[test]
fn missing_interface() {
    assert_eq!(
        err(&with_group(
            "name = \"g\"\nnext_hops = [{ ip = \"10.0.0.1\" }]\n"
        )),
        "configs/x.toml:5:14: missing field `interface`"
    );
}

#[test]
fn bad_mac() {
    for bad in [
        "02:00:00:00:01",
        "02:00:00:00:01:02:03",
        "02-00-00-00-01-02",
        "02:00:00:00:1:02",
        "02:00:00:00:01:0g",
        "02:00:00:00:01:+2",
        "",
    ] {
        assert_eq!(
            err(&with_next_hop(&format!("mac = \"{bad}\""))),
            format!(
                "configs/x.toml:5:42: invalid MAC address \"{bad}\": expected 6 hex \
                 octets separated by ':', e.g. \"02:00:00:00:01:02\""
            )
        );
    }
}

#[test]
fn multicast_broadcast_and_zero_mac() {
    for (mac, shown, kind) in [
        ("01:00:5E:00:00:01", "01:00:5e:00:00:01", "multicast"),
        ("33:33:00:00:00:01", "33:33:00:00:00:01", "multicast"),
        ("ff:ff:ff:ff:ff:ff", "ff:ff:ff:ff:ff:ff", "broadcast"),
        ("00:00:00:00:00:00", "00:00:00:00:00:00", "all-zero"),
    ] {
        assert_eq!(
            err(&with_next_hop(&format!("mac = \"{mac}\""))),
            format!(
                "configs/x.toml:5:42: MAC address {shown} is {kind}; \
                 a next hop needs a unicast MAC"
            )
        );
    }
}

#[test]
fn bad_next_hop_ip() {
    assert_eq!(
        err(&with_next_hop("ip = \"10.0.0\"")),
        "configs/x.toml:5:41: invalid IP address \"10.0.0\""
    );
    assert_eq!(
        err(&with_next_hop("ip = \"fe80::2%eth1\"")),
        "configs/x.toml:5:41: invalid IP address \"fe80::2%eth1\""
    );
    for (ip, kind) in [
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("224.0.0.5", "multicast"),
        ("ff02::1", "multicast"),
        ("255.255.255.255", "broadcast"),
    ] {
        assert_eq!(
            err(&with_next_hop(&format!("ip = \"{ip}\""))),
            format!(
                "configs/x.toml:5:41: next-hop IP {ip} is {kind}; \
                 a next hop needs a unicast neighbour address"
            )
        );
    }
}

#[test]
fn vlan_zero() {
    assert_eq!(
        err(&with_next_hop("ip = \"10.0.0.1\", vlan = 0")),
        "configs/x.toml:5:60: vlan 0 is out of range 1..=4094 (omit vlan to send untagged)"
    );
}

#[test]
fn vlan_4095() {
    for vlan in ["4095", "-1", "65537"] {
        assert_eq!(
            err(&with_next_hop(&format!("ip = \"10.0.0.1\", vlan = {vlan}"))),
            format!(
                "configs/x.toml:5:60: vlan {vlan} is out of range 1..=4094 \
                 (omit vlan to send untagged)"
            )
        );
    }
}

/// The route's prefix is on line 7, column 10.
fn route_prefix(prefix: &str) -> String {
    with_route(&format!(
        "[[route]]\nprefix = \"{prefix}\"\ngroup = \"spines\"\n"
    ))
}

#[test]
fn bad_prefix() {
    assert_eq!(
        err(&route_prefix("10.1.0.0")),
        "configs/x.toml:7:10: invalid prefix \"10.1.0.0\": expected address/length, \
         e.g. \"10.1.0.0/16\" or \"2001:db8::/32\""
    );
    assert_eq!(
        err(&route_prefix("10.1.0/16")),
        "configs/x.toml:7:10: invalid prefix \"10.1.0/16\": \
         \"10.1.0\" is not an IPv4 or IPv6 address"
    );
    assert_eq!(
        err(&route_prefix("spines/16")),
        "configs/x.toml:7:10: invalid prefix \"spines/16\": \
         \"spines\" is not an IPv4 or IPv6 address"
    );
    for len in ["", "+16", "1x", "16/16", "-1"] {
        assert_eq!(
            err(&route_prefix(&format!("10.1.0.0/{len}"))),
            format!(
                "configs/x.toml:7:10: invalid prefix \"10.1.0.0/{len}\": \
                 length \"{len}\" is not a number"
            )
        );
    }
}

#[test]
fn host_bits_set() {
    for (prefix, meant) in [
        ("10.1.2.3/16", "10.1.0.0/16"),
        ("10.1.2.3/0", "0.0.0.0/0"),
        ("2001:db8:80ff::/33", "2001:db8:8000::/33"),
    ] {
        assert_eq!(
            err(&route_prefix(prefix)),
            format!(
                "configs/x.toml:7:10: prefix \"{prefix}\" has host bits set; \
                 did you mean \"{meant}\"?"
            )
        );
    }
}

#[test]
fn prefix_length_out_of_range() {
    for (prefix, len, range) in [
        ("10.1.0.0/33", "33", "IPv4 (0..=32)"),
        ("2001:db8::/129", "129", "IPv6 (0..=128)"),
        (
            "2001:db8::/99999999999999999999",
            "4294967295",
            "IPv6 (0..=128)",
        ),
    ] {
        assert_eq!(
            err(&route_prefix(prefix)),
            format!(
                "configs/x.toml:7:10: invalid prefix \"{prefix}\": \
                 length {len} is out of range for {range}"
            )
        );
    }
}

#[test]
fn unknown_group() {
    let text = with_groups(
        &[
            ("spines", "eth1", "10.0.0.1"),
            ("leaves", "eth2", "10.0.0.2"),
        ],
        "[[route]]\nprefix = \"10.1.0.0/16\"\ngroup = \"spines\"\n\
         [[route]]\nprefix = \"10.2.0.0/16\"\n  group = \"spine\"\n",
    );
    assert_eq!(
        err(&text),
        "configs/x.toml:14:11: unknown group \"spine\" \
         (defined groups: \"spines\", \"leaves\")"
    );
}

#[test]
fn duplicate_prefix() {
    assert_eq!(
        err(&with_route(
            "[[route]]\nprefix = \"2001:db8::/32\"\ngroup = \"spines\"\n\
             [[route]]\nprefix = \"10.0.0.0/8\"\ngroup = \"spines\"\n\
             [[route]]\nprefix = \"2001:0DB8:0::/32\"\ngroup = \"spines\"\n"
        )),
        "configs/x.toml:13:10: duplicate prefix 2001:db8::/32 (first at line 7, column 10)"
    );
}

#[test]
fn same_address_different_lengths_is_fine() {
    let config = ok(&with_route(
        "[[route]]\nprefix = \"10.0.0.0/8\"\ngroup = \"spines\"\n\
         [[route]]\nprefix = \"10.0.0.0/16\"\ngroup = \"spines\"\n",
    ));
    assert_eq!(
        config
            .routes
            .iter()
            .map(|r| r.prefix.to_string())
            .collect::<Vec<_>>(),
        ["10.0.0.0/8", "10.0.0.0/16"]
    );
}

#[test]
fn duplicate_group_name() {
    let text = with_groups(
        &[
            ("spines", "eth1", "10.0.0.1"),
            ("spines", "eth2", "10.0.0.2"),
        ],
        "[[route]]\nprefix = \"10.1.0.0/16\"\ngroup = \"spines\"\n",
    );
    assert_eq!(
        err(&text),
        "configs/x.toml:7:8: duplicate group name \"spines\" (first at line 4, column 8)"
    );
}

#[test]
fn empty_group_name() {
    assert_eq!(
        err(&with_group(&format!("name = \"\"\n{NEXT_HOPS}"))),
        "configs/x.toml:4:8: group name is empty"
    );
}

#[test]
fn duplicate_next_hop() {
    let text = with_group(
        "name = \"g\"\nnext_hops = [\n\
         \x20 { interface = \"eth1\", ip = \"fe80::2\", vlan = 10 },\n\
         \x20 { interface = \"eth1\", ip = \"fe80::2\" },\n\
         \x20 { interface = \"eth1\", ip = \"fe80::2\", vlan = 11 },\n\
         \x20 { interface = \"eth2\", ip = \"fe80::2\", vlan = 10 },\n\
         \x20 { interface = \"eth1\", ip = \"FE80:0::2\", vlan = 10 },\n\
         ]\n",
    );
    assert_eq!(
        err(&text),
        "configs/x.toml:10:3: duplicate next hop \"eth1 fe80::2 vlan 10\" in group \"g\" \
         (first at line 6, column 3)"
    );
    assert_eq!(
        err(&with_group(
            "name = \"g\"\nnext_hops = [\
             { interface = \"eth1\", mac = \"02:00:00:00:01:02\" }, \
             { interface = \"eth1\", mac = \"02:00:00:00:01:02\" }]\n"
        )),
        "configs/x.toml:5:65: duplicate next hop \"eth1 02:00:00:00:01:02\" in group \"g\" \
         (first at line 5, column 14)"
    );
}

#[test]
fn same_next_hop_in_two_groups_is_fine() {
    let text = with_groups(
        &[("a", "eth1", "10.0.0.1"), ("b", "eth1", "10.0.0.1")],
        "[[route]]\nprefix = \"10.1.0.0/16\"\ngroup = \"b\"\n",
    );
    let config = ok(&text);
    assert_eq!(config.groups[0].next_hops, config.groups[1].next_hops);
    assert_eq!(config.routes[0].group, 1);
}

#[test]
fn empty_next_hops() {
    assert_eq!(
        err(&with_group("name = \"g\"\nnext_hops = []\n")),
        "configs/x.toml:5:13: group \"g\" has no next hops"
    );
}

#[test]
fn empty_interfaces() {
    assert_eq!(
        err("[switch]\ninterfaces = []\n"),
        "configs/x.toml:2:14: switch.interfaces is empty; \
         list at least one interface to attach to"
    );
}

#[test]
fn duplicate_switch_interface() {
    assert_eq!(
        err("[switch]\ninterfaces = [\"eth0\", \"eth1\", \"eth0\"]\n"),
        "configs/x.toml:2:31: duplicate interface \"eth0\" in switch.interfaces \
         (first at line 2, column 15)"
    );
}

#[test]
fn too_long_interface_name() {
    assert_eq!(
        err("[switch]\ninterfaces = [\"eth0\", \"enp129s0f1np1v23\"]\n"),
        "configs/x.toml:2:23: interface name \"enp129s0f1np1v23\" is 16 bytes long; \
         at most 15 are allowed"
    );
    // Bytes, not characters: 8 two-byte characters.
    assert_eq!(
        err(&with_group(
            "name = \"g\"\nnext_hops = [{ interface = \"éééééééé\", ip = \"10.0.0.1\" }]\n"
        )),
        "configs/x.toml:5:28: interface name \"éééééééé\" is 16 bytes long; \
         at most 15 are allowed"
    );
    // Fifteen bytes is fine.
    let config = ok(&with_next_hop("ip = \"10.0.0.1\"").replace("eth1", "enp129s0f1np1v2"));
    assert_eq!(config.groups[0].next_hops[0].interface, "enp129s0f1np1v2");
}

#[test]
fn invalid_interface_names() {
    assert_eq!(
        err("[switch]\ninterfaces = [\"\"]\n"),
        "configs/x.toml:2:15: interface name is empty"
    );
    for bad in [
        ".",
        "..",
        "eth0/1",
        "eth0:1",
        "eth 0",
        "eth\\t0",
        "eth\\u0000",
    ] {
        let shown = format!("{:?}", bad.replace("\\t", "\t").replace("\\u0000", "\0"));
        assert_eq!(
            err(&format!("[switch]\ninterfaces = [\"{bad}\"]\n")),
            format!(
                "configs/x.toml:2:15: invalid interface name {shown}: it must not be \
                 \".\" or \"..\" or contain '/', ':', whitespace or NUL"
            )
        );
    }
}

#[test]
fn no_groups() {
    assert_eq!(
        err(&with_groups(
            &[],
            "[[route]]\nprefix = \"10.1.0.0/16\"\ngroup = \"spines\"\n"
        )),
        "configs/x.toml:1:1: no [[group]] defined; at least one group is required"
    );
}

#[test]
fn no_routes() {
    assert_eq!(
        err(&with_route("")),
        "configs/x.toml:1:1: no [[route]] defined; at least one route is required"
    );
}

/// `groups` groups "g0".. of `per_group` next hops each, one next hop a
/// line, with interface `interface(group, index)` and a MAC unique over
/// the file; a route to "g0". Group `g`'s `[[group]]` is on line
/// `3 + g * (per_group + 4)`, its next hop `i` on line
/// `6 + g * (per_group + 4) + i`, column 3.
fn many(groups: usize, per_group: usize, interface: impl Fn(usize, usize) -> String) -> String {
    let mut text = String::from(SWITCH);
    for g in 0..groups {
        text += &format!("[[group]]\nname = \"g{g}\"\nnext_hops = [\n");
        for i in 0..per_group {
            let iface = interface(g, i);
            text += &format!(
                "  {{ interface = \"{iface}\", mac = \"02:00:00:00:{g:02x}:{i:02x}\" }},\n"
            );
        }
        text += "]\n";
    }
    text + "[[route]]\nprefix = \"10.0.0.0/8\"\ngroup = \"g0\"\n"
}

#[test]
fn limits_are_reachable_exactly() {
    let mut per_group = ok(&many(1, MAX_NEXTHOPS_PER_GROUP, |_, _| "eth1".into()));
    assert_eq!(per_group.groups.pop().map(|g| g.next_hops.len()), Some(64));

    let groups = ok(&many(MAX_GROUPS as usize, 1, |_, _| "eth1".into()));
    assert_eq!(groups.groups.len(), 64);

    // 16 groups of 64: exactly MAX_NEXTHOPS.
    let total = ok(&many(16, 64, |_, _| "eth1".into()));
    assert_eq!(
        total
            .groups
            .iter()
            .map(|g| g.next_hops.len())
            .sum::<usize>(),
        1024
    );

    // 4 groups of 64 distinct interfaces: exactly MAX_EGRESS_PORTS.
    let ports = ok(&many(4, 64, |g, i| format!("p{g}x{i}")));
    let mut distinct: Vec<_> = ports
        .groups
        .iter()
        .flat_map(|g| g.next_hops.iter().map(|n| n.interface.as_str()))
        .collect();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), 256);
}

#[test]
fn too_many_next_hops_in_a_group() {
    // Next hop 64 of group 0: line 6 + 64.
    assert_eq!(
        err(&many(1, MAX_NEXTHOPS_PER_GROUP + 1, |_, _| "eth1".into())),
        "configs/x.toml:70:3: group \"g0\" has too many next hops: \
         at most 64 are allowed per group"
    );
}

#[test]
fn too_many_groups() {
    // Group 64's header: line 3 + 64 * 5.
    assert_eq!(
        err(&many(MAX_GROUPS as usize + 1, 1, |_, _| "eth1".into())),
        "configs/x.toml:323:1: too many groups: at most 64 are allowed"
    );
}

#[test]
fn too_many_next_hops_in_total() {
    // Next hop 0 of group 16: line 6 + 16 * 68.
    assert_eq!(
        err(&many(17, 64, |_, _| "eth1".into())),
        "configs/x.toml:1094:3: too many next hops: at most 1024 are allowed across all groups"
    );
}

#[test]
fn too_many_egress_interfaces() {
    // Groups 0-3 use 256 distinct interfaces; group 4 reuses one of
    // them except at next hop `new`, which introduces the 257th: line
    // 6 + 4 * 68 + new, at its interface value (column 17). Reusing an
    // interface before or after that is fine.
    for (new, line) in [(0, 278), (63, 341)] {
        let text = many(5, 64, |g, i| {
            if g == 4 && i != new {
                "p0x0".into()
            } else {
                format!("p{g}x{i}")
            }
        });
        assert_eq!(
            err(&text),
            format!(
                "configs/x.toml:{line}:17: too many egress interfaces: \
                 at most 256 distinct next-hop interfaces are allowed"
            )
        );
    }
}

#[test]
fn too_many_routes() {
    let mut text = with_route("");
    for i in 0..=MAX_ROUTES {
        let (a, b) = (i >> 8, i & 0xff);
        text += &format!("[[route]]\nprefix = \"10.{a}.{b}.0/24\"\ngroup = \"spines\"\n");
    }
    // Route 16384's header: line 6 + 16384 * 3.
    assert_eq!(
        err(&text),
        "configs/x.toml:49158:1: too many routes: at most 16384 are allowed"
    );
    let fits = text
        .lines()
        .take(5 + 3 * MAX_ROUTES as usize)
        .collect::<Vec<_>>();
    assert_eq!(ok(&fits.join("\n")).routes.len(), 16384);
}

#[test]
fn columns_count_characters_and_lines_survive_crlf() {
    let text = with_route("[[route]]\nprefix = \"10.1.0.0/16\"\ngroup = \"spïnes\"\n")
        .replace('\n', "\r\n");
    assert_eq!(
        err(&text),
        "configs/x.toml:8:9: unknown group \"spïnes\" (defined groups: \"spines\")"
    );
    let text = "[switch]\r\ninterfaces = [\"ü\", \"ü\"]\r\n";
    assert_eq!(
        err(text),
        "configs/x.toml:2:20: duplicate interface \"ü\" in switch.interfaces \
         (first at line 2, column 15)"
    );
}

#[test]
fn displays() {
    let mac = NextHopAddr::Mac([0x02, 0xAB, 0, 0x0f, 0x10, 0xff]);
    assert_eq!(mac.to_string(), "02:ab:00:0f:10:ff");
    assert_eq!(
        format_mac([0xde, 0xad, 0xbe, 0xef, 0, 1]),
        "de:ad:be:ef:00:01"
    );
    let ip = NextHopAddr::Ip(IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2)));
    assert_eq!(ip.to_string(), "fe80::2");
    let spec = NextHopSpec {
        interface: "eth3".into(),
        addr: ip,
        vlan: Some(100),
    };
    assert_eq!(spec.to_string(), "eth3 fe80::2 vlan 100");
    let spec = NextHopSpec {
        interface: "eth1".into(),
        addr: mac,
        vlan: None,
    };
    assert_eq!(spec.to_string(), "eth1 02:ab:00:0f:10:ff");
    let prefix = Prefix {
        addr: IpAddr::V4(Ipv4Addr::new(10, 1, 0, 0)),
        len: 16,
    };
    assert_eq!(prefix.to_string(), "10.1.0.0/16");
    let prefix = Prefix {
        addr: IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0)),
        len: 32,
    };
    assert_eq!(prefix.to_string(), "2001:db8::/32");
    assert_eq!(Mode::Ecmp.to_string(), "ecmp");
}

#[test]
fn io_error_names_the_file() {
    let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/no-such-config.toml"));
    let e = match load(path) {
        Ok(config) => panic!("expected an error, got {config:?}"),
        Err(e) => e,
    };
    assert!(matches!(&e, ConfigError::Io { file, .. } if file == path));
    assert_eq!(
        e.to_string(),
        format!("{}: No such file or directory (os error 2)", path.display())
    );
}

/// The example configs.
const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../configs");

/// The example config `name`, loaded.
fn example(name: &str) -> Config {
    load(&Path::new(EXAMPLES).join(name)).unwrap_or_else(|e| panic!("{e}"))
}

/// Whether all next hops of `config`'s first group give a MAC
/// (`by_mac`), or all give an IP (`!by_mac`).
fn first_group_all_by(config: &Config, by_mac: bool) -> bool {
    config.groups[0]
        .next_hops
        .iter()
        .all(|n| matches!(n.addr, NextHopAddr::Mac(_)) == by_mac)
}

#[test]
fn example_configs_are_valid() {
    let dir = Path::new(EXAMPLES);
    let mut checked = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .path();
        if path.extension().is_some_and(|ext| ext == "toml") {
            if let Err(e) = load(&path) {
                panic!("{e}");
            }
            checked.push(path);
        }
    }
    assert!(!checked.is_empty(), "no *.toml in {}", dir.display());
}

#[test]
fn example_configs_say_what_they_claim() {
    let leaf = example("two-tier-leaf.toml");
    assert_eq!(leaf.groups.len(), 1);
    assert_eq!(leaf.groups[0].hash_fields, HashFields::ALL);
    assert_eq!(leaf.groups[0].next_hops.len(), 4);
    assert!(first_group_all_by(&leaf, true));
    assert!(leaf.routes.iter().any(|r| r.prefix.addr.is_ipv4()));
    assert!(leaf.routes.iter().any(|r| r.prefix.addr.is_ipv6()));

    let five = example("five-tuple-only.toml");
    let classic = [
        HashFields::SRC_IP,
        HashFields::DST_IP,
        HashFields::IP_PROTOCOL,
        HashFields::L4_SRC_PORT,
        HashFields::L4_DST_PORT,
    ]
    .into_iter()
    .fold(HashFields(0), HashFields::union);
    assert_eq!(five.groups[0].hash_fields, classic);
    assert!(first_group_all_by(&five, false));
    assert_eq!(
        five.groups[0]
            .next_hops
            .iter()
            .filter(|n| n.vlan.is_some())
            .count(),
        1
    );
}
