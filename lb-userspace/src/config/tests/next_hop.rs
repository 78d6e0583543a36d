//! A group's next hops: interface, MAC or IP, VLAN, uniqueness.

use super::{err, ok, with_group, with_groups, with_next_hop};

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
        ("240.0.0.1", "reserved (240.0.0.0/4)"),
        ("255.255.255.254", "reserved (240.0.0.0/4)"),
        // IPv4-mapped: judged as the IPv4 address it maps.
        ("::ffff:0.0.0.0", "unspecified"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:224.0.0.1", "multicast"),
        ("::ffff:240.0.0.1", "reserved (240.0.0.0/4)"),
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
fn vlan_on_a_vlan_subinterface_would_tag_twice() {
    assert_eq!(
        err(&with_next_hop("ip = \"10.0.0.1\", vlan = 100").replace("eth1", "eth4.100")),
        "configs/x.toml:5:64: vlan = 100 on VLAN subinterface \"eth4.100\" would leave \
         double-tagged: name the parent port (interface = \"eth4\", vlan = 100); fabriclb \
         pushes the tag itself"
    );
    // A subinterface without `vlan`, and dots that are no VLAN id, are fine.
    ok(&with_next_hop("ip = \"10.0.0.1\"").replace("eth1", "eth4.100"));
    ok(&with_next_hop("ip = \"10.0.0.1\", vlan = 100").replace("eth1", "br.lan"));
}

/// No neighbour has an IPv4-mapped IPv6 address: an IPv4 neighbour is
/// written as IPv4. Unicast addresses next to the refused ranges stay
/// valid, link-local ones included.
#[test]
fn ipv4_mapped_next_hop() {
    assert_eq!(
        err(&with_next_hop("ip = \"::ffff:10.0.0.1\"")),
        "configs/x.toml:5:41: next-hop IP ::ffff:10.0.0.1 is IPv4-mapped IPv6, which no \
         neighbour has: write the IPv4 address 10.0.0.1"
    );
    for ip in [
        "128.0.0.1",
        "223.255.255.255",
        "169.254.0.1",
        "fe80::1",
        "::fffe:0:1",
    ] {
        let config = ok(&with_next_hop(&format!("ip = \"{ip}\"")));
        let addr = config.groups[0].next_hops[0].addr;
        assert_eq!(
            addr.to_string(),
            ip.parse::<std::net::IpAddr>().expect("ip").to_string()
        );
    }
}
