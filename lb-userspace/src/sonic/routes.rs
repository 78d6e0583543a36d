//! APPL_DB's routes (pure): `ROUTE_TABLE:<prefix>` and
//! `NEXTHOP_GROUP_TABLE:<id>` rows, as fpmsyncd writes them from zebra's
//! routes and orchagent reads them (sonic-swss-common's `swss-schema.md`,
//! orchagent's `routeorch.cpp` and `nhgorch.cpp`), read into routes with
//! their next hops. Which of them a group takes, and whether its
//! interfaces are ports of this box, is the daemon's
//! (`daemon::kernel_routes`).
//!
//! `ROUTE_TABLE:<prefix>`: `nexthop` and `ifname` are equally long
//! comma-separated lists (`0.0.0.0` or `::` for a route onto the link),
//! `weight` an optional list beside them, `blackhole` `true` for a
//! blackhole, `nexthop_group` the key of a `NEXTHOP_GROUP_TABLE` row in
//! place of the lists, `protocol` the kernel's name of the route's
//! protocol. A key `ROUTE_TABLE:<vrf>:<prefix>` is a VRF's route, not the
//! default table's. A prefix without its length is a host route, as
//! fpmsyncd writes /32 and /128.

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::overlay::Refusal;
use super::rows::{NEXTHOP_GROUP_TABLE, ROUTE_TABLE, Row, Rows};
use crate::config::Prefix;

/// One next hop of a route or next-hop group: its gateway (`None` for a
/// route onto the link), interface and weight.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Hop {
    pub gateway: Option<IpAddr>,
    pub ifname: String,
    pub weight: u32,
}

/// Where a route's packets go.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Via {
    Hops(Vec<Hop>),
    /// The `NEXTHOP_GROUP_TABLE` row of this id.
    Group(String),
    Blackhole,
    /// Through something other than plain IP next hops: the field that
    /// says so (`mpls_nh`, `vni_label`, `segment`, ...).
    Other(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub protocol: Option<String>,
    pub via: Via,
}

/// The default VRF's routes and the next-hop groups, and the rows that
/// could not be read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApplRoutes {
    pub routes: BTreeMap<Prefix, Route>,
    pub groups: BTreeMap<String, Vec<Hop>>,
    pub refusals: Vec<Refusal>,
}

/// Fields that take a route off plain IP forwarding when set.
const OTHER_FIELDS: [&str; 5] = ["mpls_nh", "vni_label", "router_mac", "segment", "seg_src"];

impl ApplRoutes {
    pub fn from_rows(rows: &Rows) -> Self {
        let mut out = Self::default();
        for (key, row) in &rows.appl {
            if let Some(id) = key.strip_prefix(NEXTHOP_GROUP_TABLE) {
                match fields(key, row).and_then(|f| hops(key, f)) {
                    Ok(hops) => {
                        out.groups.insert(id.to_owned(), hops);
                    }
                    Err(refusal) => out.refusals.push(refusal),
                }
            } else if let Some(rest) = key.strip_prefix(ROUTE_TABLE) {
                // Another VRF's: `Vrf...:<prefix>`. An IPv6 prefix holds
                // colons too, but never starts with `Vrf`.
                if rest.starts_with("Vrf") {
                    continue;
                }
                match fields(key, row).and_then(|f| Ok((prefix(key, rest)?, route(key, f)?))) {
                    Ok((prefix, route)) => {
                        out.routes.insert(prefix, route);
                    }
                    Err(refusal) => out.refusals.push(refusal),
                }
            }
        }
        out
    }
}

fn refusal(key: &str, field: Option<&str>, reason: String) -> Refusal {
    Refusal {
        key: key.to_owned(),
        field: field.map(str::to_owned),
        reason,
    }
}

fn fields<'a>(key: &str, row: &'a Row) -> Result<&'a BTreeMap<String, String>, Refusal> {
    row.as_ref().map_err(|why| refusal(key, None, why.clone()))
}

/// `10.1.0.0/16`, `2001:db8::/32`, or a host route's bare address.
fn prefix(key: &str, text: &str) -> Result<Prefix, Refusal> {
    Prefix::parse_or_host(text).map_err(|e| refusal(key, None, e.to_string()))
}

fn route(key: &str, fields: &BTreeMap<String, String>) -> Result<Route, Refusal> {
    let set = |name: &str| fields.get(name).filter(|v| !v.is_empty());
    let protocol = set("protocol").cloned();
    let via = if let Some(other) = OTHER_FIELDS.into_iter().find(|f| set(f).is_some()) {
        Via::Other(other.to_owned())
    } else if fields.get("blackhole").is_some_and(|v| v == "true") {
        Via::Blackhole
    } else if let Some(group) = set("nexthop_group") {
        if set("nexthop").is_some() || set("ifname").is_some() {
            return Err(refusal(
                key,
                Some("nexthop_group"),
                "set with nexthop or ifname: a route has one or the other".into(),
            ));
        }
        Via::Group(group.clone())
    } else {
        Via::Hops(hops(key, fields)?)
    };
    Ok(Route { protocol, via })
}

/// The `nexthop`, `ifname` and `weight` lists, one hop per position.
fn hops(key: &str, fields: &BTreeMap<String, String>) -> Result<Vec<Hop>, Refusal> {
    let list = |name: &str| -> Vec<&str> {
        fields
            .get(name)
            .filter(|v| !v.is_empty())
            .map_or_else(Vec::new, |v| v.split(',').map(str::trim).collect())
    };
    let (gateways, ifnames, weights) = (list("nexthop"), list("ifname"), list("weight"));
    if ifnames.is_empty() {
        return Err(refusal(key, Some("ifname"), "missing or empty".into()));
    }
    if gateways.len() != ifnames.len() {
        return Err(refusal(
            key,
            Some("nexthop"),
            format!(
                "{} addresses for {} interfaces in ifname: the lists go in pairs",
                gateways.len(),
                ifnames.len()
            ),
        ));
    }
    if !weights.is_empty() && weights.len() != ifnames.len() {
        return Err(refusal(
            key,
            Some("weight"),
            format!("{} weights for {} next hops", weights.len(), ifnames.len()),
        ));
    }
    let mut hops = Vec::with_capacity(ifnames.len());
    for (i, (gateway, ifname)) in gateways.iter().zip(&ifnames).enumerate() {
        let gateway: IpAddr = gateway.parse().map_err(|_| {
            refusal(
                key,
                Some("nexthop"),
                format!("{gateway:?} is not an IP address"),
            )
        })?;
        let weight = match weights.get(i) {
            None => 1,
            Some(w) => w.parse::<u32>().ok().filter(|&w| w > 0).ok_or_else(|| {
                refusal(
                    key,
                    Some("weight"),
                    format!("{w:?} is not a weight (a number from 1)"),
                )
            })?,
        };
        hops.push(Hop {
            gateway: (!gateway.is_unspecified()).then_some(gateway),
            ifname: (*ifname).to_owned(),
            weight,
        });
    }
    Ok(hops)
}

#[cfg(test)]
mod tests;
