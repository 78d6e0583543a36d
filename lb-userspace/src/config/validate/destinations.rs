//! A group's `destinations`: routes rated by the next switch's queue
//! toward where they lead.

use std::collections::HashMap;

use lb_common::limits::MAX_CLASSES;
use toml::Spanned;

use crate::config::diagnostics::{ConfigError, Ctx};
use crate::config::raw::RawDestination;
use crate::config::schema::{Destination, GroupTelemetry, NAME_MAX_LEN};

/// Destinations every group may have between them: class 0 is the next
/// hops' own.
const MAX_DESTINATIONS: usize = MAX_CLASSES as usize - 1;

impl Ctx<'_> {
    /// Group `group`'s destinations; `taken` counts those of the groups
    /// before it.
    pub(super) fn destinations(
        &self,
        group: &str,
        raw: Option<Spanned<Vec<Spanned<RawDestination>>>>,
        telemetry: Option<&GroupTelemetry>,
        taken: &mut usize,
    ) -> Result<Vec<Destination>, ConfigError> {
        let Some(raw) = raw else {
            return Ok(Vec::new());
        };
        let reads_next_switch = match telemetry {
            Some(
                GroupTelemetry::Remote { .. }
                | GroupTelemetry::RemoteTemplate { .. }
                | GroupTelemetry::CountersDbTemplate { .. },
            ) => true,
            Some(GroupTelemetry::CountersDb { switches, .. }) => {
                !switches.is_empty() && switches.iter().all(Option::is_some)
            }
            _ => false,
        };
        if !reads_next_switch {
            return Err(self.error(
                raw.span(),
                format!(
                    "destinations rate next hops by the next switch's queue toward each \
                     destination: group {group:?} needs telemetry = \"remote\", or \
                     \"counters-db\" with each next hop's counters_db (the next switch's, \
                     or in a group that learns its next hops the group's template)"
                ),
            ));
        }
        let mut names = HashMap::new();
        let mut prefixes = HashMap::new();
        let mut destinations = Vec::new();
        for destination in raw.into_inner() {
            // Only where the count crosses the limit, as for next hops.
            *taken += 1;
            if *taken == MAX_DESTINATIONS + 1 {
                return Err(self.error(
                    destination.span(),
                    format!(
                        "too many destinations: at most {MAX_DESTINATIONS} are allowed across \
                         all groups"
                    ),
                ));
            }
            let destination = destination.into_inner();
            let name_span = destination.name.span();
            let name = self.name(destination.name, "destination name", NAME_MAX_LEN)?;
            self.unique(
                &mut names,
                name.clone(),
                name_span,
                format_args!("destination {name:?} in group {group:?}"),
            )?;
            let list = self.non_empty(
                destination.prefixes,
                format_args!("destination {name:?} of group {group:?} has no prefixes"),
            )?;
            let mut own = Vec::with_capacity(list.len());
            for text in list {
                let prefix = self.plain_prefix(&text)?;
                self.unique(
                    &mut prefixes,
                    prefix,
                    text.span(),
                    format_args!("prefix {prefix} among group {group:?}'s destinations"),
                )?;
                own.push(prefix);
            }
            destinations.push(Destination {
                name,
                prefixes: own,
                telemetry_device: self
                    .device_template(destination.telemetry_device, "telemetry_device")?,
            });
        }
        Ok(destinations)
    }
}
