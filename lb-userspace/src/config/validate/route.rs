//! The `[[route]]` tables.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::ops::Range;

use lb_common::limits::MAX_ROUTES;
use lb_common::packet::parse::FlowFields;
use lb_common::route;
use toml::Spanned;

use super::group::Groups;
use crate::config::diagnostics::{ConfigError, Ctx};
use crate::config::raw::RawRoute;
use crate::config::schema::{Group, Prefix, Route};

impl Ctx<'_> {
    /// Every route, each refused on its own; `None` if any was (its
    /// problem recorded). While a group is refused, a route naming no
    /// valid group is left unchecked past its prefix: it may name the
    /// refused one.
    pub(super) fn routes(
        &self,
        raw: Vec<Spanned<RawRoute>>,
        groups: &Groups,
    ) -> Option<Vec<Route>> {
        // Routes may all come from the kernel, and may do so from a
        // group refused.
        let none_ok = !groups.followed.is_empty() || !groups.complete;
        let mut complete = self
            .recover(self.table_count_or_none(&raw, "route", MAX_ROUTES, none_ok))
            .is_some();
        // Group names are unique, so the first match is the only one.
        let by_name: Vec<(&str, usize)> = groups
            .valid
            .iter()
            .enumerate()
            .map(|(i, g)| (g.name.as_str(), i))
            .collect();
        let mut seen = HashMap::new();
        let mut routes = Vec::with_capacity(raw.len());
        for route in raw {
            let raw = route.into_inner();
            let route = self.route_prefix(&raw, &mut seen).and_then(|prefix| {
                let known = by_name.iter().any(|(name, _)| name == raw.group.get_ref());
                if !known && !groups.complete {
                    return Ok(None);
                }
                let group = self.lookup(&raw.group, &by_name, "unknown group", "defined groups")?;
                let route = Route { prefix, group };
                self.route_to_followed(&route, &groups.valid, raw.group.span())?;
                Ok(Some(route))
            });
            match self.recover(route).flatten() {
                Some(route) => routes.push(route),
                None => complete = false,
            }
        }
        complete.then_some(routes)
    }

    /// A route's prefix, if it is valid and not a duplicate.
    fn route_prefix(
        &self,
        raw: &RawRoute,
        seen: &mut HashMap<Prefix, Range<usize>>,
    ) -> Result<Prefix, ConfigError> {
        let prefix = self.prefix(&raw.prefix)?;
        self.unique(
            seen,
            prefix,
            raw.prefix.span(),
            format_args!("prefix {prefix}"),
        )?;
        Ok(prefix)
    }

    fn prefix(&self, text: &Spanned<String>) -> Result<Prefix, ConfigError> {
        let masked = self.plain_prefix(text)?;
        if let Some(why) = never_taken(masked) {
            return Err(self.error(text.span(), format!("route {masked} {why}")));
        }
        Ok(masked)
    }

    /// A prefix as written: address/length, no host bits set.
    pub(super) fn plain_prefix(&self, text: &Spanned<String>) -> Result<Prefix, ConfigError> {
        Prefix::parse(text.get_ref()).map_err(|e| self.error(text.span(), e.to_string()))
    }

    /// Warns of each group no route sends traffic to; `name_spans` are
    /// the groups' names, in the same order.
    pub(super) fn unrouted_groups(
        &self,
        groups: &[Group],
        routes: &[Route],
        name_spans: &[Range<usize>],
    ) {
        let mut routed = vec![false; groups.len()];
        for route in routes {
            routed[route.group] = true;
        }
        for ((group, span), routed) in groups.iter().zip(name_spans).zip(routed) {
            if !routed && !group.learns_routes() {
                self.warn(
                    span.clone(),
                    format!("group {:?} is used by no route", group.name),
                );
            }
        }
    }
}

/// Why no packet would ever take a route to `prefix`, if none would.
fn never_taken(prefix: Prefix) -> Option<String> {
    if let IpAddr::V6(addr) = prefix.addr {
        if let (Some(v4), Some(len)) = (addr.to_ipv4_mapped(), prefix.len.checked_sub(96)) {
            let v4 = Prefix {
                addr: IpAddr::V4(v4),
                len,
            };
            return Some(format!(
                "is IPv4-mapped IPv6, and IPv4 packets never match IPv6 routes: \
                 write \"{v4}\""
            ));
        }
    }
    let landmarks = landmarks(prefix);
    if landmarks.iter().all(IpAddr::is_loopback) {
        return Some("holds only loopback addresses, which never leave a host".into());
    }
    if landmarks
        .iter()
        .all(|&addr| route::never_forwarded(&destination(addr)))
    {
        return Some(
            "holds only destinations the data plane never forwards (multicast, the limited \
             broadcast, link-local): it hands them to the kernel"
                .into(),
        );
    }
    None
}

/// The first and last addresses of `prefix` and the two either side of its
/// middle: where a prefix shows whether it lies wholly in what the data
/// plane never forwards. Each class of that is a prefix block, so a prefix
/// with both ends in one class lies inside it; the one prefix with its
/// ends in two classes, 224.0.0.0/3 (multicast up to 255.255.255.255),
/// holds forwarded addresses at its middle (240.0.0.0).
fn landmarks(prefix: Prefix) -> [IpAddr; 4] {
    let (bits, first) = match prefix.addr {
        IpAddr::V4(a) => (32, u128::from(u32::from(a))),
        IpAddr::V6(a) => (128, u128::from(a)),
    };
    let host_bits = bits - u32::from(prefix.len);
    let last = first | u128::MAX.checked_shr(128 - host_bits).unwrap_or(0);
    let middle = host_bits
        .checked_sub(1)
        .map_or(first, |half| first | (1 << half));
    [first, middle.saturating_sub(1).max(first), middle, last].map(|n| match prefix.addr {
        // `n` is within the prefix, so it fits its family.
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(n as u32)),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(n)),
    })
}

/// A packet's fields as the data plane's route stage sees them, for a
/// destination `addr`.
fn destination(addr: IpAddr) -> FlowFields {
    let mut flow = FlowFields::default();
    match addr {
        IpAddr::V4(a) => flow.dst[..4].copy_from_slice(&a.octets()),
        IpAddr::V6(a) => {
            flow.is_ipv6 = true;
            flow.dst = a.octets();
        }
    }
    flow
}
