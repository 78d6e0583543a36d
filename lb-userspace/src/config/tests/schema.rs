//! How the validated types display.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::config::{Mode, NextHopAddr, NextHopSpec, Prefix, format_mac};

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
