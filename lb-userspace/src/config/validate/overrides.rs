//! The `[[override]]` tables: what each matches, and that the next hop it
//! names is one of the group that carries its destination.

use std::collections::HashMap;
use std::ops::Range;

use lb_common::limits::{MAX_GROUPS, MAX_OVERRIDES_PER_GROUP};
use toml::Spanned;

use super::telemetry::PathKeys;
use crate::config::diagnostics::{ConfigError, Ctx};
use crate::config::raw::RawOverride;
use crate::config::schema::{Group, NAME_MAX_LEN, Override, QP_MAX, Route, Switch};

/// What an override is checked against beyond its own keys; `None` in
/// [`Ctx::overrides`] while one of them is refused.
pub(super) struct Known<'a> {
    pub(super) switch: &'a Switch,
    pub(super) groups: &'a [Group],
    pub(super) routes: &'a [Route],
}

impl Ctx<'_> {
    /// Every override, each refused on its own; `None` if any was (its
    /// problem recorded). Without `known`, only each override's own keys
    /// are checked: whether its ingress and destination are the switch's
    /// and a group's is known once those are fixed.
    pub(super) fn overrides(
        &self,
        raw: Vec<Spanned<RawOverride>>,
        known: Option<Known<'_>>,
    ) -> Option<Vec<Override>> {
        let mut complete = self
            .recover(self.at_most(
                &raw,
                (MAX_GROUPS * MAX_OVERRIDES_PER_GROUP) as usize,
                format_args!(
                    "too many overrides: at most {} are allowed",
                    MAX_GROUPS * MAX_OVERRIDES_PER_GROUP
                ),
            ))
            .is_some()
            && known.is_some();
        let mut names = HashMap::new();
        let mut per_group: HashMap<usize, usize> = HashMap::new();
        let mut overrides = Vec::with_capacity(raw.len());
        for entry in raw {
            let checked = self.override_entry(entry, known.as_ref(), &mut names, &mut per_group);
            match self.recover(checked) {
                Some(entry) => overrides.push(entry),
                None => complete = false,
            }
        }
        complete.then_some(overrides)
    }

    fn override_entry(
        &self,
        entry: Spanned<RawOverride>,
        known: Option<&Known<'_>>,
        names: &mut HashMap<String, Range<usize>>,
        per_group: &mut HashMap<usize, usize>,
    ) -> Result<Override, ConfigError> {
        let span = entry.span();
        let mut entry = entry.into_inner();
        let name_span = entry.name.span();
        let name = self.name(entry.name, "override name", NAME_MAX_LEN)?;
        self.unique(
            names,
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
        let Some(known) = known else {
            return Ok(entry);
        };
        if let Some((span, name)) = ingress
            && let Some(why) = entry.ingress_error(known.switch, &name)
        {
            return Err(self.error(span, why));
        }
        entry
            .count_into(known.routes, known.groups, per_group)
            .map_err(|why| self.error(span, why))?;
        Ok(entry)
    }
}
