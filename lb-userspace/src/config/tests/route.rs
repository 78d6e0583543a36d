//! The `[[route]]` tables: prefixes and the groups they name.

use super::{err, ok, route_prefix, with_groups, with_route};

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
