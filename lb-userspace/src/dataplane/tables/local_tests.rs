//! The box's own addresses in the route tries: over the config's routes,
//! shadowing one with the same key only while they exist, kept by a reload.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use lb_common::limits::{LOCAL_ROUTE, MAX_LOCAL_ROUTES};

use super::{RouteKey, Tables, static_nexthop};
use crate::config::{self, Config};

fn config(routes: &[&str]) -> Config {
    let mut text = String::from(
        "[switch]\ninterfaces = [\"eth0\"]\n\n[[group]]\nname = \"up\"\n\
         next_hops = [{ interface = \"eth1\", mac = \"02:00:00:00:00:01\" }]\n",
    );
    for prefix in routes {
        text.push_str(&format!(
            "\n[[route]]\nprefix = \"{prefix}\"\ngroup = \"up\"\n"
        ));
    }
    config::parse(&text, "local.toml".as_ref()).expect("valid config")
}

fn build(config: &Config, previous: Option<&Tables>) -> Tables {
    Tables::build(config, previous, |spec| {
        static_nexthop(spec, 2, [2, 0, 0, 0, 0, 9])
    })
    .expect("tables")
}

fn addrs(list: &[&str]) -> BTreeSet<IpAddr> {
    list.iter().map(|a| a.parse().expect("address")).collect()
}

fn entries(list: &[(&str, u8, u32)]) -> BTreeMap<RouteKey, u32> {
    list.iter()
        .map(|(a, len, v)| ((a.parse().expect("address"), *len), *v))
        .collect()
}

#[test]
fn local_addresses_are_host_routes_over_the_default_route() {
    let mut tables = build(&config(&["0.0.0.0/0", "::/0"]), None);
    let group = tables.groups[0].id;
    assert_eq!(tables.set_local(&addrs(&["198.18.200.1", "fd00::1"])), 0);
    assert_eq!(
        tables.trie_entries(),
        entries(&[
            ("0.0.0.0", 0, group),
            ("198.18.200.1", 32, LOCAL_ROUTE),
            ("::", 0, group),
            ("fd00::1", 128, LOCAL_ROUTE),
        ])
    );
    assert_eq!(tables.shadowed(), vec![]);
}

#[test]
fn a_route_with_a_local_key_is_shadowed_while_the_address_exists() {
    let mut tables = build(&config(&["198.18.200.1/32", "198.18.0.0/16"]), None);
    let group = tables.groups[0].id;
    tables.set_local(&addrs(&["198.18.200.1"]));
    assert_eq!(
        tables.trie_entries(),
        entries(&[("198.18.0.0", 16, group), ("198.18.200.1", 32, LOCAL_ROUTE)])
    );
    assert_eq!(
        tables
            .shadowed()
            .iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>(),
        ["198.18.200.1/32"]
    );
    tables.set_local(&BTreeSet::new());
    assert_eq!(
        tables.trie_entries(),
        entries(&[("198.18.0.0", 16, group), ("198.18.200.1", 32, group)])
    );
    assert_eq!(tables.shadowed(), vec![]);
}

#[test]
fn a_reload_keeps_the_local_addresses() {
    let mut old = build(&config(&["0.0.0.0/0"]), None);
    old.set_local(&addrs(&["10.0.0.1", "10.0.0.255"]));
    let new = build(&config(&["0.0.0.0/0", "10.9.0.0/16"]), Some(&old));
    assert_eq!(new.local(), old.local());
    let group = new.groups[0].id;
    assert_eq!(
        new.trie_entries(),
        entries(&[
            ("0.0.0.0", 0, group),
            ("10.0.0.1", 32, LOCAL_ROUTE),
            ("10.0.0.255", 32, LOCAL_ROUTE),
            ("10.9.0.0", 16, group),
        ])
    );
}

#[test]
fn each_family_keeps_at_most_the_tries_room_for_local_addresses() {
    let mut tables = build(&config(&["0.0.0.0/0"]), None);
    let v4 = (0..MAX_LOCAL_ROUTES + 3).map(|i| IpAddr::from((0x0a00_0000 + i).to_be_bytes()));
    let many: BTreeSet<IpAddr> = v4.chain(["fd00::1".parse().expect("address")]).collect();
    assert_eq!(tables.set_local(&many), 3);
    assert_eq!(tables.local().len(), MAX_LOCAL_ROUTES as usize + 1);
    assert!(
        tables
            .local()
            .contains(&"fd00::1".parse::<IpAddr>().expect("address"))
    );
}
