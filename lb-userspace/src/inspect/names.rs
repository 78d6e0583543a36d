//! Names for the ids the maps hold. The maps know groups and next hops by
//! id only; the config names them. Ids are what the daemon's
//! [`Tables::build`] hands out, so building the config's tables here gives
//! the same ids the daemon gave it at start. After live reloads that
//! removed groups or next hops the daemon's ids may differ from a fresh
//! build: a group is named only when its map entry is what the config
//! makes of it, and otherwise shown by id with a note.

use std::collections::HashMap;

use lb_common::abi::{GroupEntry, NextHop};
use lb_common::limits::MAX_GROUPS;
use lb_common::route::Destination;

use super::interfaces::Interfaces;
use super::maps::InspectError;
use super::view::MapView;
use crate::config::Config;
use crate::dataplane::tables::Tables;

#[derive(Debug, Default)]
pub struct Names {
    groups: HashMap<u32, String>,
    /// Class id -> destination name.
    classes: HashMap<u32, String>,
    nexthops: HashMap<u32, String>,
    /// The daemon's interfaces, by the ifindexes the maps hold.
    interfaces: Interfaces,
    /// Why some ids go unnamed.
    pub notes: Vec<String>,
}

/// The fields of a group entry a config decides; the flowlet generation
/// is the daemon's history, not the config's.
fn configured(entry: &GroupEntry) -> GroupEntry {
    GroupEntry {
        generation: 0,
        ..*entry
    }
}

impl Names {
    /// These names with `interfaces` (from [`Interfaces::of_process`]),
    /// and its note among the notes when they are not the daemon's.
    pub fn with_interfaces(mut self, interfaces: Interfaces) -> Self {
        self.notes.extend(interfaces.note().map(str::to_owned));
        self.interfaces = interfaces;
        self
    }

    /// The daemon's name for interface `ifindex`, `?` when it has none.
    pub fn interface(&self, ifindex: u32) -> String {
        self.interfaces.name(ifindex)
    }

    /// Names from `config` for the groups of `maps` that match it.
    pub fn from_config(config: &Config, maps: &dyn MapView) -> Result<Self, InspectError> {
        let tables = match Tables::build(config, None, |_| NextHop::default()) {
            Ok(tables) => tables,
            Err(e) => {
                return Ok(Self {
                    notes: vec![format!("no names from the config: {e}")],
                    ..Self::default()
                });
            }
        };
        let mut names = Self::default();
        for group in &tables.groups {
            if group.id >= MAX_GROUPS {
                continue;
            }
            let loaded = maps.group_at(group.id)?.unwrap_or_default();
            if configured(&loaded) != configured(&group.entry) {
                names.notes.push(format!(
                    "group \"{}\" of the config is not what the maps hold at id {}: \
                     the config differs from what is loaded; shown by id",
                    group.name, group.id
                ));
                continue;
            }
            names.groups.insert(group.id, group.name.clone());
            for class in &group.classes {
                names.classes.insert(class.id, class.name.clone());
            }
            for (id, spec) in group.members.iter().zip(&group.specs) {
                names.nexthops.insert(*id, spec.to_string());
            }
        }
        Ok(names)
    }

    /// `spines (id 0)`, or `id 3` for a group the config does not name.
    pub fn group(&self, id: u32) -> String {
        match self.groups.get(&id) {
            Some(name) => format!("{name} (id {id})"),
            None => format!("id {id}"),
        }
    }

    /// `group spines (id 0)`, with `, destination leaf3 (class 2)` for a
    /// route value that carries a class.
    pub fn destination(&self, destination: Destination) -> String {
        let group = format!("group {}", self.group(destination.group));
        match (destination.class, self.class(destination.class)) {
            (0, _) => group,
            (class, Some(name)) => format!("{group}, destination {name} (class {class})"),
            (class, None) => format!("{group}, destination class {class}"),
        }
    }

    /// The destination the config names class `class` for, if any.
    pub fn class(&self, class: u32) -> Option<&str> {
        self.classes.get(&class).map(String::as_str)
    }

    /// Whether group `id` has a name from the config.
    pub fn group_name(&self, id: u32) -> Option<&str> {
        self.groups.get(&id).map(String::as_str)
    }

    /// The next hop's spec as configured (`eth4 10.0.1.1`), if known.
    pub fn nexthop(&self, id: u32) -> Option<&str> {
        self.nexthops.get(&id).map(String::as_str)
    }
}
