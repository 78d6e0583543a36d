//! `kernel_routes` and `sonic_routes` in a `[[group]]`: which of the
//! kernel's or SONiC's routes the group follows, and what cannot go with
//! it.

use std::ops::Range;

use toml::Spanned;

use crate::config::diagnostics::{ConfigError, Ctx, Quoted};
use crate::config::raw::{NameOrNumber, RawKernelRoutes, RawSonicRoutes};
use crate::config::schema::{
    Group, KernelRoutes, RT_PROTOS, RT_TABLE_MAIN, RT_TABLES, Route, RouteSource, SonicRoutes,
};

/// A group that learns its routes as validation saw it: where its keys
/// are.
pub(super) struct Followed {
    pub(super) name: String,
    pub(super) routes: RouteSource,
    pub(super) span: Range<usize>,
}

impl Ctx<'_> {
    pub(super) fn kernel_routes(
        &self,
        group: &str,
        raw: Spanned<RawKernelRoutes>,
    ) -> Result<KernelRoutes, ConfigError> {
        let span = raw.span();
        let raw = raw.into_inner();
        if raw.table.is_none() && raw.protocol.is_none() {
            return Err(self.error(
                span,
                format!(
                    "group {group:?} kernel_routes names neither a table nor a protocol; \
                     e.g. kernel_routes = {{ table = \"main\", protocol = \"bgp\" }}"
                ),
            ));
        }
        let table = match raw.table {
            None => RT_TABLE_MAIN,
            Some(t) => self.name_or_number(&t, &RT_TABLES, 1..=u32::MAX, "routing table")?,
        };
        let protocol = raw
            .protocol
            .map(|p| self.name_or_number(&p, &RT_PROTOS, 0..=u8::MAX, "route protocol"))
            .transpose()?;
        Ok(KernelRoutes { table, protocol })
    }

    pub(super) fn sonic_routes(
        &self,
        group: &str,
        raw: Spanned<RawSonicRoutes>,
    ) -> Result<SonicRoutes, ConfigError> {
        let protocol = match raw.into_inner().protocol {
            None => None,
            Some(p) if !p.get_ref().is_empty() && !p.get_ref().contains([',', ' ']) => {
                Some(p.into_inner())
            }
            Some(p) => {
                return Err(self.error(
                    p.span(),
                    format!(
                        "group {group:?} sonic_routes protocol {:?} is not a protocol name as \
                         APPL_DB's ROUTE_TABLE rows carry it (e.g. \"bgp\")",
                        p.get_ref()
                    ),
                ));
            }
        };
        Ok(SonicRoutes { protocol })
    }

    /// At most one of `kernel_routes` and `sonic_routes`.
    pub(super) fn route_source(
        &self,
        group: &str,
        kernel: Option<(KernelRoutes, Range<usize>)>,
        sonic: Option<(SonicRoutes, Range<usize>)>,
    ) -> Result<Option<(RouteSource, Range<usize>)>, ConfigError> {
        match (kernel, sonic) {
            (Some(_), Some((_, span))) => Err(self.error(
                span,
                format!(
                    "group {group:?} follows the kernel's routes (kernel_routes): it cannot \
                     follow SONiC's (sonic_routes) too"
                ),
            )),
            (Some((k, span)), None) => Ok(Some((RouteSource::Kernel(k), span))),
            (None, Some((s, span))) => Ok(Some((RouteSource::Sonic(s), span))),
            (None, None) => Ok(None),
        }
    }

    fn name_or_number<T>(
        &self,
        value: &Spanned<NameOrNumber>,
        names: &[(&str, T)],
        range: std::ops::RangeInclusive<T>,
        what: &str,
    ) -> Result<T, ConfigError>
    where
        T: Copy + TryFrom<i64> + PartialOrd + std::fmt::Display,
    {
        match value.get_ref() {
            NameOrNumber::Name(name) => names
                .iter()
                .find(|(n, _)| n == name)
                .map(|&(_, v)| v)
                .ok_or_else(|| {
                    self.error(
                        value.span(),
                        format!(
                            "unknown {what} {name:?} (names: {}; or a number)",
                            Quoted(names)
                        ),
                    )
                }),
            &NameOrNumber::Number(n) => {
                self.in_range(&Spanned::new(value.span(), n), range, what, "")
            }
        }
    }

    /// What a group that learns its routes cannot have: its own next
    /// hops, telemetry that needs a setting per next hop, a filter that
    /// overlaps another such group's, a name another's learned groups take.
    pub(super) fn followed_alone(
        &self,
        followed: &[Followed],
        groups: &[Group],
        name_spans: &[Range<usize>],
    ) -> Result<(), ConfigError> {
        for (i, group) in followed.iter().enumerate() {
            if let Some(first) = followed[..i]
                .iter()
                .find(|f| f.routes.overlaps(&group.routes))
            {
                return Err(self.error(
                    group.span.clone(),
                    format!(
                        "group {:?} follows {} that group {:?} follows too ({}, at {}); a \
                         route can feed one group only",
                        group.name,
                        group.routes,
                        first.name,
                        first.routes,
                        self.at(&first.span)
                    ),
                ));
            }
        }
        for (g, span) in groups.iter().zip(name_spans) {
            let parent = g
                .name
                .rsplit_once('#')
                .filter(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
            if let Some((parent, _)) = parent
                && followed.iter().any(|f| f.name == parent)
            {
                return Err(self.error(
                    span.clone(),
                    format!(
                        "group name {:?} is taken: group {parent:?} learns its routes \
                         and names the groups it learns {parent}#1, {parent}#2, ...",
                        g.name
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Next hops, or learned routes: a group has one or the other.
    pub(super) fn next_hops_or_learned<T>(
        &self,
        group: &str,
        group_span: Range<usize>,
        next_hops: Option<Spanned<Vec<T>>>,
        learns: Option<&RouteSource>,
    ) -> Result<Option<Spanned<Vec<T>>>, ConfigError> {
        match (next_hops, learns) {
            (Some(list), Some(source)) => Err(self.error(
                list.span(),
                format!(
                    "group {group:?} follows {} ({}), whose next hops it learns: \
                     next_hops cannot be set too",
                    source.whose(),
                    source.key()
                ),
            )),
            (None, None) => Err(self.error(
                group_span,
                format!(
                    "group {group:?} has no next_hops; list them, or set kernel_routes \
                     (or sonic_routes) to follow the kernel's routes (or SONiC's)"
                ),
            )),
            (list, _) => Ok(list),
        }
    }

    /// A `[[route]]` cannot point at a group that learns its routes.
    pub(super) fn route_to_followed(
        &self,
        route: &Route,
        groups: &[Group],
        span: Range<usize>,
    ) -> Result<(), ConfigError> {
        let group = &groups[route.group];
        match group.route_source() {
            None => Ok(()),
            Some(source) => Err(self.error(
                span,
                format!(
                    "group {:?} follows {source}; a [[route]] cannot point at it",
                    group.name
                ),
            )),
        }
    }
}
