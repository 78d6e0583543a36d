//! The data-plane tables a config turns into, and writing them to the maps.
//!
//! Ids are stable across reloads: a group keeps its id as long as its name
//! stays, a next hop as long as its group and spec stay, and an id a reload
//! frees is not handed out by that same reload. So a live config change
//! never points an old route or bucket at somebody else's next hop while
//! the maps are being rewritten.
//!
//! The routes also hold the box's own addresses, as /32 and /128 routes
//! to [`LOCAL_ROUTE`]: the longest match finds them in the one lookup a
//! packet already makes. A configured route with the very same key is
//! shadowed while the address exists and comes back when it goes. IPv6
//! routes go to an LPM trie; IPv4 routes to the fixed-stride table
//! ([`route_table`]) and, as a record for `explain` and restarts, to a
//! trie the program does not read.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use lb_common::{
    abi::{GroupEntry, NEXTHOP_USABLE, NextHop},
    limits::{
        BUCKETS_PER_GROUP, LOCAL_ROUTE, MAX_GROUPS, MAX_LOCAL_ROUTES, MAX_NEXTHOPS, NO_NEXTHOP,
        ROUTE4_POOL_BLOCKS, ROUTE6_POOL_BLOCKS,
    },
    route::{Destination, class_load_index, quality_index},
    select::buckets::{SprayLayout, fit, sequence_phase, spray_sequence},
    select::choice,
    select::flowlet::MODE_ECMP,
};

use super::{Dataplane, DataplaneError};
use crate::config::{Config, Mode, NextHopAddr, NextHopSpec, Prefix};
pub use classes::ClassTable;
pub use drains::DRAIN_GAPS;
use drains::drain;
use former::Former;
use ids::Ids;
use overrides::{GroupOverrides, PendingPins};
use route_table::{Family, Layout};
use tracing::{info, warn};

/// One group: its id, settings, next-hop ids (config order) and the
/// bucket and spray tables over them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupTable {
    pub id: u32,
    pub name: String,
    pub entry: GroupEntry,
    pub members: Vec<u32>,
    /// The members' specs, same order.
    pub specs: Vec<NextHopSpec>,
    pub buckets: Vec<u32>,
    /// Each bucket's next hop while every member is usable: where a bucket
    /// goes back to when its next hop does.
    pub home: Vec<u32>,
    pub spray: Vec<u32>,
    /// Its destinations, in config order.
    pub classes: Vec<ClassTable>,
    /// While `entry.draining`: when the drain ends.
    pub drain_until: Option<Instant>,
    /// Next hops that left the set, and their homes then.
    pub former: Former,
    /// The group's overrides in match order, in `entry.override_half`.
    pub overrides: GroupOverrides,
    /// An ECMP group's changed overrides, waiting in the other half.
    pub pending: Option<PendingPins>,
}

/// Everything the maps hold for one config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tables {
    /// By next-hop id; ids no next hop holds are all zeros (not usable).
    pub nexthops: Vec<NextHop>,
    /// By [`quality_index`] (class, next-hop id): path quality,
    /// [`PATH_QUALITY_DEFAULT`](lb_common::select::flowlet::PATH_QUALITY_DEFAULT)
    /// until telemetry says otherwise; 0 for
    /// unused entries.
    pub quality: Vec<u32>,
    /// In config order.
    pub groups: Vec<GroupTable>,
    /// Prefix -> route value (group id and class, [`Destination::value`]),
    /// from the config (or, for benchmarks, added before the tables are
    /// first written: the IPv4 table is placed then).
    pub routes: Vec<(Prefix, u32)>,
    /// The box's own addresses and IPv4 subnet broadcasts, routed to
    /// [`LOCAL_ROUTE`]; kept across reloads.
    local: BTreeSet<IpAddr>,
    /// The next flowlet generation to hand out.
    next_generation: u32,
    /// The IPv4 route table as placed in the maps.
    route4: Placed,
    /// The IPv6 route table as placed in the maps, or left to the trie.
    route6: Placed,
    /// Overrides of the config that take no effect, and why.
    pub override_skips: Vec<(String, String)>,
}

/// A compiled route table as placed in the maps: fixed at the tables'
/// first write, compiled against what the maps held then (the previous
/// tables' placement), or read back from the maps. Not part of what the
/// tables are, so never compared: equal tables may place blocks
/// differently.
#[derive(Clone, Default)]
struct Placed(OnceLock<Arc<Layout>>);

impl PartialEq for Placed {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Placed {}

impl std::fmt::Debug for Placed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.get().fmt(f)
    }
}

/// A route trie's key: address and prefix length.
type RouteKey = (IpAddr, u8);

/// Why a config's tables cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum TablesError {
    #[error(
        "cannot keep both the old and the new {what} while switching: the two configs \
         need more than {max} ids between them; apply the change in two steps"
    )]
    OutOfIds { what: &'static str, max: u32 },
}

impl Tables {
    /// Builds the tables for `config`, each next hop as `resolve` makes it
    /// (unusable ones without [`NEXTHOP_USABLE`]), keeping the ids of
    /// `previous` where groups and next hops stay; overrides' ingress
    /// ports by this machine's interfaces.
    pub fn build(
        config: &Config,
        previous: Option<&Tables>,
        resolve: impl FnMut(&NextHopSpec) -> NextHop,
    ) -> Result<Self, TablesError> {
        Self::build_with_ports(config, previous, resolve, &crate::netlink::ifindex)
    }

    /// [`Self::build`] with overrides' ingress ports numbered by `port`
    /// (interface name to ifindex): tables built for a box other than
    /// this one, as `explain --config` and `simulate` build them.
    pub fn build_with_ports(
        config: &Config,
        previous: Option<&Tables>,
        mut resolve: impl FnMut(&NextHopSpec) -> NextHop,
        port: &dyn Fn(&str) -> Option<u32>,
    ) -> Result<Self, TablesError> {
        let old_groups: HashMap<&str, &GroupTable> = previous
            .map(|p| p.groups.iter().map(|g| (g.name.as_str(), g)).collect())
            .unwrap_or_default();
        let names: Vec<&str> = config.groups.iter().map(|g| g.name.as_str()).collect();
        let group_ids = Ids::new(
            old_groups.iter().map(|(n, g)| (*n, g.id)).collect(),
            MAX_GROUPS,
            "groups",
        )
        .ids(&names)?;

        // Next hops are the same next hop when group and spec are.
        let mut old_nexthops = HashMap::new();
        if let Some(previous) = previous {
            for group in &previous.groups {
                for (spec, &id) in group.specs.iter().zip(&group.members) {
                    old_nexthops.insert((group.name.clone(), spec.clone()), id);
                }
            }
        }
        let keys: Vec<(String, NextHopSpec)> = config
            .groups
            .iter()
            .flat_map(|g| g.next_hops.iter().map(|s| (g.name.clone(), s.clone())))
            .collect();
        let ids = Ids::new(old_nexthops, MAX_NEXTHOPS, "next hops").ids(&keys)?;
        let len = ids.iter().max().map_or(0, |m| *m as usize + 1);
        let mut nexthops = vec![NextHop::default(); len];
        for (&id, (_, spec)) in ids.iter().zip(&keys) {
            nexthops[id as usize] = resolve(spec);
        }
        let mut ids = ids.into_iter();
        let group_members: Vec<Vec<u32>> = (config.groups.iter())
            .map(|g| ids.by_ref().take(g.next_hops.len()).collect())
            .collect();
        let mut group_classes = classes::build(config, previous)?;
        let quality = classes::qualities(&group_members, &group_classes, previous);

        let mut next_generation = previous.map_or(1, |p| p.next_generation);
        let mut groups = Vec::with_capacity(config.groups.len());
        let (mut group_overrides, override_skips) = overrides::resolve(config, port);
        for ((((group, id), overrides), members), classes) in config
            .groups
            .iter()
            .zip(group_ids)
            .zip(group_overrides.drain(..))
            .zip(group_members)
            .zip(group_classes.drain(..))
        {
            let old = old_groups.get(group.name.as_str());
            // Flowlet state made before a spell of ECMP must not steer
            // flows ECMP has been forwarding since; a drain keeps the state
            // current, so a group back from one keeps it.
            let flowlet_state_current =
                |old: &GroupTable| old.entry.mode != MODE_ECMP || old.entry.draining != MODE_ECMP;
            let moving = overrides::moving(old.copied(), group.mode, &overrides);
            let generation = match old {
                Some(old)
                    if flowlet_state_current(old) || (group.mode == Mode::Ecmp && !moving) =>
                {
                    old.entry.generation
                }
                _ => {
                    let g = next_generation;
                    next_generation = next_generation.checked_add(1).unwrap_or(1);
                    g
                }
            };
            let mut entry = GroupEntry {
                in_use: 1,
                hash_fields: group.hash_fields.0,
                hash_seed: config.switch.hash_seed,
                mode: group.mode.code(),
                spray: group.spray.code(),
                choice: group.flowlet_choice.code(),
                draw_flow_mask: choice::draw_flow_mask(group.flowlet_choice.code()),
                generation,
                flowlet_gap_ns: u64::from(group.flowlet_gap_us) * 1000,
                member_count: members.len() as u32,
                ..GroupEntry::default()
            };
            let (draining, mut drain_until) = drain(old.copied(), group.mode, group.flowlet_gap_us);
            entry.draining = draining;
            let (overrides, pending) = overrides::place_set(
                old.copied(),
                moving,
                overrides,
                &mut entry,
                &mut drain_until,
                Instant::now(),
            );
            entry.members[..members.len()].copy_from_slice(&members);
            // Homes move only when members or weights do: a reload's or
            // the kernel's routes', not a link's.
            let mut home = old.map_or_else(
                || vec![NO_NEXTHOP; BUCKETS_PER_GROUP as usize],
                |o| o.home.clone(),
            );
            let former = former::remember(old.copied(), &group.next_hops, &members, &mut home);
            weights::rebalance_weighted(&mut home, &members, &group.weights);
            let mut table = GroupTable {
                id,
                name: group.name.clone(),
                entry,
                members,
                specs: group.next_hops.clone(),
                // Starting from the old buckets keeps flows where they were.
                buckets: old.map_or_else(
                    || vec![NO_NEXTHOP; BUCKETS_PER_GROUP as usize],
                    |o| o.buckets.clone(),
                ),
                home,
                spray: vec![NO_NEXTHOP; BUCKETS_PER_GROUP as usize],
                classes,
                drain_until,
                former,
                overrides,
                pending,
            };
            table.rebalance(&nexthops, &quality);
            groups.push(table);
        }
        let routes = config
            .routes
            .iter()
            .map(|r| {
                let group: &GroupTable = &groups[r.group];
                let class = (config.groups[r.group].destination_of(r.prefix))
                    .map_or(0, |d| group.classes[d].id);
                let destination = Destination {
                    group: group.id,
                    class,
                };
                (r.prefix, destination.value())
            })
            .collect();
        Ok(Self {
            nexthops,
            quality,
            groups,
            routes,
            local: previous.map(|p| p.local.clone()).unwrap_or_default(),
            next_generation,
            route4: Placed::default(),
            route6: Placed::default(),
            override_skips,
        })
    }

    /// Makes `addrs` the box's own addresses, up to [`MAX_LOCAL_ROUTES`] of
    /// each family (the trie's room beyond the config's routes; the lowest
    /// are kept). Returns how many were left out.
    pub fn set_local(&mut self, addrs: &BTreeSet<IpAddr>) -> usize {
        let cap = MAX_LOCAL_ROUTES as usize;
        let v4 = addrs.iter().filter(|a| a.is_ipv4()).take(cap);
        let v6 = addrs.iter().filter(|a| a.is_ipv6()).take(cap);
        let local: BTreeSet<IpAddr> = v4.chain(v6).copied().collect();
        if local != self.local {
            self.local = local;
            self.route4 = Placed::default();
            self.route6 = Placed::default();
        }
        addrs.len() - self.local.len()
    }

    pub fn local(&self) -> &BTreeSet<IpAddr> {
        &self.local
    }

    /// Configured routes a local address shadows.
    pub fn shadowed(&self) -> Vec<Prefix> {
        self.routes
            .iter()
            .map(|(prefix, _)| *prefix)
            .filter(|p| self.local.contains(&p.addr) && p.len == host_len(p.addr))
            .collect()
    }

    /// What the route tries hold: the config's routes, then the local
    /// addresses over them.
    pub fn trie_entries(&self) -> BTreeMap<RouteKey, u32> {
        let config = self.routes.iter().map(|(p, g)| ((p.addr, p.len), *g));
        let local = self.local.iter().map(|&a| ((a, host_len(a)), LOCAL_ROUTE));
        config.chain(local).collect()
    }

    /// Gives group `name`, new in these tables, the homes and buckets
    /// group `from` of `previous` had, next hop for next hop (by spec),
    /// then fits them to its own members and `weights`: a group split off
    /// another (routes that took a new set of next hops before the rest)
    /// keeps their flows where they were.
    pub fn inherit(&mut self, previous: &Tables, name: &str, from: &str, weights: &[u32]) {
        let Some(old) = previous.groups.iter().find(|g| g.name == from) else {
            return;
        };
        let (nexthops, quality) = (&self.nexthops, &self.quality);
        let Some(group) = self.groups.iter_mut().find(|g| g.name == name) else {
            return;
        };
        let same = |old_id: u32| {
            let slot = old.members.iter().position(|&m| m == old_id)?;
            let at = group.specs.iter().position(|s| *s == old.specs[slot])?;
            Some(group.members[at])
        };
        let map = |ids: &[u32]| -> Vec<u32> {
            ids.iter()
                .map(|&id| same(id).unwrap_or(NO_NEXTHOP))
                .collect()
        };
        group.home = map(&old.home);
        group.buckets = map(&old.buckets);
        weights::rebalance_weighted(&mut group.home, &group.members, weights);
        group.rebalance(nexthops, quality);
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
        let (nexthops, quality) = (&self.nexthops, &self.quality);
        for group in self.groups.iter_mut().filter(|g| g.members.contains(&id)) {
            group.rebalance(nexthops, quality);
        }
        true
    }

    /// The next hops of groups that choose by load (flowlet and
    /// per-packet), each once, in id order.
    pub fn dynamic_members(&self) -> Vec<u32> {
        let members: BTreeSet<u32> = (self.groups.iter())
            .filter(|g| g.entry.mode != MODE_ECMP)
            .flat_map(|g| g.members.iter().copied())
            .collect();
        members.into_iter().collect()
    }

    /// The class loads ([`class_load_index`]) of the classes of groups
    /// that choose by load, over each of their members' slots.
    pub fn dynamic_class_loads(&self) -> Vec<u32> {
        let mut indices: Vec<u32> = (self.groups.iter())
            .filter(|g| g.entry.mode != MODE_ECMP)
            .flat_map(|g| {
                let slots = 0..g.members.len() as u32;
                (g.classes.iter()).flat_map(move |class| {
                    slots.clone().map(|slot| class_load_index(class.id, slot))
                })
            })
            .collect();
        indices.sort_unstable();
        indices
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
    /// `None`), in an order that never exposes a half-built path: next hops,
    /// qualities and ports first, then buckets, spray sequences and groups,
    /// next hops that went unusable once nothing points at them, routes
    /// after them, and what the new config dropped last.
    pub fn write(
        &self,
        dp: &mut Dataplane,
        previous: Option<&Tables>,
    ) -> Result<(), DataplaneError> {
        let old_nexthop = |id: usize| previous.and_then(|p| p.nexthops.get(id));
        // A next hop that stops being usable keeps its flag until no bucket
        // or spray slot points at it any more: a packet that found it
        // flagged first would go to the kernel (`no_nexthop`), which
        // forwards it on its own hash or drops it.
        let going_down = |id: usize, nexthop: &NextHop| {
            nexthop.flags & NEXTHOP_USABLE == 0
                && old_nexthop(id).is_some_and(|old| old.flags & NEXTHOP_USABLE != 0)
        };
        let changed = || {
            (0u32..)
                .zip(&self.nexthops)
                .filter(|&(id, nexthop)| old_nexthop(id as usize) != Some(nexthop))
        };
        for (id, nexthop) in changed().filter(|&(id, n)| !going_down(id as usize, n)) {
            dp.set_nexthop(id, *nexthop)?;
        }
        for (index, &quality) in (0u32..).zip(&self.quality) {
            if previous.and_then(|p| p.quality.get(index as usize)) != Some(&quality) {
                dp.set_path_quality(index, quality)?;
            }
        }
        let old_ports = previous.map(Tables::ports).unwrap_or_default();
        for port in self.ports().difference(&old_ports) {
            dp.add_port(*port)?;
        }
        let old_group = |id: u32| previous.and_then(|p| p.groups.iter().find(|g| g.id == id));
        for group in &self.groups {
            let old = old_group(group.id);
            dp.write_buckets(group.id, old.map(|g| g.buckets.as_slice()), &group.buckets)?;
            let was: Vec<(u32, &[u32])> = old.map(|g| g.sprays().collect()).unwrap_or_default();
            group.write_sprays(dp, &was)?;
            let same_half = old.is_some_and(|old| {
                old.entry.override_half == group.entry.override_half
                    && old.overrides == group.overrides
            });
            if !same_half {
                // The half the group entry does not name yet, whole, then
                // the entry; its counters start again with it.
                dp.write_override_half(group.id, group.entry.override_half, &group.overrides)?;
            }
            if let Some(p) = group.pending.as_ref()
                && old
                    .and_then(|o| o.pending.as_ref())
                    .map(|o| (o.half, &o.overrides))
                    != Some((p.half, &p.overrides))
            {
                dp.write_override_half(group.id, p.half, &p.overrides)?;
            }
            if old.map(|g| g.entry) != Some(group.entry) {
                dp.set_group(group.id, group.entry)?;
            }
        }
        for (id, nexthop) in changed().filter(|&(id, n)| going_down(id as usize, n)) {
            dp.set_nexthop(id, *nexthop)?;
        }
        let routes = self.trie_entries();
        let old_routes = previous.map(Tables::trie_entries).unwrap_or_default();
        for (&(addr, len), value) in &routes {
            if old_routes.get(&(addr, len)) != Some(value) {
                dp.set_route(addr, len, *value)?;
            }
        }
        self.write_route_table(dp, previous, Family::V4)?;
        self.write_route_table(dp, previous, Family::V6)?;
        let Some(previous) = previous else {
            return Ok(());
        };
        for &(addr, len) in old_routes.keys() {
            if !routes.contains_key(&(addr, len)) {
                dp.remove_route(addr, len)?;
            }
        }
        for old in &previous.groups {
            if !self.groups.iter().any(|g| g.id == old.id) {
                dp.set_group(old.id, GroupEntry::default())?;
            }
        }
        for id in self.nexthops.len()..previous.nexthops.len() {
            dp.set_nexthop(id as u32, NextHop::default())?;
        }
        for index in self.quality.len()..previous.quality.len() {
            dp.set_path_quality(index as u32, 0)?;
        }
        for port in old_ports.difference(&self.ports()) {
            dp.remove_port(*port)?;
        }
        Ok(())
    }
}

impl Tables {
    /// `family`'s route table as placed.
    fn placed(&self, family: Family) -> &Placed {
        match family {
            Family::V4 => &self.route4,
            Family::V6 => &self.route6,
        }
    }

    /// The routes and local addresses of the family of `N`-byte addresses.
    fn family_routes<const N: usize>(&self) -> BTreeMap<([u8; N], u8), u32> {
        self.trie_entries()
            .into_iter()
            .filter_map(|((addr, len), value)| {
                let octets: [u8; N] = match addr {
                    IpAddr::V4(a) => a.octets().as_slice().try_into().ok()?,
                    IpAddr::V6(a) => a.octets().as_slice().try_into().ok()?,
                };
                Some(((octets, len), value))
            })
            .collect()
    }

    /// `family`'s route table compiled into a pool of its map's size, as
    /// the tables' first write into fresh maps places it: for a lookup
    /// over memory. An IPv6 table that does not fit leaves its routes to
    /// the trie, as that write does.
    pub fn route_layout(&self, family: Family) -> Result<Layout, route_table::PoolFull> {
        let room = match family {
            Family::V4 => ROUTE4_POOL_BLOCKS,
            Family::V6 => ROUTE6_POOL_BLOCKS,
        };
        match self.compile_routes(family, None, room) {
            Err(_) if family == Family::V6 => Ok(Layout::in_trie()),
            compiled => compiled,
        }
    }

    /// `family`'s routes compiled into a pool of `room` blocks, keeping
    /// `previous`'s blocks where their paths stay.
    fn compile_routes(
        &self,
        family: Family,
        previous: Option<&Layout>,
        room: u32,
    ) -> Result<Layout, route_table::PoolFull> {
        match family {
            Family::V4 => Layout::compile(&self.family_routes::<4>(), previous, room),
            Family::V6 => Layout::compile(&self.family_routes::<16>(), previous, room),
        }
    }

    /// Writes `family`'s route table: placed against `previous`'s the
    /// first time, then as placed (a rollback writes the old tables back
    /// over the new ones as the old ones had them). An IPv6 table that
    /// does not fit its pool beside the running one leaves the routes to
    /// the trie (written before this), said once, until a later table
    /// fits; an IPv4 table always fits.
    fn write_route_table(
        &self,
        dp: &mut Dataplane,
        previous: Option<&Tables>,
        family: Family,
    ) -> Result<(), DataplaneError> {
        let old = previous
            .and_then(|p| p.placed(family).0.get())
            .map(|l| &**l);
        let placed = self.placed(family);
        let layout = match placed.0.get() {
            // Tables not placed never wrote an entry of the table: undoing
            // them (these tables were the maps' before) writes none.
            Some(_) if previous.is_some() && old.is_none() => return Ok(()),
            Some(layout) => layout.clone(),
            None => {
                let room = dp.route_pool_blocks(family)?;
                let layout = match self.compile_routes(family, old, room) {
                    Ok(layout) => layout,
                    Err(full) if family == Family::V6 => {
                        if !old.is_some_and(Layout::is_in_trie) {
                            warn!(
                                "{full}: the IPv6 routes are looked up in the trie (slower) \
                                 until a later change fits the table"
                            );
                        }
                        Layout::in_trie()
                    }
                    Err(full) => return Err(DataplaneError::RouteTable(full)),
                };
                placed.0.get_or_init(|| Arc::new(layout)).clone()
            }
        };
        if old.is_some_and(Layout::is_in_trie) && !layout.is_in_trie() {
            info!("the IPv6 routes fit their table again");
        }
        for (level, index, raw) in layout.writes(old) {
            dp.set_route_entry(family, level, index, raw)?;
        }
        Ok(())
    }
}

/// The prefix length that covers `addr` alone.
fn host_len(addr: IpAddr) -> u8 {
    match addr {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    }
}

/// Next hops for a config whose next hops all give a MAC, all leaving
/// through `ifindex` with source MAC `src_mac`, all usable: the data plane
/// without a kernel to resolve anything, for tests and benchmarks run with
/// BPF_PROG_TEST_RUN (which transmits nothing).
pub fn static_nexthop(spec: &NextHopSpec, ifindex: u32, src_mac: [u8; 6]) -> NextHop {
    let mac = match spec.addr {
        NextHopAddr::Mac(mac) => Some(mac),
        NextHopAddr::Ip(_) => None,
    };
    NextHop {
        ifindex,
        vlan: spec.vlan.unwrap_or(0),
        flags: if mac.is_some() { NEXTHOP_USABLE } else { 0 },
        dst_mac: mac.unwrap_or_default(),
        src_mac,
    }
}

impl GroupTable {
    /// Fits the bucket table and the spray sequences (the group's and its
    /// classes') to the usable members.
    fn rebalance(&mut self, nexthops: &[NextHop], quality: &[u32]) {
        let live: Vec<u32> = self
            .members
            .iter()
            .copied()
            .filter(|&id| nexthops[id as usize].flags & NEXTHOP_USABLE != 0)
            .collect();
        fit(&mut self.buckets, &self.home, &live);
        let weighted = |class: u32| -> Vec<(u32, u32)> {
            let of = |id: u32| quality.get(quality_index(class, id) as usize).copied();
            live.iter().map(|&id| (id, of(id).unwrap_or(0))).collect()
        };
        spray_sequence(&mut self.spray, &weighted(0), SprayLayout::RoundRobin);
        let points = SprayLayout::Points {
            phase: sequence_phase(self.entry.hash_seed),
        };
        for class in &mut self.classes {
            spray_sequence(&mut class.spray, &weighted(class.id), points);
        }
    }
}

mod adopt;
mod classes;
mod drains;
mod former;
mod ids;
#[cfg(test)]
mod local_tests;
pub mod overrides;
pub mod route_table;
#[cfg(test)]
mod tests;
mod weights;
