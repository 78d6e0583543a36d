//! Id stability across reloads: what lets a live change rewrite the maps
//! entry by entry without a bucket or route ever naming somebody else's
//! next hop.

use std::collections::BTreeSet;
use std::path::Path;

use lb_common::abi::{NEXTHOP_USABLE, NextHop};

use super::Tables;
use crate::config::{self, Config};

/// A config of `groups`, each a name and its next hops' IPs (all on
/// `eth1`), with one route per group.
fn config(groups: &[(&str, &[&str])]) -> Config {
    let mut text = String::from("[switch]\ninterfaces = [\"eth0\"]\n");
    for (name, ips) in groups {
        text.push_str(&format!("[[group]]\nname = \"{name}\"\nnext_hops = ["));
        for ip in *ips {
            text.push_str(&format!("{{ interface = \"eth1\", ip = \"{ip}\" }},"));
        }
        text.push_str("]\n");
    }
    for (i, (name, _)) in groups.iter().enumerate() {
        text.push_str(&format!(
            "[[route]]\nprefix = \"198.19.{i}.0/24\"\ngroup = \"{name}\"\n"
        ));
    }
    config::parse(&text, Path::new("tables.toml")).expect("valid config")
}

fn build(config: &Config, previous: Option<&Tables>) -> Tables {
    Tables::build(config, previous, |_| NextHop::default()).expect("tables")
}

/// The id of group `name`.
fn group(tables: &Tables, name: &str) -> u32 {
    tables.groups.iter().find(|g| g.name == name).unwrap().id
}

/// The id of next hop `ip` in group `name`.
fn nexthop(tables: &Tables, name: &str, ip: &str) -> u32 {
    let g = tables.groups.iter().find(|g| g.name == name).unwrap();
    let at = g
        .specs
        .iter()
        .position(|s| s.to_string() == format!("eth1 {ip}"));
    g.members[at.unwrap_or_else(|| panic!("no {ip} in {name}: {:?}", g.specs))]
}

fn group_ids(tables: &Tables) -> BTreeSet<u32> {
    tables.groups.iter().map(|g| g.id).collect()
}

fn nexthop_ids(tables: &Tables) -> BTreeSet<u32> {
    tables
        .groups
        .iter()
        .flat_map(|g| g.members.clone())
        .collect()
}

const A: &str = "198.18.1.2";
const B: &str = "198.18.2.2";
const C: &str = "198.18.3.2";
const D: &str = "198.18.4.2";
const E: &str = "198.18.5.2";

#[test]
fn ids_stay_while_group_and_spec_stay() {
    let old = build(&config(&[("spines", &[A, B, C]), ("other", &[D])]), None);
    // Reordered, one next hop gone, one new; the other group untouched and
    // listed first now.
    let new = build(
        &config(&[("other", &[D]), ("spines", &[C, E, A])]),
        Some(&old),
    );
    for name in ["spines", "other"] {
        assert_eq!(group(&new, name), group(&old, name), "group {name}");
    }
    for (name, ip) in [("spines", A), ("spines", C), ("other", D)] {
        assert_eq!(nexthop(&new, name, ip), nexthop(&old, name, ip), "{ip}");
    }
    // Routes follow their group's id, not its position.
    let route_groups: Vec<u32> = new.routes.iter().map(|(_, g)| *g).collect();
    assert_eq!(
        route_groups,
        vec![group(&old, "other"), group(&old, "spines")]
    );
    // The same config again changes nothing at all.
    let again = build(
        &config(&[("other", &[D]), ("spines", &[C, E, A])]),
        Some(&new),
    );
    assert_eq!(again, new);
}

#[test]
fn new_groups_and_next_hops_get_ids_nobody_held() {
    let old = build(&config(&[("spines", &[A, B]), ("other", &[C])]), None);
    let new = build(
        &config(&[("spines", &[A, B, E]), ("other", &[C]), ("added", &[D])]),
        Some(&old),
    );
    assert!(!group_ids(&old).contains(&group(&new, "added")));
    for (name, ip) in [("spines", E), ("added", D)] {
        assert!(
            !nexthop_ids(&old).contains(&nexthop(&new, name, ip)),
            "{name} {ip} took an id the running tables use"
        );
    }
    // A spec in two groups is two next hops.
    let shared = build(&config(&[("spines", &[A]), ("other", &[A])]), None);
    assert_ne!(nexthop(&shared, "spines", A), nexthop(&shared, "other", A));
}

#[test]
fn a_changed_spec_is_a_new_next_hop() {
    let old = build(&config(&[("spines", &[A, B])]), None);
    let new = build(&config(&[("spines", &[A, E])]), Some(&old));
    assert_eq!(nexthop(&new, "spines", A), nexthop(&old, "spines", A));
    assert_ne!(nexthop(&new, "spines", E), nexthop(&old, "spines", B));
}

#[test]
fn no_id_freed_by_a_reload_goes_to_another_group_in_it() {
    let old = build(&config(&[("gone", &[A, B]), ("kept", &[C])]), None);
    // "gone" is replaced in the same reload by a group of the same next
    // hops: while the maps are rewritten, old routes and buckets still
    // name the old ids, so the new group must not take them.
    let new = build(&config(&[("kept", &[C]), ("came", &[A, B])]), Some(&old));
    assert_ne!(group(&new, "came"), group(&old, "gone"));
    let old_gone: BTreeSet<u32> = [A, B].map(|ip| nexthop(&old, "gone", ip)).into();
    for ip in [A, B] {
        assert!(!old_gone.contains(&nexthop(&new, "came", ip)), "{ip}");
    }
    assert_eq!(nexthop(&new, "kept", C), nexthop(&old, "kept", C));
    // Once that reload is done the ids are free again: there are only
    // MAX_GROUPS and MAX_NEXTHOPS of them.
    let later = build(
        &config(&[("kept", &[C]), ("came", &[A, B]), ("third", &[D, E])]),
        Some(&new),
    );
    assert_eq!(group(&later, "third"), group(&old, "gone"));
    let third: BTreeSet<u32> = [D, E].map(|ip| nexthop(&later, "third", ip)).into();
    assert_eq!(third, old_gone);
}

/// A next hop as a link up with a known MAC makes it.
fn usable(last: u8) -> NextHop {
    NextHop {
        ifindex: 7,
        flags: NEXTHOP_USABLE,
        dst_mac: [2, 0, 0, 0, 0, last],
        ..NextHop::default()
    }
}

#[test]
fn a_next_hop_that_goes_and_comes_back_moves_only_its_own_buckets() {
    let config = config(&[("spines", &[A, B, C, D])]);
    let mut tables = Tables::build(&config, None, |_| usable(1)).expect("tables");
    let all_up = tables.groups[0].buckets.clone();
    let c = nexthop(&tables, "spines", C);
    assert!(tables.update_nexthop(c, NextHop::default()));
    let down = tables.groups[0].buckets.clone();
    let others: BTreeSet<u32> = [A, B, D].map(|ip| nexthop(&tables, "spines", ip)).into();
    for (i, (was, now)) in all_up.iter().zip(&down).enumerate() {
        if *was == c {
            assert!(others.contains(now), "bucket {i} of C went to {now}");
        } else {
            assert_eq!(now, was, "bucket {i} was not C's and moved");
        }
    }
    // C's buckets are shared out evenly.
    let share = |id: u32| down.iter().filter(|&&b| b == id).count();
    let counts: Vec<usize> = others.iter().map(|&id| share(id)).collect();
    assert!(
        counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1,
        "{counts:?}"
    );
    // Back: exactly the buckets it had, so the flows moved away come
    // back and no other moves.
    assert!(tables.update_nexthop(c, usable(1)));
    assert_eq!(tables.groups[0].buckets, all_up);
    // A new MAC is no change of membership: no bucket moves.
    assert!(tables.update_nexthop(c, usable(9)));
    assert_eq!(tables.groups[0].buckets, all_up);
}

#[test]
fn a_next_hop_down_at_a_reload_still_comes_back_to_its_own_buckets() {
    let config = config(&[("spines", &[A, B, C, D])]);
    let tables = Tables::build(&config, None, |_| usable(1)).expect("tables");
    let all_up = tables.groups[0].buckets.clone();
    let c_spec = |s: &crate::config::NextHopSpec| s.to_string() == format!("eth1 {C}");
    let reloaded = Tables::build(&config, Some(&tables), |s| {
        if c_spec(s) {
            NextHop::default()
        } else {
            usable(1)
        }
    })
    .expect("tables");
    let mut back = reloaded.clone();
    assert!(back.update_nexthop(nexthop(&back, "spines", C), usable(1)));
    assert_eq!(back.groups[0].buckets, all_up);
}

#[test]
fn a_switch_to_ecmp_drains_for_eight_gaps_through_later_reloads() {
    use crate::config::Mode;
    use lb_common::select::flowlet::{MODE_ECMP, MODE_PER_PACKET};
    use std::time::{Duration, Instant};
    let with_mode = |mode| {
        let mut c = config(&[("spines", &[A, B])]);
        c.groups[0].mode = mode;
        c.groups[0].flowlet_gap_us = 1000;
        c
    };
    let drain = |t: &Tables| (t.groups[0].entry.draining, t.groups[0].drain_until);
    let spraying = build(&with_mode(Mode::PerPacket), None);
    assert_eq!(drain(&spraying), (MODE_ECMP, None));
    let before = Instant::now();
    let draining = build(&with_mode(Mode::Ecmp), Some(&spraying));
    let after = Instant::now();
    let (from, until) = drain(&draining);
    assert_eq!(from, MODE_PER_PACKET);
    let until = until.expect("a drain's end");
    let eight_gaps = Duration::from_millis(8);
    assert!(before + eight_gaps <= until && until <= after + eight_gaps);
    // A reload that keeps ECMP neither restarts nor ends it.
    let still = build(&with_mode(Mode::Ecmp), Some(&draining));
    assert_eq!(drain(&still), (MODE_PER_PACKET, Some(until)));
    // ECMP that never drained does not start one; a flowlet mode ends it.
    assert_eq!(
        drain(&build(&with_mode(Mode::Ecmp), None)),
        (MODE_ECMP, None)
    );
    let back = build(&with_mode(Mode::Flowlet), Some(&still));
    assert_eq!(drain(&back), (MODE_ECMP, None));
    assert_eq!(
        back.groups[0].entry.generation,
        spraying.groups[0].entry.generation
    );
}
