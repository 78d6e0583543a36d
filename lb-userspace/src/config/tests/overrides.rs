//! `[[override]]`: what an override matches, and that its next hop is one
//! of the group whose route carries its destination.

use super::{SWITCH, err, ok};
use crate::config::{NextHopAddr, Prefix};

/// `SWITCH`, group "spines" (lines 3-8) with two next hops and the route
/// 10.0.0.0/8 to it (lines 9-11), then `rest` from line 12.
fn with_overrides(rest: &str) -> String {
    format!(
        "{SWITCH}[[group]]\nname = \"spines\"\nnext_hops = [\n\
         {{ interface = \"eth1\", ip = \"10.1.0.1\" }},\n\
         {{ interface = \"eth2\", ip = \"10.2.0.1\" }},\n]\n\
         [[route]]\nprefix = \"10.0.0.0/8\"\ngroup = \"spines\"\n{rest}"
    )
}

const PIN: &str = "[[override]]\nname = \"pin\"\ndst = \"10.9.0.0/16\"\n\
                   next_hop = { interface = \"eth2\", ip = \"10.2.0.1\" }\n";

fn prefix(s: &str) -> Prefix {
    let (addr, len) = s.split_once('/').expect("a prefix");
    Prefix {
        addr: addr.parse().expect("address"),
        len: len.parse().expect("length"),
    }
}

#[test]
fn an_override_names_what_it_matches_and_a_next_hop_of_the_carrying_group() {
    let full = "[[override]]\nname = \"qp\"\ndst = \"10.9.1.0/24\"\nsrc = \"10.200.0.0/16\"\n\
                ingress = \"eth0\"\ndest_qp = 0x42\n\
                next_hop = { interface = \"eth1\", ip = \"10.1.0.1\" }\n";
    let config = ok(&with_overrides(&format!("{PIN}{full}")));
    assert_eq!(config.overrides.len(), 2);
    let qp = &config.overrides[1];
    assert_eq!(qp.dst, prefix("10.9.1.0/24"));
    assert_eq!(qp.src, Some(prefix("10.200.0.0/16")));
    assert_eq!(qp.ingress.as_deref(), Some("eth0"));
    assert_eq!(qp.dest_qp, Some(0x42));
    assert_eq!(
        qp.next_hop.addr,
        NextHopAddr::Ip("10.1.0.1".parse().expect("ip"))
    );
    assert!(qp.specificity() > config.overrides[0].specificity());
    assert_eq!(
        qp.to_string(),
        "10.9.1.0/24 from 10.200.0.0/16 in eth0 qp 0x42 -> eth1 10.1.0.1"
    );
}

#[test]
fn overrides_that_cannot_apply_are_refused_where_they_are() {
    let cases = [
        (
            format!("{PIN}{PIN}"),
            "configs/x.toml:17:8: duplicate override name \"pin\" (first at line 13, column 8)",
        ),
        (
            PIN.replace("eth2\", ip = \"10.2.0.1", "eth3\", ip = \"10.3.0.1"),
            "configs/x.toml:12:1: override \"pin\": next hop \"eth3 10.3.0.1\" is not one of \
             group \"spines\", whose route carries 10.9.0.0/16",
        ),
        (
            PIN.replace("10.9.0.0/16", "192.0.2.0/24"),
            "configs/x.toml:12:1: override \"pin\": no route carries 192.0.2.0/24",
        ),
        (
            PIN.replace("dst = ", "src = \"2001:db8::/32\"\ndst = "),
            "configs/x.toml:14:7: override \"pin\": src 2001:db8::/32 is not of dst \
             10.9.0.0/16's family",
        ),
        (
            PIN.replace("dst = ", "ingress = \"eth7\"\ndst = "),
            "configs/x.toml:14:11: override \"pin\": ingress \"eth7\" is not one of \
             switch.interfaces",
        ),
        (
            PIN.replace("dst = ", "dest_qp = 0\ndst = "),
            "configs/x.toml:14:11: override \"pin\" dest_qp 0 is out of range 1..=16777215 \
             (a RoCEv2 queue pair number)",
        ),
        (
            PIN.replace(
                "ip = \"10.2.0.1\"",
                "ip = \"10.2.0.1\", sonic_port = \"Ethernet8\"",
            ),
            "configs/x.toml:15:12: override \"pin\": next_hop names a next hop of a group; its \
             telemetry keys belong in the group's next_hops",
        ),
    ];
    for (rest, expected) in cases {
        assert_eq!(err(&with_overrides(&rest)), expected, "{rest}");
    }
}
