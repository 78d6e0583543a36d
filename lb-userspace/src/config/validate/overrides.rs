//! The `[[override]]` tables: what each matches, and that the next hop it
//! names is one of the group that carries its destination.

use std::collections::HashMap;

use lb_common::limits::{MAX_GROUPS, MAX_OVERRIDES_PER_GROUP};
use toml::Spanned;

use super::telemetry::PathKeys;
use crate::config::diagnostics::{ConfigError, Ctx};
use crate::config::raw::RawOverride;
use crate::config::schema::{Group, NAME_MAX_LEN, Override, QP_MAX, Route, Switch};

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
            let src = entry
                .src
                .as_ref()
                .map(|text| self.plain_prefix(text).map(|src| (src, text.span())))
                .transpose()?;
            let ingress = entry.ingress.map(|i| (i.span(), i.into_inner()));
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
            let entry = Override {
                name,
                dst,
                src: src.as_ref().map(|(src, _)| *src),
                ingress: ingress.as_ref().map(|(_, name)| name.clone()),
                dest_qp,
                next_hop,
            };
            if let Some((src, span)) = src
                && let Some(why) = entry.src_family_error(src)
            {
                return Err(self.error(span, why));
            }
            if let Some((span, name)) = ingress
                && let Some(why) = entry.ingress_error(switch, &name)
            {
                return Err(self.error(span, why));
            }
            entry
                .count_into(routes, groups, &mut per_group)
                .map_err(|why| self.error(span, why))?;
            overrides.push(entry);
        }
        Ok(overrides)
    }
}
