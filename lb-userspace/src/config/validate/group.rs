//! The `[[group]]` tables, and the limits on next hops across them.

use std::collections::{HashMap, HashSet};
use std::ops::Range;

use lb_common::limits::{MAX_EGRESS_PORTS, MAX_GROUPS, MAX_NEXTHOPS, MAX_NEXTHOPS_PER_GROUP};
use lb_common::select::hash::HashFields;
use toml::Spanned;

use super::route_source::Followed;
use super::telemetry::{PathKeys, Template};
use crate::config::diagnostics::{ConfigError, Ctx, Quoted};
use crate::config::raw::{RawGroup, RawNextHop};
use crate::config::schema::{
    FLOWLET_GAP_DEFAULT_US, FLOWLET_GAP_MAX_US, FLOWLET_GAP_MIN_US, FlowletChoice, Group, Mode,
    NAME_MAX_LEN, NextHopSpec, Spray, TelemetrySettings,
};

/// The groups a config holds, as far as they are valid.
pub(super) struct Groups {
    pub(super) valid: Vec<Group>,
    /// Where each valid group's name is, in the same order.
    pub(super) name_spans: Vec<Range<usize>>,
    /// Those of the valid groups that learn their routes.
    pub(super) followed: Vec<Followed>,
    /// Whether every group is valid (and there are neither none nor too
    /// many).
    pub(super) complete: bool,
}

/// What the groups share limits on, counted over those checked so far.
#[derive(Default)]
struct Totals {
    names: HashMap<String, Range<usize>>,
    egress: HashSet<String>,
    next_hops: usize,
    destinations: usize,
}

impl Ctx<'_> {
    /// Every group, each refused on its own: one group's problem is
    /// recorded and the others are still checked.
    pub(super) fn groups(
        &self,
        raw: Vec<Spanned<RawGroup>>,
        telemetry: &TelemetrySettings,
    ) -> Groups {
        let counted = self
            .recover(self.table_count(&raw, "group", MAX_GROUPS))
            .is_some();
        let mut groups = Groups {
            valid: Vec::with_capacity(raw.len()),
            name_spans: Vec::with_capacity(raw.len()),
            followed: Vec::new(),
            complete: counted,
        };
        let mut totals = Totals::default();
        for group in raw {
            let name_span = group.get_ref().name.span();
            match self.recover(self.group(group, telemetry, &mut totals)) {
                Some((group, followed)) => {
                    groups.valid.push(group);
                    groups.name_spans.push(name_span);
                    groups.followed.extend(followed);
                }
                None => groups.complete = false,
            }
        }
        groups
    }

    fn group(
        &self,
        group: Spanned<RawGroup>,
        telemetry: &TelemetrySettings,
        totals: &mut Totals,
    ) -> Result<(Group, Option<Followed>), ConfigError> {
        let group_span = group.span();
        let group = group.into_inner();

        let name_span = group.name.span();
        let name = self.name(group.name, "group name", NAME_MAX_LEN)?;
        self.unique(
            &mut totals.names,
            name.clone(),
            name_span,
            format_args!("group name {name:?}"),
        )?;

        let mode = self.lookup_or_default(
            group.mode,
            &Mode::NAMES,
            "unsupported group mode",
            "supported modes",
        )?;
        self.idle_keys(&name, mode, &group.spray, &group.telemetry);

        let hash_fields = group
            .hash_fields
            .map_or(Ok(HashFields::ALL), |list| self.hash_fields(&name, list))?;
        let flowlet_gap_us = group
            .flowlet_gap_us
            .map_or(Ok(FLOWLET_GAP_DEFAULT_US), |gap| {
                self.in_range(
                    &gap,
                    FLOWLET_GAP_MIN_US..=FLOWLET_GAP_MAX_US,
                    &format!("group {name:?} flowlet_gap_us"),
                    "",
                )
            })?;
        let spray =
            self.lookup_or_default(group.spray, &Spray::NAMES, "unknown spray", "valid values")?;
        let flowlet_choice = self.lookup_or_default(
            group.flowlet_choice,
            &FlowletChoice::NAMES,
            "unknown flowlet_choice",
            "valid values",
        )?;

        let kernel_routes = group
            .kernel_routes
            .map(|k| Ok((k.span(), self.kernel_routes(&name, k)?)))
            .transpose()?;
        let sonic_routes = group
            .sonic_routes
            .map(|s| Ok((s.span(), self.sonic_routes(&name, s)?)))
            .transpose()?;
        let learns = self.route_source(
            &name,
            kernel_routes.clone().map(|(span, k)| (k, span)),
            sonic_routes.clone().map(|(span, s)| (s, span)),
        )?;
        let list = self.next_hops_or_learned(
            &name,
            group_span,
            group.next_hops,
            learns.as_ref().map(|(source, _)| source),
        )?;
        let learns_from = learns.as_ref().map(|(routes, _)| routes.whose());
        let followed = learns.map(|(routes, span)| Followed {
            name: name.clone(),
            routes,
            span,
        });
        let list = match list {
            Some(list) => self.non_empty(list, format_args!("group {name:?} has no next hops"))?,
            None => Vec::new(),
        };
        self.at_most(
            &list,
            MAX_NEXTHOPS_PER_GROUP,
            format_args!(
                "group {name:?} has too many next hops: at most \
                 {MAX_NEXTHOPS_PER_GROUP} are allowed per group"
            ),
        )?;
        // Each next hop refused on its own; the group goes on with the
        // others (and the file is refused for it).
        let mut seen = HashMap::new();
        let mut next_hops = Vec::with_capacity(list.len());
        let mut paths = Vec::with_capacity(list.len());
        for mut nh in list {
            let path = PathKeys::take(&mut nh);
            let spec = self.group_next_hop(nh, &name, totals, &mut seen);
            if let Some(spec) = self.recover(spec) {
                paths.push(path);
                next_hops.push(spec);
            }
        }
        let template = Template {
            url: group.telemetry_url,
            device: group.telemetry_device,
            counters_db: group.counters_db,
            sonic_port: group.sonic_port,
            switches: group.switch_addresses,
            learns_from,
        };
        let telemetry = self.group_telemetry(
            &name,
            group.telemetry,
            template,
            paths,
            &next_hops,
            telemetry,
        )?;
        let own_destinations = self.destinations(
            &name,
            group.destinations,
            telemetry.as_ref(),
            &mut totals.destinations,
        )?;

        let group = Group {
            name,
            mode,
            hash_fields,
            flowlet_gap_us,
            spray,
            flowlet_choice,
            telemetry,
            next_hops,
            weights: Vec::new(),
            kernel_routes: kernel_routes.map(|(_, k)| k),
            sonic_routes: sonic_routes.map(|(_, s)| s),
            destinations: own_destinations,
        };
        Ok((group, followed))
    }

    /// One of group `name`'s next hops, counted against the limits the
    /// groups share.
    fn group_next_hop(
        &self,
        nh: Spanned<RawNextHop>,
        name: &str,
        totals: &mut Totals,
        seen: &mut HashMap<NextHopSpec, Range<usize>>,
    ) -> Result<NextHopSpec, ConfigError> {
        let span = nh.span();
        // Only where the count crosses the limit: the next hops past it
        // are the same problem.
        totals.next_hops += 1;
        if totals.next_hops == MAX_NEXTHOPS as usize + 1 {
            return Err(self.error(
                span,
                format!("too many next hops: at most {MAX_NEXTHOPS} are allowed across all groups"),
            ));
        }
        let if_span = nh.get_ref().interface.span();
        let spec = self.next_hop(nh)?;
        if totals.egress.insert(spec.interface.clone())
            && totals.egress.len() == MAX_EGRESS_PORTS as usize + 1
        {
            return Err(self.error(
                if_span,
                format!(
                    "too many egress interfaces: at most {MAX_EGRESS_PORTS} distinct next-hop \
                     interfaces are allowed"
                ),
            ));
        }
        self.unique(
            seen,
            spec.clone(),
            span,
            format_args!("next hop \"{spec}\" in group {name:?}"),
        )?;
        Ok(spec)
    }

    /// Warns of each of a group's `spray` and `telemetry` that is set but
    /// does nothing in its `mode`. Not an error: a reload may switch the
    /// mode live, and the key is there for then.
    fn idle_keys(
        &self,
        name: &str,
        mode: Mode,
        spray: &Option<Spanned<String>>,
        telemetry: &Option<Spanned<String>>,
    ) {
        // `flowlet_gap_us` acts in ECMP too: how long a group drains after
        // a switch from a flowlet mode or a change of its overrides.
        let keys = [
            (
                "spray",
                spray.as_ref().map(Spanned::span),
                mode != Mode::PerPacket,
            ),
            (
                "telemetry",
                telemetry.as_ref().map(Spanned::span),
                mode == Mode::Ecmp,
            ),
        ];
        for (key, span, idle) in keys {
            if let (Some(span), true) = (span, idle) {
                self.warn(
                    span,
                    format!("group {name:?}: {key} has no effect while the mode is {mode}"),
                );
            }
        }
    }

    fn hash_fields(
        &self,
        group: &str,
        list: Spanned<Vec<Spanned<String>>>,
    ) -> Result<HashFields, ConfigError> {
        let list = self.non_empty(
            list,
            format_args!(
                "group {group:?} has empty hash_fields; list at least one of {} \
                 or omit the key to hash on all of them",
                Quoted(&HashFields::NAMES)
            ),
        )?;
        let mut fields = HashFields(0);
        for name in list {
            let field = self.lookup(
                &name,
                &HashFields::NAMES,
                "unknown hash field",
                "valid fields",
            )?;
            if fields.contains(field) {
                return Err(self.error(
                    name.span(),
                    format!("duplicate hash field {:?}", name.get_ref()),
                ));
            }
            fields = fields.union(field);
        }
        Ok(fields)
    }
}
