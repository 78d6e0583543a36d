//! The kernel's routes and next-hop objects as the daemon last heard them,
//! and which of them a group's `kernel_routes` takes, each with its
//! gateways or why it is not learned.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::rc::Rc;

use lb_common::limits::MAX_NEXTHOPS_PER_GROUP;

use crate::config::{KernelRoutes, NextHopAddr, NextHopSpec, Prefix};
use crate::netlink::{Gateway, KernelRoute, NextHopObject, RouteEvent, RouteKey, Via};

/// A learned route's next hops with their weights, sorted: routes with
/// equal sets share a group.
pub(super) type NextHopSet = Vec<(NextHopSpec, u32)>;

/// Why a kernel (or APPL_DB) route is not learned: its packets go to the
/// kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Skip {
    /// A route straight onto a link, no gateway (a connected subnet).
    NoGateway,
    /// A next hop's interface is not an Ethernet port of this box.
    NotAPort(u32),
    /// An APPL_DB next hop's interface, by name, is not one either.
    NoSuchPort(String),
    /// An APPL_DB route's `nexthop_group` names no `NEXTHOP_GROUP_TABLE`
    /// row (or one refused).
    NoNextHopGroup(String),
    /// An APPL_DB route through something else than IP next hops: the
    /// field that says so.
    NotIp(String),
    /// Blackhole, unreachable, prohibit, ...: the kernel's to handle.
    NotUnicast,
    /// Through a next-hop object that is unknown, a blackhole, or a group
    /// of groups.
    Object(u32),
    TooManyNextHops(usize),
    NoGroupLeft,
    RouteTableFull,
    NextHopTableFull,
}

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoGateway => f.write_str(
                "no gateway (a route onto the link): fabriclb forwards to gateways only",
            ),
            Self::NotAPort(ifindex) => {
                write!(
                    f,
                    "interface {ifindex} is not an Ethernet port (or is gone)"
                )
            }
            Self::NoSuchPort(name) => {
                write!(f, "interface {name:?} is not an Ethernet port of this box")
            }
            Self::NoNextHopGroup(id) => {
                write!(f, "no usable NEXTHOP_GROUP_TABLE row {id:?}")
            }
            Self::NotIp(field) => write!(
                f,
                "{field} is set: fabriclb forwards over plain IP next hops only"
            ),
            Self::NotUnicast => f.write_str("not a unicast route (blackhole, unreachable, ...)"),
            Self::Object(id) => write!(
                f,
                "next-hop object {id} is unknown, a blackhole or a group of groups"
            ),
            Self::TooManyNextHops(n) => write!(
                f,
                "{n} next hops; a group holds at most {MAX_NEXTHOPS_PER_GROUP}"
            ),
            Self::NoGroupLeft => f.write_str("no group left for its set of next hops"),
            Self::RouteTableFull => f.write_str("the route table is full"),
            Self::NextHopTableFull => f.write_str("the next-hop table is full"),
        }
    }
}

/// What a kernel route is learned as: its next hops (shared by the routes
/// that have the same), or why not.
pub(super) type Selected = BTreeMap<Prefix, Result<Rc<NextHopSet>, Skip>>;

/// The routes some group follows (a box may hold many more: other
/// tables, other protocols), and every next-hop object.
#[derive(Debug, Default)]
pub(super) struct KernelTable {
    /// What the groups that follow the kernel take.
    pub(super) filters: Vec<KernelRoutes>,
    routes: BTreeMap<RouteKey, KernelRoute>,
    objects: HashMap<u32, NextHopObject>,
}

impl KernelTable {
    /// The routes `filters` take and the next-hop objects, as a dump's
    /// events say.
    pub(super) fn from_dump(filters: Vec<KernelRoutes>, events: Vec<RouteEvent>) -> Self {
        let mut table = Self {
            filters,
            ..Self::default()
        };
        for event in events {
            table.apply(event);
        }
        table
    }

    /// Applies `event`; returns whether it may change what is learned.
    pub(super) fn apply(&mut self, event: RouteEvent) -> bool {
        let followed =
            |key: &RouteKey, protocol| self.filters.iter().any(|f| f.matches(key.table, protocol));
        match event {
            RouteEvent::Route(route) => {
                if !followed(&route.key, route.protocol) {
                    // A route replaced by one of another protocol is gone.
                    return self.routes.remove(&route.key).is_some();
                }
                self.routes.insert(route.key, route);
            }
            RouteEvent::RouteRemoved(key) => return self.routes.remove(&key).is_some(),
            RouteEvent::NextHop {
                id,
                object: Some(object),
            } => {
                self.objects.insert(id, object);
            }
            RouteEvent::NextHop { id, object: None } | RouteEvent::NextHopRemoved(id) => {
                self.remove_object(id);
            }
            RouteEvent::Lost => return false,
        }
        true
    }

    /// Port `ifindex` went down or lost its carrier: the kernel deletes
    /// the next-hop objects that leave by it, and says nothing (only an
    /// object deleted by request is announced), so a group object shrinks
    /// in silence and a route moved back to it later would otherwise be
    /// learned with next hops the kernel no longer has. Returns whether
    /// anything was deleted.
    pub(super) fn port_down(&mut self, ifindex: u32) -> bool {
        let gone: Vec<u32> = (self.objects.iter())
            .filter(|(_, o)| matches!(o, NextHopObject::Single(g) if g.ifindex == ifindex))
            .map(|(&id, _)| id)
            .collect();
        for &id in &gone {
            self.remove_object(id);
        }
        !gone.is_empty()
    }

    /// Deletes object `id` as the kernel does: out of every group object,
    /// a group left empty deleted with it, and the routes through any of
    /// them deleted, all without a word from the kernel.
    fn remove_object(&mut self, id: u32) {
        let mut gone = vec![id];
        while let Some(id) = gone.pop() {
            self.objects.remove(&id);
            self.routes.retain(|_, r| r.via != Via::Object(id));
            for (&group, object) in &mut self.objects {
                if let NextHopObject::Group(members) = object {
                    members.retain(|&(member, _)| member != id);
                    if members.is_empty() {
                        gone.push(group);
                    }
                }
            }
        }
    }

    /// The routes `filter` takes, per prefix the one of lowest metric,
    /// with their next hops: `port` names an Ethernet port by ifindex.
    pub(super) fn select(
        &self,
        filter: &KernelRoutes,
        port: &dyn Fn(u32) -> Option<String>,
    ) -> Selected {
        let mut selected = Selected::new();
        let mut metric = HashMap::new();
        // BGP gives thousands of routes the same next hops: each distinct
        // set is made once.
        let mut made: HashMap<&Via, Result<Rc<NextHopSet>, Skip>> = HashMap::new();
        for route in self.routes.values() {
            if !filter.matches(route.key.table, route.protocol) {
                continue;
            }
            // Keys sort by table, prefix, then metric: the first is lowest.
            if metric
                .insert(route.key.prefix, route.key.priority)
                .is_some()
            {
                continue;
            }
            let learned = made
                .entry(&route.via)
                .or_insert_with(|| self.next_hops(&route.via, port).map(Rc::new));
            selected.insert(route.key.prefix, learned.clone());
        }
        selected
    }

    fn next_hops(
        &self,
        via: &Via,
        port: &dyn Fn(u32) -> Option<String>,
    ) -> Result<NextHopSet, Skip> {
        let gateways = match via {
            Via::Gateways(gateways) => gateways.clone(),
            Via::Object(id) => self.object_gateways(*id)?,
            Via::Nowhere => return Err(Skip::NotUnicast),
        };
        let mut set: BTreeMap<NextHopSpec, u32> = BTreeMap::new();
        for gateway in gateways {
            let addr = gateway.addr.ok_or(Skip::NoGateway)?;
            let interface = port(gateway.ifindex).ok_or(Skip::NotAPort(gateway.ifindex))?;
            let spec = NextHopSpec {
                interface,
                addr: NextHopAddr::Ip(addr),
                vlan: None,
            };
            *set.entry(spec).or_default() += gateway.weight;
        }
        if set.len() > MAX_NEXTHOPS_PER_GROUP {
            return Err(Skip::TooManyNextHops(set.len()));
        }
        Ok(set.into_iter().collect())
    }

    /// The gateways of next-hop object `id`: itself, or a group's members
    /// each with the group's weight.
    fn object_gateways(&self, id: u32) -> Result<Vec<Gateway>, Skip> {
        let single = |id| match self.objects.get(&id) {
            Some(NextHopObject::Single(gateway)) => Ok(*gateway),
            _ => Err(Skip::Object(id)),
        };
        match self.objects.get(&id) {
            Some(NextHopObject::Group(members)) => members
                .iter()
                .map(|&(member, weight)| single(member).map(|g| Gateway { weight, ..g }))
                .collect(),
            _ => single(id).map(|g| vec![g]),
        }
    }
}
