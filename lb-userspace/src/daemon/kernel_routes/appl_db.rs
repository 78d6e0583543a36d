//! Which of APPL_DB's routes (`run --sonic`, read by
//! [`crate::sonic::routes`]) a group's `sonic_routes` takes, each with
//! its next hops or why it is not learned: what [`super::kernel`] is for
//! the kernel's routes, and the same [`Selected`] for [`super::learned`].

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use lb_common::limits::MAX_NEXTHOPS_PER_GROUP;

use super::kernel::{NextHopSet, Selected, Skip};
use crate::config::{NextHopAddr, NextHopSpec, SonicRoutes};
use crate::sonic::ApplRoutes;
use crate::sonic::routes::{Hop, Via};

/// The routes of `routes` that `filter` takes; `is_port` says whether an
/// interface name is an Ethernet port of this box.
pub(super) fn select(
    routes: &ApplRoutes,
    filter: &SonicRoutes,
    is_port: &dyn Fn(&str) -> bool,
) -> Selected {
    let mut selected = Selected::new();
    // As with the kernel's: thousands of routes share a few sets.
    let mut made: HashMap<&Via, Result<Rc<NextHopSet>, Skip>> = HashMap::new();
    for (prefix, route) in &routes.routes {
        if !filter.matches(route.protocol.as_deref()) {
            continue;
        }
        let learned = made
            .entry(&route.via)
            .or_insert_with(|| next_hops(routes, &route.via, is_port).map(Rc::new));
        selected.insert(*prefix, learned.clone());
    }
    selected
}

fn next_hops(
    routes: &ApplRoutes,
    via: &Via,
    is_port: &dyn Fn(&str) -> bool,
) -> Result<NextHopSet, Skip> {
    let hops: &[Hop] = match via {
        Via::Hops(hops) => hops,
        Via::Group(id) => routes
            .groups
            .get(id)
            .ok_or_else(|| Skip::NoNextHopGroup(id.clone()))?,
        Via::Blackhole => return Err(Skip::NotUnicast),
        Via::Other(field) => return Err(Skip::NotIp(field.clone())),
    };
    let mut set: BTreeMap<NextHopSpec, u32> = BTreeMap::new();
    for hop in hops {
        let gateway = hop.gateway.ok_or(Skip::NoGateway)?;
        if !is_port(&hop.ifname) {
            return Err(Skip::NoSuchPort(hop.ifname.clone()));
        }
        let spec = NextHopSpec {
            interface: hop.ifname.clone(),
            addr: NextHopAddr::Ip(gateway),
            vlan: None,
        };
        *set.entry(spec).or_default() += hop.weight;
    }
    if set.len() > MAX_NEXTHOPS_PER_GROUP {
        return Err(Skip::TooManyNextHops(set.len()));
    }
    Ok(set.into_iter().collect())
}

#[cfg(test)]
mod tests;
