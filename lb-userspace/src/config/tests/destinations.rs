//! A group's `destinations`.

use super::{err, ok, with_next_hop};
use crate::config::{Destination, Prefix};

/// A remote group "g" (its next hop on line 6) with `destinations` on
/// line 7 (column 1), routed at 10.0.0.0/8.
fn with_destinations(destinations: &str) -> String {
    with_next_hop(
        "ip = \"10.0.0.1\", telemetry_url = \"http://10.0.0.1:9100/metrics\", \
         telemetry_device = \"eth9\"",
    )
    .replace("name = \"g\"", "name = \"g\"\ntelemetry = \"remote\"")
    .replace("}]\n", &format!("}}]\ndestinations = {destinations}\n"))
}

fn prefix(text: &str) -> Prefix {
    Prefix::parse(text).expect("prefix")
}

/// Each destination with its prefixes and device; a route takes the
/// destination of the longest of their prefixes that covers it.
#[test]
fn destinations_and_the_routes_they_take() {
    let config = ok(&with_destinations(
        "[{ name = \"leaf2\", prefixes = [\"10.2.0.0/16\", \"10.20.0.0/16\"], \
         telemetry_device = \"l2\" }, { name = \"rack2a\", prefixes = [\"10.2.1.0/24\"], \
         telemetry_device = \"{interface}-a\" }]",
    ));
    let group = &config.groups[0];
    assert_eq!(
        group.destinations,
        [
            Destination {
                name: "leaf2".into(),
                prefixes: vec![prefix("10.2.0.0/16"), prefix("10.20.0.0/16")],
                telemetry_device: "l2".into(),
            },
            Destination {
                name: "rack2a".into(),
                prefixes: vec![prefix("10.2.1.0/24")],
                telemetry_device: "{interface}-a".into(),
            },
        ]
    );
    assert_eq!(group.destination_of(prefix("10.2.0.0/16")), Some(0));
    assert_eq!(group.destination_of(prefix("10.20.3.0/24")), Some(0));
    assert_eq!(group.destination_of(prefix("10.2.1.128/25")), Some(1));
    // A route wider than a destination, or outside all: the next hops'
    // own quality.
    assert_eq!(group.destination_of(prefix("10.0.0.0/8")), None);
    assert_eq!(group.destination_of(prefix("10.3.0.0/16")), None);
}

#[test]
fn destinations_are_refused_where_they_cannot_be_read() {
    let linux = with_next_hop("ip = \"10.0.0.1\"").replace(
        "name = \"g\"",
        "name = \"g\"\ntelemetry = \"linux\"\ndestinations = [{ name = \"a\", prefixes = \
         [\"10.2.0.0/16\"], telemetry_device = \"l2\" }]",
    );
    assert_eq!(
        err(&linux),
        "configs/x.toml:6:16: destinations rate next hops by the next switch's queue toward \
         each destination: group \"g\" needs telemetry = \"remote\", or \"counters-db\" with \
         each next hop's counters_db (the next switch's, or in a group that learns its next \
         hops the group's template)"
    );
    let dup = with_destinations(
        "[{ name = \"a\", prefixes = [\"10.2.0.0/16\"], telemetry_device = \"l2\" }, \
         { name = \"a\", prefixes = [\"10.3.0.0/16\"], telemetry_device = \"l3\" }]",
    );
    assert!(
        err(&dup).starts_with(
            "configs/x.toml:7:95: duplicate destination \"a\" in group \"g\" (first at line 7, column 26)"
        ),
        "{}",
        err(&dup)
    );
    let shared = with_destinations(
        "[{ name = \"a\", prefixes = [\"10.2.0.0/16\"], telemetry_device = \"l2\" }, \
         { name = \"b\", prefixes = [\"10.2.0.0/16\"], telemetry_device = \"l3\" }]",
    );
    assert!(
        err(&shared).contains("duplicate prefix 10.2.0.0/16 among group \"g\"'s destinations"),
        "{}",
        err(&shared)
    );
    let empty = with_destinations("[{ name = \"a\", prefixes = [], telemetry_device = \"l2\" }]");
    assert!(
        err(&empty).ends_with("destination \"a\" of group \"g\" has no prefixes"),
        "{}",
        err(&empty)
    );
    let brace = with_destinations(
        "[{ name = \"a\", prefixes = [\"10.2.0.0/16\"], telemetry_device = \"{leaf}\" }]",
    );
    assert!(
        err(&brace).contains("telemetry_device \"{leaf}\": only {ip}"),
        "{}",
        err(&brace)
    );
    let host_bits = with_destinations(
        "[{ name = \"a\", prefixes = [\"10.2.0.1/16\"], telemetry_device = \"l2\" }]",
    );
    assert!(
        err(&host_bits).contains("10.2.0.1/16"),
        "{}",
        err(&host_bits)
    );
}
