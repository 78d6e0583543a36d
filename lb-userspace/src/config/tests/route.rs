//! The `[[route]]` tables: prefixes and the groups they name.

use super::{err, ok, route_prefix, warnings, with_groups, with_route};

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
fn no_routes() {
    assert_eq!(
        err(&with_route("")),
        "configs/x.toml:1:1: no [[route]] defined; at least one route is required"
    );
}

/// Prefixes no packet would ever be forwarded by: the data plane hands
/// every destination in them to the kernel, or none can come from the wire.
#[test]
fn routes_the_data_plane_never_takes() {
    for prefix in [
        "224.0.0.0/4",
        "239.1.0.0/16",
        "169.254.0.0/16",
        "169.254.7.0/24",
        "255.255.255.255/32",
        "ff00::/8",
        "ff02::1/128",
        "fe80::/10",
        "fe80::/64",
    ] {
        assert_eq!(
            err(&route_prefix(prefix)),
            format!(
                "configs/x.toml:7:10: route {prefix} holds only destinations the data plane \
                 never forwards (multicast, the limited broadcast, link-local): it hands \
                 them to the kernel"
            )
        );
    }
    for prefix in ["127.0.0.0/8", "127.1.0.0/16", "::1/128"] {
        assert_eq!(
            err(&route_prefix(prefix)),
            format!(
                "configs/x.toml:7:10: route {prefix} holds only loopback addresses, \
                 which never leave a host"
            )
        );
    }
}

/// IPv4 packets never match IPv6 routes: a mapped prefix is refused with
/// the IPv4 prefix it means.
#[test]
fn ipv4_mapped_routes() {
    for (prefix, shown, meant) in [
        ("::ffff:0:0/96", "::ffff:0.0.0.0/96", "0.0.0.0/0"),
        ("::ffff:10.0.0.0/104", "::ffff:10.0.0.0/104", "10.0.0.0/8"),
        (
            "::ffff:192.0.2.1/128",
            "::ffff:192.0.2.1/128",
            "192.0.2.1/32",
        ),
    ] {
        assert_eq!(
            err(&route_prefix(prefix)),
            format!(
                "configs/x.toml:7:10: route {shown} is IPv4-mapped IPv6, and IPv4 packets \
                 never match IPv6 routes: write \"{meant}\""
            )
        );
    }
}

/// A prefix that also holds forwarded destinations is a route like any
/// other, also one whose first and last addresses are never forwarded
/// (224.0.0.0/3 ends at 255.255.255.255 but holds 240.0.0.0/4).
#[test]
fn routes_that_hold_forwarded_destinations() {
    for prefix in [
        "0.0.0.0/0",
        "224.0.0.0/3",
        "192.0.0.0/2",
        "240.0.0.0/4",
        "169.254.0.0/15",
        "126.0.0.0/7",
        "::/0",
        "fe00::/7",
        "fec0::/10",
        "::fffe:0:0/95",
        "::/128",
    ] {
        let config = ok(&route_prefix(prefix));
        assert_eq!(config.routes[0].prefix.to_string(), prefix);
    }
}

/// A group no route sends traffic to is valid (a route may come with the
/// next reload) but warned about at its name, in file order with the rest.
#[test]
fn groups_no_route_uses_are_warned_about() {
    let text = with_groups(
        &[
            ("a", "eth1", "10.0.0.1"),
            ("b", "eth2", "10.0.0.2"),
            ("c", "eth3", "10.0.0.3"),
        ],
        "[[route]]\nprefix = \"10.2.0.0/16\"\ngroup = \"b\"\n",
    );
    assert_eq!(
        warnings(&text),
        [
            "configs/x.toml:4:8: warning: group \"a\" is used by no route",
            "configs/x.toml:10:8: warning: group \"c\" is used by no route",
        ]
    );
    let mode = text.replacen("name = \"c\"\n", "name = \"c\"\nspray = \"all\"\n", 1);
    assert_eq!(
        warnings(&mode)[1..],
        [
            "configs/x.toml:10:8: warning: group \"c\" is used by no route",
            "configs/x.toml:11:9: warning: group \"c\": spray has no effect while the mode is \
             ecmp",
        ]
    );
}
