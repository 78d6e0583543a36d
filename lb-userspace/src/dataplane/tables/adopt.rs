//! What a pinned instance's maps hold, read back as the tables a config
//! would have made, so that a daemon taking the instance over builds its
//! own against them and writes only what differs: buckets, flowlet
//! generations and path qualities stay where the data plane has them, and
//! whatever the maps hold that the config no longer has is removed. The
//! IPv4 route table is read back as placed, so the new one keeps its
//! blocks and is written as a diff like the rest.
//!
//! Ids are deterministic: a config's groups and next hops take ids in
//! config order, so the daemon that pinned an instance gave the same
//! config the same ids. A group whose pinned entry has other members
//! (ids moved by reloads before the restart) is read back as gone and
//! gets its tables written whole.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::time::Instant;

use aya::maps::MapError;
use lb_common::abi::{self as names, GroupEntry, NextHop};
use lb_common::limits::{
    BUCKETS_PER_GROUP, LOCAL_ROUTE, MAX_GROUPS, MAX_NEXTHOPS, MAX_OVERRIDES_PER_GROUP,
};
use lb_common::route::Destination;
use lb_common::select::flowlet::MODE_ECMP;
use lb_common::select::overrides::override_index;

use super::overrides::GroupOverrides;
use super::route_table::{Family, Layout};
use super::{ClassTable, GroupTable, Placed, Tables, host_len};
use crate::config::Prefix;
use crate::dataplane::loader::map_err;
use crate::dataplane::{Dataplane, DataplaneError};

fn read<T>(name: &'static str, got: Result<T, MapError>) -> Result<T, DataplaneError> {
    got.map_err(map_err(name))
}

/// One row (a group's, or a class's spray sequence) of a per-group table.
fn slice(
    map: &aya::maps::Array<aya::maps::MapData, u32>,
    name: &'static str,
    row: u32,
) -> Result<Vec<u32>, DataplaneError> {
    let base = row * BUCKETS_PER_GROUP;
    (base..base + BUCKETS_PER_GROUP)
        .map(|i| read(name, map.get(&i, 0)))
        .collect()
}

impl Tables {
    /// The tables `dp`'s maps hold, aligned with `fresh` (the config's own
    /// tables built without a previous): same group names, specs and ids
    /// where the maps agree with them.
    pub fn read_back(dp: &Dataplane, fresh: &Tables) -> Result<Tables, DataplaneError> {
        let mut nexthops = (0..MAX_NEXTHOPS)
            .map(|id| read(names::NEXTHOPS, dp.maps.nexthops.get(&id, 0)))
            .collect::<Result<Vec<NextHop>, _>>()?;
        let used = nexthops
            .iter()
            .rposition(|n| *n != NextHop::default())
            .map_or(0, |last| last + 1);
        nexthops.truncate(used.max(fresh.nexthops.len()));
        let quality = (0..nexthops.len().max(fresh.quality.len()) as u32)
            .map(|index| read(names::PATH_QUALITY, dp.maps.path_quality.get(&index, 0)))
            .collect::<Result<Vec<u32>, _>>()?;

        let mut groups = Vec::new();
        let mut next_generation = fresh.next_generation;
        for id in 0..MAX_GROUPS {
            let entry: GroupEntry = read(names::GROUPS, dp.maps.groups.get(&id, 0))?;
            if entry.in_use == 0 {
                continue;
            }
            next_generation = next_generation.max(entry.generation.saturating_add(1));
            let members = &entry.members[..entry.member_count as usize];
            let same = fresh
                .groups
                .iter()
                .find(|g| g.id == id && g.members == members);
            let (name, specs) = match same {
                Some(g) => (g.name.clone(), g.specs.clone()),
                // No config group by that name: what reads it back as gone.
                None => (format!("pinned group {id}"), Vec::new()),
            };
            groups.push(GroupTable {
                id,
                name,
                entry,
                members: if same.is_some() {
                    members.to_vec()
                } else {
                    Vec::new()
                },
                specs,
                buckets: slice(&dp.maps.buckets, names::BUCKETS, id)?,
                // Not in the maps: the config's own, which a fresh build
                // gives the same member order.
                home: same.map(|g| g.home.clone()).unwrap_or_default(),
                spray: slice(&dp.maps.spray, names::SPRAY, id)?,
                // The config's classes, each with the sequence its row
                // holds: ids are deterministic, as the groups' are.
                classes: (same.into_iter().flat_map(|g| &g.classes))
                    .map(|class| {
                        let row = Destination {
                            group: id,
                            class: class.id,
                        }
                        .spray_row();
                        let spray = slice(&dp.maps.spray, names::SPRAY, row)?;
                        Ok(ClassTable {
                            spray,
                            ..class.clone()
                        })
                    })
                    .collect::<Result<_, DataplaneError>>()?,
                // The deadline of a drain the last daemon started is not
                // in the maps: the drain ends now.
                drain_until: (entry.draining != MODE_ECMP).then(Instant::now),
                // Nor which next hops left before the restart.
                former: Vec::new(),
                overrides: held_overrides(dp, id, &entry, same)?,
                // Overrides not yet flipped to were the last daemon's to
                // wait for; the config's are set again from the ones held.
                pending: None,
            });
        }

        let mut routes = Vec::new();
        let mut local = BTreeSet::new();
        let v4 = dp.maps.routes_v4.iter().map(|entry| {
            read(names::ROUTES_V4, entry)
                .map(|(k, v)| (IpAddr::V4(Ipv4Addr::from(k.data())), k.prefix_len(), v))
        });
        let v6 = dp.maps.routes_v6.iter().map(|entry| {
            read(names::ROUTES_V6, entry)
                .map(|(k, v)| (IpAddr::V6(Ipv6Addr::from(k.data())), k.prefix_len(), v))
        });
        for entry in v4.chain(v6) {
            let (addr, len, value) = entry?;
            let len = len as u8;
            if value == LOCAL_ROUTE && len == host_len(addr) {
                local.insert(addr);
            } else {
                routes.push((Prefix { addr, len }, value));
            }
        }
        let route4 =
            Layout::read_back::<4, _>(|level, index| dp.route_entry(Family::V4, level, index))?;
        let route6 =
            Layout::read_back::<16, _>(|level, index| dp.route_entry(Family::V6, level, index))?;
        Ok(Tables {
            nexthops,
            quality,
            groups,
            routes,
            local,
            next_generation,
            route4: Placed(Arc::new(route4).into()),
            route6: Placed(Arc::new(route6).into()),
            override_skips: Vec::new(),
        })
    }
}

/// The overrides group `id`'s entry names, as the maps hold them; named
/// as `same` names them where they are its, so a daemon taking over keeps
/// the half and its counters.
fn held_overrides(
    dp: &Dataplane,
    id: u32,
    entry: &GroupEntry,
    same: Option<&GroupTable>,
) -> Result<GroupOverrides, DataplaneError> {
    let mut held = Vec::new();
    for i in 0..entry.override_count.min(MAX_OVERRIDES_PER_GROUP) {
        held.push(dp.override_entry(override_index(id, entry.override_half, i))?);
    }
    Ok(match same {
        Some(g) if g.overrides.iter().map(|(_, e)| *e).eq(held.iter().copied()) => {
            g.overrides.clone()
        }
        _ => held.into_iter().map(|e| (String::new(), e)).collect(),
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use lb_common::abi::NEXTHOP_USABLE;

    use super::*;
    use crate::config::{self, Config};
    use crate::dataplane::tables::route_table::Level;

    fn usable(_: &crate::config::NextHopSpec) -> NextHop {
        NextHop {
            flags: NEXTHOP_USABLE,
            dst_mac: [2, 0, 0, 0, 0, 1],
            ..NextHop::default()
        }
    }

    /// Group `g` over three next hops in `mode`, routes to it from
    /// `prefixes`.
    fn config(mode: &str, prefixes: &[&str]) -> Config {
        let mut text = format!(
            "[switch]\ninterfaces = [\"eth0\"]\n[[group]]\nname = \"g\"\nmode = \"{mode}\"\n\
             next_hops = [{{ interface = \"eth1\", ip = \"10.0.0.1\" }}, \
             {{ interface = \"eth1\", ip = \"10.0.0.2\" }}, \
             {{ interface = \"eth1\", ip = \"10.0.0.3\" }}]\n"
        );
        for prefix in prefixes {
            text.push_str(&format!(
                "[[route]]\nprefix = \"{prefix}\"\ngroup = \"g\"\n"
            ));
        }
        config::parse(&text, Path::new("adopt.toml")).expect("valid config")
    }

    fn build(config: &Config, previous: Option<&Tables>) -> Tables {
        Tables::build(config, previous, usable).expect("tables")
    }

    /// A daemon that took its tables through a mode change (a new flowlet
    /// generation) and a next hop lost and back (moved buckets) leaves
    /// maps that a fresh build of the same config does not match; built
    /// against what the maps hold, the restarted daemon's tables are the
    /// running ones exactly, and a route the new config dropped is
    /// removed from the trie.
    #[test]
    fn a_restart_builds_the_tables_the_maps_hold() {
        let mut dp = Dataplane::load(1024).expect("load (needs root)");
        let routes = ["198.19.0.0/16", "198.20.0.0/16"];
        let ecmp = build(&config("ecmp", &routes), None);
        ecmp.write(&mut dp, None).expect("write");
        let mut running = build(&config("flowlet", &routes), Some(&ecmp));
        running.write(&mut dp, Some(&ecmp)).expect("write");
        let before = running.clone();
        running.update_nexthop(1, NextHop::default());
        running.update_nexthop(1, usable(&running.groups[0].specs[1]));
        running.write(&mut dp, Some(&before)).expect("write");

        let restarted = config("flowlet", &routes);
        let fresh = build(&restarted, None);
        assert_ne!(fresh, running, "a fresh build already matches");
        let held = Tables::read_back(&dp, &fresh).expect("read back");
        assert_eq!(build(&restarted, Some(&held)), running);

        let fewer = config("flowlet", &routes[..1]);
        let held = Tables::read_back(&dp, &build(&fewer, None)).expect("read back");
        let tables = build(&fewer, Some(&held));
        tables.write(&mut dp, Some(&held)).expect("write");
        let key = |a: [u8; 4]| aya::maps::lpm_trie::Key::new(16, a);
        assert_eq!(
            dp.maps.routes_v4.get(&key([198, 19, 0, 0]), 0).ok(),
            Some(0)
        );
        assert!(dp.maps.routes_v4.get(&key([198, 20, 0, 0]), 0).is_err());
    }

    /// The data plane's IPv4 table, read the way the program reads it.
    struct Table<'a>(&'a Dataplane);

    impl lb_common::route::table::Levels for Table<'_> {
        fn first(&self, index: u32) -> Option<u32> {
            self.0
                .route_entry(Family::V4, Level::First, index)
                .ok()
                .flatten()
        }
        fn pool(&self, index: u32) -> Option<u32> {
            self.0
                .route_entry(Family::V4, Level::Pool, index)
                .ok()
                .flatten()
        }
    }

    /// Local addresses come and go in the table the program reads, and a
    /// restart reads that table back as placed: the new daemon's table
    /// keeps every block where it is.
    #[test]
    fn local_addresses_reach_the_table_and_a_restart_reads_it_back() {
        use lb_common::route::table::lookup;
        let mut dp = Dataplane::load(1024).expect("load (needs root)");
        let routes = ["198.19.0.0/16", "198.20.0.0/24"];
        let one = |a: &str| BTreeSet::from([a.parse::<IpAddr>().expect("address")]);
        let mut running = build(&config("ecmp", &routes), None);
        running.set_local(&one("198.19.7.1"));
        running.write(&mut dp, None).expect("write");
        let at = |dp: &Dataplane, a: [u8; 4]| lookup(&Table(dp), &a);
        assert_eq!(at(&dp, [198, 19, 7, 1]), Some(LOCAL_ROUTE));
        assert_eq!(at(&dp, [198, 19, 7, 2]), Some(0));
        assert_eq!(at(&dp, [198, 20, 0, 9]), Some(0));
        assert_eq!(at(&dp, [198, 20, 1, 0]), None);

        let before = running.clone();
        running.set_local(&one("198.20.0.9"));
        running.write(&mut dp, Some(&before)).expect("write");
        assert_eq!(at(&dp, [198, 19, 7, 1]), Some(0));
        assert_eq!(at(&dp, [198, 20, 0, 9]), Some(LOCAL_ROUTE));

        let restarted = config("ecmp", &routes);
        let held = Tables::read_back(&dp, &build(&restarted, None)).expect("read back");
        assert_eq!(held.local(), running.local());
        let mut tables = build(&restarted, Some(&held));
        tables.set_local(&one("198.20.0.9"));
        tables.write(&mut dp, Some(&held)).expect("write");
        let placed = |t: &Tables| t.route4.0.get().cloned().expect("placed");
        assert_eq!(placed(&held), placed(&running));
        assert_eq!(placed(&tables), placed(&running));
    }
}
