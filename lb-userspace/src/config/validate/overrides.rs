//! The `[[override]]` tables: what each matches, and that the next hop it
//! names is one of the group that carries its destination.

use std::collections::HashMap;

use lb_common::limits::{MAX_GROUPS, MAX_OVERRIDES_PER_GROUP};
use toml::Spanned;

use super::telemetry::PathKeys;
use crate::config::diagnostics::{ConfigError, Ctx};
use crate::config::raw::RawOverride;
use crate::config::schema::{Group, NAME_MAX_LEN, Override, Route, Switch};

/// The largest RoCEv2 queue pair number (24 bits); 0 is none.
const QP_MAX: u32 = 0xff_ffff;

impl Ctx<'_> {
    pub(super) fn overrides(
        &self,
        raw: Vec<Spanned<RawOverride>>,
        switch: &Switch,
        groups: &[Group],
        routes: &[Route],
    ) -> Result<Vec<Override>, ConfigError> {
        self.at_most(
            &raw,
            (MAX_GROUPS * MAX_OVERRIDES_PER_GROUP) as usize,
            format_args!(
                "too many overrides: at most {} are allowed",
                MAX_GROUPS * MAX_OVERRIDES_PER_GROUP
            ),
        )?;
        let learned = groups.iter().any(Group::learns_routes);
        let mut names = HashMap::new();
        let mut per_group: HashMap<usize, usize> = HashMap::new();
        let mut overrides = Vec::with_capacity(raw.len());
        for entry in raw {
            let span = entry.span();
            let mut entry = entry.into_inner();
            let name_span = entry.name.span();
            let name = self.name(entry.name, "override name", NAME_MAX_LEN)?;
            self.unique(
                &mut names,
                name.clone(),
                name_span,
                format_args!("override name {name:?}"),
            )?;
            let dst = self.plain_prefix(&entry.dst)?;
            let src = match &entry.src {
                None => None,
                Some(text) => {
                    let src = self.plain_prefix(text)?;
                    if src.addr.is_ipv4() != dst.addr.is_ipv4() {
                        return Err(self.error(
                            text.span(),
                            format!("override {name:?}: src {src} is not of dst {dst}'s family"),
                        ));
                    }
                    Some(src)
                }
            };
            let ingress = match entry.ingress {
                None => None,
                Some(ingress) => {
                    if !switch.interfaces.contains(ingress.get_ref()) {
                        return Err(self.error(
                            ingress.span(),
                            format!(
                                "override {name:?}: ingress {:?} is not one of switch.interfaces",
                                ingress.get_ref()
                            ),
                        ));
                    }
                    Some(ingress.into_inner())
                }
            };
            let dest_qp = entry
                .dest_qp
                .map(|qp| {
                    self.in_range(
                        &qp,
                        1..=QP_MAX,
                        &format!("override {name:?} dest_qp"),
                        " (a RoCEv2 queue pair number)",
                    )
                })
                .transpose()?;
            let keys = PathKeys::take(&mut entry.next_hop);
            if keys.any() {
                return Err(self.error(
                    entry.next_hop.span(),
                    format!(
                        "override {name:?}: next_hop names a next hop of a group; its \
                         telemetry keys belong in the group's next_hops"
                    ),
                ));
            }
            let next_hop = self.next_hop(entry.next_hop)?;
            // A route of the file's own groups is checked now; one learned
            // from the kernel or SONiC only when learned.
            let entry = Override {
                name,
                dst,
                src,
                ingress,
                dest_qp,
                next_hop,
            };
            let carrier = Route::carrying(routes, dst).map(|r| &groups[r.group]);
            if !carrier.map_or(learned, Group::learns_routes) {
                let (index, _) = entry.pinned_slot(routes, groups).map_err(|why| {
                    self.error(span.clone(), format!("override {:?}: {why}", entry.name))
                })?;
                let count = per_group.entry(index).or_default();
                *count += 1;
                if *count > MAX_OVERRIDES_PER_GROUP as usize {
                    return Err(self.error(
                        span,
                        format!(
                            "override {:?}: group {:?} has {MAX_OVERRIDES_PER_GROUP} overrides \
                             already, the most a group may have",
                            entry.name, groups[index].name
                        ),
                    ));
                }
            }
            overrides.push(entry);
        }
        Ok(overrides)
    }
}
