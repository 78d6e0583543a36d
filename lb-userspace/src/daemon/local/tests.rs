//! What the follower makes of the kernel's addresses and their events.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};

use super::Follower;
use crate::netlink::{Address, AddressEvent};

fn follower() -> Follower {
    Follower {
        known: BTreeMap::new(),
        events: None,
        stale: false,
    }
}

fn address(ifindex: u32, addr: &str, prefix_len: u8, broadcast: Option<&str>) -> Address {
    Address {
        ifindex,
        addr: addr.parse().expect("address"),
        prefix_len,
        broadcast: broadcast.map(|b| b.parse().expect("broadcast")),
    }
}

fn set(addrs: &[&str]) -> BTreeSet<IpAddr> {
    addrs.iter().map(|a| a.parse().expect("address")).collect()
}

#[test]
fn addresses_their_broadcasts_and_subnet_broadcasts_are_local() {
    let mut f = follower();
    f.replace(
        vec![
            address(1, "127.0.0.1", 8, None),
            address(2, "198.18.101.254", 24, Some("198.18.101.255")),
            address(3, "10.0.0.1", 31, None),
            address(3, "10.9.0.1", 32, None),
            address(4, "192.0.2.1", 30, Some("192.0.2.7")),
            address(2, "fd00::254", 64, None),
            address(2, "fe80::1", 64, None),
        ],
        false,
    );
    assert_eq!(
        f.local(),
        set(&[
            "10.0.0.1",
            "10.9.0.1",
            "127.0.0.1",
            "127.255.255.255",
            "192.0.2.1",
            "192.0.2.3",
            "192.0.2.7",
            "198.18.101.254",
            "198.18.101.255",
            "fd00::254",
            "fe80::1",
        ])
    );
}

#[test]
fn an_address_on_two_ports_stays_local_until_both_are_gone() {
    let mut f = follower();
    let on_lo = address(1, "198.18.200.1", 32, None);
    let on_eth = address(2, "198.18.200.1", 32, None);
    assert!(f.apply(AddressEvent::Added(on_lo)));
    assert!(f.apply(AddressEvent::Added(on_eth)));
    assert!(f.apply(AddressEvent::Removed(on_lo)));
    assert_eq!(f.local(), set(&["198.18.200.1"]));
    assert!(f.apply(AddressEvent::Removed(on_eth)));
    assert_eq!(f.local(), BTreeSet::new());
}

#[test]
fn a_re_announced_address_changes_nothing_and_an_unknown_removal_neither() {
    let mut f = follower();
    let a = address(2, "fd00::254", 64, None);
    assert!(f.apply(AddressEvent::Added(a)));
    // IPv6 addresses are announced again as DAD finishes.
    assert!(!f.apply(AddressEvent::Added(a)));
    assert!(!f.apply(AddressEvent::Removed(address(2, "fd00::1", 64, None))));
    assert_eq!(f.local(), set(&["fd00::254"]));
}

#[test]
fn a_new_broadcast_replaces_the_old_one() {
    let mut f = follower();
    assert!(f.apply(AddressEvent::Added(address(
        2,
        "10.0.0.1",
        16,
        Some("10.0.0.255")
    ))));
    assert!(f.apply(AddressEvent::Added(address(
        2,
        "10.0.0.1",
        16,
        Some("10.0.255.255")
    ))));
    assert_eq!(f.local(), set(&["10.0.0.1", "10.0.255.255"]));
}

#[test]
fn lost_events_make_the_addresses_stale_until_read_again() {
    let mut f = follower();
    assert!(!f.apply(AddressEvent::Lost));
    assert!(f.stale);
    f.replace(vec![address(1, "10.0.0.1", 32, None)], true);
    assert!(!f.stale);
    assert_eq!(f.local(), set(&["10.0.0.1"]));
    assert_eq!(
        f.known.keys().next(),
        Some(&(1, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 32))
    );
}
