//! The data plane's state as a config would make it, built in memory:
//! `explain --config` with no instance (a config tried before it is
//! deployed, on any machine, without root). The tables are the daemon's
//! own ([`Tables::build`]), read map by map as the program reads the maps
//! they are written to, so explain walks the same `lb-common` code either
//! way. What only a running box knows is assumed, and said
//! ([`Offline::assumptions`]): every next hop up, qualities at their
//! default, no flowlet state, cursors and recent loads at zero, one CPU,
//! no address of the box's own, no ingress MAC checked.

use std::collections::BTreeSet;
use std::net::IpAddr;

use lb_common::abi::{GroupEntry, NEXTHOP_USABLE, NextHop, NextHopStats, OverrideEntry, PortMacs};
use lb_common::limits::{
    BUCKETS_PER_GROUP, CLASS_LOAD_ROWS, MAX_GROUPS, MAX_NEXTHOPS, MAX_OVERRIDES_PER_GROUP,
    SPRAY_ROWS,
};
use lb_common::route::table::{entry_value, lookup_entry, or_trie};
use lb_common::select::flowlet::FlowletState;
use lb_common::select::load::{RecentLoad, load_epoch};
use lb_common::select::overrides::override_index;

use super::interfaces::Interfaces;
use super::view::{MapView, Result};
use crate::config::{Config, NextHopAddr, NextHopSpec};
use crate::dataplane::tables::route_table::{Family, Layout, PoolFull};
use crate::dataplane::tables::{GroupTable, Tables, TablesError};

/// Why a config's tables cannot be built in memory.
#[derive(Debug, thiserror::Error)]
pub enum OfflineError {
    #[error(transparent)]
    Tables(#[from] TablesError),
    #[error(transparent)]
    RouteTable(#[from] PoolFull),
}

/// A config's tables, as fresh maps would hold them once written.
pub struct Offline {
    tables: Tables,
    route4: Layout,
    route6: Layout,
    /// The config's interfaces, numbered from 1 in its order.
    interfaces: Interfaces,
    /// Ingress ports whose MACs were given ([`Self::with_port`]).
    ports: Vec<PortMacs>,
    flowlet_capacity: u32,
    /// What the config leaves to a running box, said in the notes.
    unknown: Vec<String>,
}

impl Offline {
    /// The tables `config` makes, with every next hop up: through its
    /// configured MAC, or an unresolved one (all zeros) for an address.
    pub fn build(config: &Config) -> std::result::Result<Self, OfflineError> {
        let interfaces = interfaces(config);
        let up = |spec: &NextHopSpec| NextHop {
            ifindex: interfaces.index(&spec.interface).unwrap_or(0),
            vlan: spec.vlan.unwrap_or(0),
            flags: NEXTHOP_USABLE,
            dst_mac: match spec.addr {
                NextHopAddr::Mac(mac) => mac,
                NextHopAddr::Ip(_) => [0; 6],
            },
            src_mac: [0; 6],
        };
        let tables = Tables::build_with_ports(config, None, up, &|name| interfaces.index(name))?;
        Self::of(config, tables, interfaces)
    }

    /// The tables `config` makes, each next hop as `resolve` makes it (as
    /// [`Tables::build`] takes it): the state of a box whose next hops
    /// are known otherwise.
    pub fn with_nexthops(
        config: &Config,
        resolve: impl FnMut(&NextHopSpec) -> NextHop,
    ) -> std::result::Result<Self, OfflineError> {
        let interfaces = interfaces(config);
        let tables =
            Tables::build_with_ports(config, None, resolve, &|name| interfaces.index(name))?;
        Self::of(config, tables, interfaces)
    }

    /// `config`'s `tables`, its interfaces numbered as `interfaces`.
    fn of(
        config: &Config,
        tables: Tables,
        interfaces: Interfaces,
    ) -> std::result::Result<Self, OfflineError> {
        let learning = (config.groups.iter())
            .filter(|g| g.learns_routes())
            .map(|g| {
                format!(
                    "group {:?} learns its routes from the box: none here",
                    g.name
                )
            });
        let skipped = (tables.override_skips.iter())
            .map(|(name, why)| format!("override {name:?} takes no effect: {why}"));
        let unknown = learning.chain(skipped).collect();
        let (route4, route6) = layouts(&tables)?;
        Ok(Self {
            route4,
            route6,
            tables,
            interfaces,
            ports: Vec::new(),
            flowlet_capacity: config.switch.flowlet_table_size,
            unknown,
        })
    }

    /// These tables with `addrs` as the box's own addresses, which the
    /// config does not say (the daemon takes them from the kernel).
    pub fn with_local(mut self, addrs: &BTreeSet<IpAddr>) -> std::result::Result<Self, PoolFull> {
        self.tables.set_local(addrs);
        (self.route4, self.route6) = layouts(&self.tables)?;
        Ok(self)
    }

    /// These tables with ingress port `port`'s MACs, which the config
    /// does not say (the daemon reads them from the port).
    pub fn with_port(mut self, port: PortMacs) -> Self {
        self.ports.retain(|p| p.ifindex != port.ifindex);
        self.ports.push(port);
        self
    }

    /// The ifindex these tables give interface `name`.
    pub fn ifindex(&self, name: &str) -> Option<u32> {
        self.interfaces.index(name)
    }

    /// The interfaces by the ifindexes these tables give them.
    pub fn interfaces(&self) -> Interfaces {
        self.interfaces.clone()
    }

    /// What these tables assume of the state only a running box has, and
    /// the overrides that take no effect: the notes an explanation from
    /// them carries.
    pub fn assumptions(&self) -> Vec<String> {
        let mut notes = vec![
            "explained from the config alone, with no instance: every next hop up, path \
             qualities at their default (no telemetry), no flowlet state (each packet its \
             flow's first), spray cursors and recent loads at zero, CPU 0; interfaces \
             numbered in the config's order"
                .to_owned(),
        ];
        if self.ports.is_empty() {
            notes.push(
                "MACs only a running box knows show as 00:00:00:00:00:00 (the ports' own, \
                 next hops' given by address), and no frame is refused as another host's"
                    .to_owned(),
            );
        }
        if self.tables.local().is_empty() {
            notes.push("no address is taken as the box's own".to_owned());
        }
        notes.extend(self.config_notes().iter().cloned());
        notes
    }

    /// What the config leaves without effect here: groups that learn
    /// their routes from the box, overrides that take no effect.
    pub fn config_notes(&self) -> &[String] {
        &self.unknown
    }

    /// The config's groups, as the tables hold them.
    pub fn groups(&self) -> &[GroupTable] {
        &self.tables.groups
    }

    fn group(&self, id: u32) -> Option<&GroupTable> {
        self.tables.groups.iter().find(|g| g.id == id)
    }
}

/// The config's interfaces numbered from 1 in its order: the ingress
/// ports, then the next hops' egress ports not among them.
fn interfaces(config: &Config) -> Interfaces {
    let mut names = config.switch.interfaces.clone();
    for spec in config.groups.iter().flat_map(|g| &g.next_hops) {
        if !names.contains(&spec.interface) {
            names.push(spec.interface.clone());
        }
    }
    Interfaces::numbered(names)
}

/// The IPv4 and IPv6 route tables `tables` place in fresh maps.
fn layouts(tables: &Tables) -> std::result::Result<(Layout, Layout), PoolFull> {
    Ok((
        tables.route_layout(Family::V4)?,
        tables.route_layout(Family::V6)?,
    ))
}

/// An entry of an array map of `size` entries: what fresh maps hold
/// (zeros) where these tables wrote nothing, `None` past the map.
fn array<T: Default>(index: u32, size: u32, written: Option<T>) -> Option<T> {
    (index < size).then(|| written.unwrap_or_default())
}

impl MapView for Offline {
    fn group_at(&self, id: u32) -> Result<Option<GroupEntry>> {
        Ok(array(id, MAX_GROUPS, self.group(id).map(|g| g.entry)))
    }

    /// The group's overrides in the half its entry names, and changed
    /// ones an ECMP group waits to flip to in the other.
    fn override_at(&self, index: u32) -> Result<Option<OverrideEntry>> {
        let size = MAX_GROUPS * 2 * MAX_OVERRIDES_PER_GROUP;
        let written = self.tables.groups.iter().find_map(|g| {
            let halves = std::iter::once((g.entry.override_half, &g.overrides))
                .chain(g.pending.as_ref().map(|p| (p.half, &p.overrides)));
            halves.into_iter().find_map(|(half, overrides)| {
                (0u32..)
                    .zip(overrides)
                    .find(|(i, _)| override_index(g.id, half, *i) == index)
                    .map(|(_, (_, entry))| *entry)
            })
        });
        Ok(array(index, size, written))
    }

    fn nexthop(&self, id: u32) -> Result<Option<NextHop>> {
        let written = self.tables.nexthops.get(id as usize).copied();
        Ok(array(id, MAX_NEXTHOPS, written))
    }

    fn quality(&self, index: u32) -> Result<u32> {
        Ok(self
            .tables
            .quality
            .get(index as usize)
            .copied()
            .unwrap_or(0))
    }

    fn bucket(&self, index: u32) -> Result<Option<u32>> {
        let (group, bucket) = (index / BUCKETS_PER_GROUP, index % BUCKETS_PER_GROUP);
        let written = self.group(group).map(|g| g.buckets[bucket as usize]);
        Ok(array(index, MAX_GROUPS * BUCKETS_PER_GROUP, written))
    }

    fn spray_slot(&self, index: u32) -> Result<Option<u32>> {
        let (row, position) = (index / BUCKETS_PER_GROUP, index % BUCKETS_PER_GROUP);
        let written = (self.tables.groups.iter())
            .flat_map(|g| g.sprays())
            .find(|(r, _)| *r == row)
            .map(|(_, sequence)| sequence[position as usize]);
        Ok(array(index, SPRAY_ROWS * BUCKETS_PER_GROUP, written))
    }

    fn port_macs(&self, ifindex: u32) -> Result<Option<PortMacs>> {
        Ok(self.ports.iter().find(|p| p.ifindex == ifindex).copied())
    }

    /// Only those [`Self::with_port`] gave.
    fn knows_port_macs(&self) -> bool {
        !self.ports.is_empty()
    }

    /// Every next hop's port: the daemon puts them all in the devmap.
    fn has_port(&self, ifindex: u32) -> Result<bool> {
        Ok(self.tables.ports().contains(&ifindex))
    }

    fn route(&self, dst: &[u8]) -> Result<Option<u32>> {
        let raw = match <[u8; 4]>::try_from(dst) {
            Ok(v4) => lookup_entry(&self.route4, &v4),
            Err(_) => {
                let mut v6 = [0; 16];
                v6.copy_from_slice(&dst[..16]);
                // The trie's longest match, as the kernel's lookup finds it.
                or_trie(lookup_entry(&self.route6, &v6), || {
                    (self.tables.trie_entries().into_iter())
                        .filter(|((addr, len), _)| covers(*addr, *len, &v6))
                        .max_by_key(|((_, len), _)| *len)
                        .map(|(_, value)| value)
                })
            }
        };
        Ok(entry_value(raw))
    }

    fn route_prefixes(&self, ipv6: bool) -> Result<Vec<(IpAddr, u8)>> {
        Ok((self.tables.trie_entries().into_keys())
            .filter(|(addr, _)| addr.is_ipv6() == ipv6)
            .collect())
    }

    fn epochs(&self, len: u64) -> Result<Vec<u64>> {
        Ok(vec![load_epoch(len)])
    }

    fn nexthop_stats(&self, id: u32) -> Result<Option<Vec<NextHopStats>>> {
        Ok(array(id, MAX_NEXTHOPS, None).map(|s| vec![s]))
    }

    fn peer_loads(&self, id: u32) -> Result<Option<Vec<u64>>> {
        Ok(array(id, MAX_NEXTHOPS, None).map(|l| vec![l]))
    }

    fn class_loads(&self, index: u32) -> Result<Option<Vec<RecentLoad>>> {
        Ok(array(index, CLASS_LOAD_ROWS, None).map(|l| vec![l]))
    }

    fn class_peer_loads(&self, index: u32) -> Result<Option<Vec<u64>>> {
        Ok(array(index, CLASS_LOAD_ROWS, None).map(|l| vec![l]))
    }

    fn spray_cursor(&self, _row: u32) -> Result<Vec<u64>> {
        Ok(vec![0])
    }

    fn flowlet(&self, index: u32) -> Result<Option<Vec<FlowletState>>> {
        Ok(array(index, self.flowlet_capacity, None).map(|s| vec![s]))
    }

    fn flowlet_capacity(&self) -> u32 {
        self.flowlet_capacity
    }
}

/// Whether `addr/len` covers the 16-byte address `dst`.
fn covers(addr: IpAddr, len: u8, dst: &[u8; 16]) -> bool {
    let IpAddr::V6(addr) = addr else {
        return false;
    };
    let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
    u128::from(addr) & mask == u128::from_be_bytes(*dst) & mask
}
