//! Turns the raw layer into a [`Config`], one table at a time, recording
//! each problem and going on with what does not depend on it. The checks are methods of [`Ctx`], which knows where
//! in the text each error points. Those several tables use live here; each
//! table's own rules live in its module.

mod destinations;
mod events;
mod group;
mod next_hop;
mod overrides;
mod route;
mod route_source;
mod switch;
mod telemetry;

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt;
use std::hash::Hash;
use std::ops::{Range, RangeInclusive};

use toml::Spanned;

use super::diagnostics::{ConfigError, Ctx, Quoted};
use super::raw::RawConfig;
use super::schema::{Config, IFNAME_MAX_LEN};
use overrides::Known;

impl Ctx<'_> {
    /// Groups before routes: a route names its group, and gets its index.
    /// Each table, and each group, route and override, is checked on its
    /// own, so that one pass reports every problem of a file; what depends
    /// on a refused table (groups on `[telemetry]`, which depends on
    /// `[ars_profile]`) is checked once that is fixed. Problems and
    /// warnings are sorted into file order, as an operator reads the file.
    pub(super) fn validate(&self, raw: RawConfig) -> Result<Config, ConfigError> {
        let switch = self.recover(self.switch(raw.switch));
        let shared_tables = [
            raw.ars_profile
                .as_ref()
                .map(|t| ("[ars_profile]", t.span())),
            raw.telemetry.as_ref().map(|t| ("[telemetry]", t.span())),
        ];
        let ars_profile = self.recover(self.ars_profile(raw.ars_profile));
        let events = self.recover(self.events(raw.events));
        let telemetry = ars_profile
            .as_ref()
            .and_then(|profile| self.recover(self.telemetry_settings(raw.telemetry, profile)));
        let (groups, routes) = match telemetry.as_ref() {
            Some(telemetry) => {
                let groups = self.groups(raw.group, telemetry);
                self.recover(self.followed_alone(
                    &groups.followed,
                    &groups.valid,
                    &groups.name_spans,
                ));
                let routes = self.routes(raw.route, &groups);
                (groups.complete.then_some(groups), routes)
            }
            None => (None, None),
        };
        let known = switch.as_ref().zip(groups.as_ref()).zip(routes.as_deref());
        let overrides = self.overrides(
            raw.overrides,
            known.map(|((switch, groups), routes)| Known {
                switch,
                groups: &groups.valid,
                routes,
            }),
        );
        let checked = (
            switch,
            ars_profile,
            telemetry,
            events,
            groups,
            routes,
            overrides,
        );
        let (switch, ars_profile, telemetry, events, groups, routes, overrides) =
            match (self.refusal(), checked) {
                (None, (Some(s), Some(a), Some(t), Some(e), Some(g), Some(r), Some(o))) => {
                    (s, a, t, e, g, r, o)
                }
                (refusal, _) => return Err(refusal.expect("whatever was refused recorded why")),
            };
        self.unrouted_groups(&groups.valid, &routes, &groups.name_spans);
        self.unread_telemetry_tables(shared_tables.into_iter().flatten(), &groups.valid);
        let mut warnings = self.take_warnings();
        warnings.sort_by_key(|w| (w.line, w.column));
        Ok(Config {
            switch,
            ars_profile,
            telemetry,
            events,
            groups: groups.valid,
            routes,
            overrides,
            warnings,
        })
    }

    /// The items of `list`; an error `empty` at the list if it has none.
    fn non_empty<T>(
        &self,
        list: Spanned<Vec<T>>,
        empty: fmt::Arguments<'_>,
    ) -> Result<Vec<T>, ConfigError> {
        let span = list.span();
        let list = list.into_inner();
        if list.is_empty() {
            return Err(self.error(span, empty.to_string()));
        }
        Ok(list)
    }

    /// An error `too_many` at the first item past `max`, if there is one.
    fn at_most<T>(
        &self,
        list: &[Spanned<T>],
        max: usize,
        too_many: fmt::Arguments<'_>,
    ) -> Result<(), ConfigError> {
        match list.get(max) {
            Some(extra) => Err(self.error(extra.span(), too_many.to_string())),
            None => Ok(()),
        }
    }

    /// Checks that there are `1..=max` `[[kind]]` tables: none is an error
    /// at the top of the file, too many one at the first past `max`.
    fn table_count<T>(
        &self,
        tables: &[Spanned<T>],
        kind: &str,
        max: u32,
    ) -> Result<(), ConfigError> {
        self.table_count_or_none(tables, kind, max, false)
    }

    /// [`Self::table_count`], none allowed when `none_ok`.
    fn table_count_or_none<T>(
        &self,
        tables: &[Spanned<T>],
        kind: &str,
        max: u32,
        none_ok: bool,
    ) -> Result<(), ConfigError> {
        if tables.is_empty() && !none_ok {
            return Err(self.error(
                0..0,
                format!("no [[{kind}]] defined; at least one {kind} is required"),
            ));
        }
        self.at_most(
            tables,
            max as usize,
            format_args!("too many {kind}s: at most {max} are allowed"),
        )
    }

    /// Records that `key` is defined at `span`, or, if `seen` already has
    /// it, an error "duplicate {what} (first at ...)" at `span`.
    fn unique<K: Eq + Hash>(
        &self,
        seen: &mut HashMap<K, Range<usize>>,
        key: K,
        span: Range<usize>,
        what: fmt::Arguments<'_>,
    ) -> Result<(), ConfigError> {
        match seen.entry(key) {
            Entry::Occupied(first) => Err(self.error(
                span,
                format!("duplicate {what} (first at {})", self.at(first.get())),
            )),
            Entry::Vacant(slot) => {
                slot.insert(span);
                Ok(())
            }
        }
    }

    /// The value `names` gives `name`, or an error
    /// "{unknown} \"name\" ({listed}: \"a\", \"b\")" listing the valid names.
    fn lookup<T: Copy>(
        &self,
        name: &Spanned<String>,
        names: &[(&str, T)],
        unknown: &str,
        listed: &str,
    ) -> Result<T, ConfigError> {
        match names.iter().find(|(n, _)| n == name.get_ref()) {
            Some(&(_, value)) => Ok(value),
            None => Err(self.error(
                name.span(),
                format!(
                    "{unknown} {:?} ({listed}: {})",
                    name.get_ref(),
                    Quoted(names)
                ),
            )),
        }
    }

    /// [`Self::lookup`] for an optional key: the type's default when the
    /// key is absent.
    fn lookup_or_default<T: Copy + Default>(
        &self,
        name: Option<Spanned<String>>,
        names: &[(&str, T)],
        unknown: &str,
        listed: &str,
    ) -> Result<T, ConfigError> {
        name.map_or(Ok(T::default()), |name| {
            self.lookup(&name, names, unknown, listed)
        })
    }

    /// `value` as a `T` within `range`, or an error
    /// "{what} {value} is out of range {min}..={max}{hint}".
    fn in_range<T>(
        &self,
        value: &Spanned<i64>,
        range: RangeInclusive<T>,
        what: &str,
        hint: &str,
    ) -> Result<T, ConfigError>
    where
        T: TryFrom<i64> + PartialOrd + fmt::Display,
    {
        let v = *value.get_ref();
        T::try_from(v)
            .ok()
            .filter(|t| range.contains(t))
            .ok_or_else(|| {
                self.error(
                    value.span(),
                    format!(
                        "{what} {v} is out of range {}..={}{hint}",
                        range.start(),
                        range.end()
                    ),
                )
            })
    }

    /// `name`, called `what` in errors, if it is not empty and at most
    /// `max` bytes long.
    fn name(&self, name: Spanned<String>, what: &str, max: usize) -> Result<String, ConfigError> {
        let span = name.span();
        let name = name.into_inner();
        if name.is_empty() {
            return Err(self.error(span, format!("{what} is empty")));
        }
        if name.len() > max {
            return Err(self.error(
                span,
                format!(
                    "{what} {name:?} is {} bytes long; at most {max} are allowed",
                    name.len()
                ),
            ));
        }
        Ok(name)
    }

    /// Checks a name the way the kernel's `dev_valid_name` does.
    pub(super) fn ifname(&self, name: Spanned<String>) -> Result<String, ConfigError> {
        let span = name.span();
        let name = self.name(name, "interface name", IFNAME_MAX_LEN)?;
        let bad_byte = |b: &u8| {
            matches!(
                b,
                0 | b'/' | b':' | b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | 0xa0
            )
        };
        if name == "." || name == ".." || name.as_bytes().iter().any(bad_byte) {
            return Err(self.error(
                span,
                format!(
                    "invalid interface name {name:?}: it must not be \".\" or \"..\" \
                     or contain '/', ':', whitespace or NUL"
                ),
            ));
        }
        Ok(name)
    }
}
