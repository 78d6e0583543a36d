//! The data-plane tables a config turns into, and writing them to the maps.

use std::collections::BTreeSet;
use std::net::IpAddr;

use lb_common::{
    buckets::rebalance,
    maps::{BUCKETS_PER_GROUP, GroupEntry, NEXTHOP_USABLE, NO_NEXTHOP, NextHop},
};

use crate::config::{Config, NextHopAddr, Prefix};
use crate::dataplane::{Dataplane, DataplaneError};

/// One group: its settings, its next-hop ids and its bucket table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupTable {
    pub name: String,
    pub entry: GroupEntry,
    pub members: Vec<u32>,
    pub buckets: Vec<u32>,
}

/// Everything the maps hold for one config. Next-hop ids number the
/// config's next hops in order, group by group; group ids are config order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tables {
    pub nexthops: Vec<NextHop>,
    pub groups: Vec<GroupTable>,
    pub routes: Vec<(Prefix, u32)>,
}

impl Tables {
    /// Builds the tables for `config` given each next hop's resolved form
    /// (in config order; unusable ones without [`NEXTHOP_USABLE`]).
    pub fn build(config: &Config, nexthops: Vec<NextHop>) -> Self {
        let mut next_id = 0u32;
        let groups = config
            .groups
            .iter()
            .map(|group| {
                let members: Vec<u32> = (next_id..).take(group.next_hops.len()).collect();
                next_id += members.len() as u32;
                let mut table = GroupTable {
                    name: group.name.clone(),
                    entry: GroupEntry {
                        in_use: 1,
                        hash_fields: group.hash_fields.0,
                        hash_seed: config.switch.hash_seed,
                    },
                    members,
                    buckets: vec![NO_NEXTHOP; BUCKETS_PER_GROUP as usize],
                };
                table.rebalance(&nexthops);
                table
            })
            .collect();
        let routes = config
            .routes
            .iter()
            .map(|r| (r.prefix, r.group as u32))
            .collect();
        Self {
            nexthops,
            groups,
            routes,
        }
    }

    /// Replaces next hop `id` and moves only the buckets that must move.
    /// Returns whether anything changed.
    pub fn update_nexthop(&mut self, id: u32, nexthop: NextHop) -> bool {
        let Some(slot) = self.nexthops.get_mut(id as usize) else {
            return false;
        };
        if *slot == nexthop {
            return false;
        }
        *slot = nexthop;
        let nexthops = &self.nexthops;
        for group in self.groups.iter_mut().filter(|g| g.members.contains(&id)) {
            group.rebalance(nexthops);
        }
        true
    }

    /// Egress ports the devmap must hold.
    pub fn ports(&self) -> BTreeSet<u32> {
        self.nexthops
            .iter()
            .filter(|n| n.ifindex != 0)
            .map(|n| n.ifindex)
            .collect()
    }

    /// Writes every entry that differs from `previous` (everything when
    /// `None`), in an order that never exposes a half-built path: next hops
    /// and ports first, then buckets, groups, and routes last.
    pub fn write(
        &self,
        dp: &mut Dataplane,
        previous: Option<&Tables>,
    ) -> Result<(), DataplaneError> {
        for (id, nexthop) in (0u32..).zip(&self.nexthops) {
            if previous.and_then(|p| p.nexthops.get(id as usize)) != Some(nexthop) {
                dp.set_nexthop(id, *nexthop)?;
            }
        }
        let old_ports = previous.map(Tables::ports).unwrap_or_default();
        for port in self.ports().difference(&old_ports) {
            dp.add_port(*port)?;
        }
        for (id, group) in (0u32..).zip(&self.groups) {
            let old = previous.and_then(|p| p.groups.get(id as usize));
            dp.write_buckets(id, old.map(|g| g.buckets.as_slice()), &group.buckets)?;
            if old.map(|g| g.entry) != Some(group.entry) {
                dp.set_group(id, group.entry)?;
            }
        }
        for (prefix, group) in &self.routes {
            match prefix.addr {
                IpAddr::V4(a) => dp.set_route_v4(a.octets(), prefix.len, *group)?,
                IpAddr::V6(a) => dp.set_route_v6(a.octets(), prefix.len, *group)?,
            }
        }
        let Some(previous) = previous else {
            return Ok(());
        };
        for (prefix, _) in &previous.routes {
            if !self.routes.iter().any(|(p, _)| p == prefix) {
                match prefix.addr {
                    IpAddr::V4(a) => dp.remove_route_v4(a.octets(), prefix.len)?,
                    IpAddr::V6(a) => dp.remove_route_v6(a.octets(), prefix.len)?,
                }
            }
        }
        for port in old_ports.difference(&self.ports()) {
            dp.remove_port(*port)?;
        }
        Ok(())
    }
}

/// Next hops for a config whose next hops all give a MAC, all leaving
/// through `ifindex` with source MAC `src_mac`, all usable: the data plane
/// without a kernel to resolve anything, for tests and benchmarks run with
/// BPF_PROG_TEST_RUN (which transmits nothing).
pub fn static_nexthops(config: &Config, ifindex: u32, src_mac: [u8; 6]) -> Vec<NextHop> {
    config
        .groups
        .iter()
        .flat_map(|g| &g.next_hops)
        .map(|spec| NextHop {
            ifindex,
            vlan: spec.vlan.unwrap_or(0),
            flags: if matches!(spec.addr, NextHopAddr::Mac(_)) {
                NEXTHOP_USABLE
            } else {
                0
            },
            dst_mac: match spec.addr {
                NextHopAddr::Mac(mac) => mac,
                NextHopAddr::Ip(_) => [0; 6],
            },
            src_mac,
        })
        .collect()
}

impl GroupTable {
    fn rebalance(&mut self, nexthops: &[NextHop]) {
        let live: Vec<u32> = self
            .members
            .iter()
            .copied()
            .filter(|&id| nexthops[id as usize].flags & NEXTHOP_USABLE != 0)
            .collect();
        rebalance(&mut self.buckets, &live);
    }
}
