//! The `[[group]]` tables, and the limits on next hops across them.

use std::collections::{HashMap, HashSet};

use lb_common::limits::{MAX_EGRESS_PORTS, MAX_GROUPS, MAX_NEXTHOPS, MAX_NEXTHOPS_PER_GROUP};
use lb_common::select::hash::HashFields;
use toml::Spanned;

use super::route_source::Followed;
use super::telemetry::{PathKeys, Template};
use crate::config::diagnostics::{ConfigError, Ctx, Quoted};
use crate::config::raw::RawGroup;
use crate::config::schema::{
    FLOWLET_GAP_DEFAULT_US, FLOWLET_GAP_MAX_US, FLOWLET_GAP_MIN_US, FlowletChoice, Group, Mode,
    NAME_MAX_LEN, Spray, TelemetrySettings,
};

impl Ctx<'_> {
    /// The groups, and those of them that learn their routes.
    pub(super) fn groups(
        &self,
        raw: Vec<Spanned<RawGroup>>,
        telemetry: &TelemetrySettings,
    ) -> Result<(Vec<Group>, Vec<Followed>), ConfigError> {
        self.table_count(&raw, "group", MAX_GROUPS)?;

        let mut names = HashMap::new();
        let mut egress: HashSet<String> = HashSet::new();
        let mut total_next_hops = 0usize;
        let mut groups = Vec::with_capacity(raw.len());
        let mut followed = Vec::new();
        let mut destinations = 0;
        for group in raw {
            let group_span = group.span();
            let group = group.into_inner();

            let name_span = group.name.span();
            let name = self.name(group.name, "group name", NAME_MAX_LEN)?;
            self.unique(
                &mut names,
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
            let flowlet_gap_us =
                group
                    .flowlet_gap_us
                    .map_or(Ok(FLOWLET_GAP_DEFAULT_US), |gap| {
                        self.in_range(
                            &gap,
                            FLOWLET_GAP_MIN_US..=FLOWLET_GAP_MAX_US,
                            &format!("group {name:?} flowlet_gap_us"),
                            "",
                        )
                    })?;
            let spray = self.lookup_or_default(
                group.spray,
                &Spray::NAMES,
                "unknown spray",
                "valid values",
            )?;
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
            if let Some((routes, span)) = learns {
                followed.push(Followed {
                    name: name.clone(),
                    routes,
                    span,
                });
            }
            let list = match list {
                Some(list) => {
                    self.non_empty(list, format_args!("group {name:?} has no next hops"))?
                }
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
            let mut seen = HashMap::new();
            let mut next_hops = Vec::with_capacity(list.len());
            let mut paths = Vec::with_capacity(list.len());
            for mut nh in list {
                paths.push(PathKeys::take(&mut nh));
                let span = nh.span();
                total_next_hops += 1;
                if total_next_hops > MAX_NEXTHOPS as usize {
                    return Err(self.error(
                        span,
                        format!(
                            "too many next hops: at most {MAX_NEXTHOPS} are allowed \
                             across all groups"
                        ),
                    ));
                }
                let if_span = nh.get_ref().interface.span();
                let spec = self.next_hop(nh)?;
                if !egress.contains(&spec.interface) {
                    if egress.len() >= MAX_EGRESS_PORTS as usize {
                        return Err(self.error(
                            if_span,
                            format!(
                                "too many egress interfaces: at most {MAX_EGRESS_PORTS} \
                                 distinct next-hop interfaces are allowed"
                            ),
                        ));
                    }
                    egress.insert(spec.interface.clone());
                }
                self.unique(
                    &mut seen,
                    spec.clone(),
                    span,
                    format_args!("next hop \"{spec}\" in group {name:?}"),
                )?;
                next_hops.push(spec);
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
                &mut destinations,
            )?;

            groups.push(Group {
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
            });
        }
        Ok((groups, followed))
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
