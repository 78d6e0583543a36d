//! What a live reload changes, for the daemon's log.

use std::collections::HashMap;
use std::fmt;

use lb_common::select::hash::HashFields;

use super::schema::{Config, Destination, Prefix, RouteSource};

/// What differs between two configs, one line per change, for the log of
/// a live reload.
pub fn changes(old: &Config, new: &Config) -> Vec<String> {
    let mut out = Vec::new();
    let (a, b) = (&old.switch, &new.switch);
    changed(
        &mut out,
        "switch.hash_seed",
        Hex(a.hash_seed),
        Hex(b.hash_seed),
    );
    added_removed(&mut out, &a.interfaces, &b.interfaces, |name, how| {
        format!("switch.interfaces: {name:?} {how}")
    });
    changed(&mut out, "switch.xdp_mode", a.xdp_mode, b.xdp_mode);
    changed(
        &mut out,
        "switch.flowlet_table_size",
        a.flowlet_table_size,
        b.flowlet_table_size,
    );
    if a.dlb_mac != b.dlb_mac {
        let mac = |m: Option<[u8; 6]>| m.map_or_else(|| "none".to_owned(), super::format_mac);
        out.push(format!(
            "switch.dlb_mac {} -> {}",
            mac(a.dlb_mac),
            mac(b.dlb_mac)
        ));
    }
    if old.ars_profile != new.ars_profile {
        out.push(format!(
            "ars_profile {:?} -> {:?}",
            old.ars_profile, new.ars_profile
        ));
    }
    if old.telemetry != new.telemetry {
        out.push(format!(
            "telemetry {:?} -> {:?}",
            old.telemetry, new.telemetry
        ));
    }
    if old.events != new.events {
        out.push(format!("events {:?} -> {:?}", old.events, new.events));
    }
    for group in &new.groups {
        let Some(was) = old.groups.iter().find(|g| g.name == group.name) else {
            out.push(format!(
                "group {:?} added: mode {}, {} next hops",
                group.name,
                group.mode,
                group.next_hops.len()
            ));
            continue;
        };
        let name = &group.name;
        changed(
            &mut out,
            format_args!("group {name:?}: mode"),
            was.mode,
            group.mode,
        );
        changed(
            &mut out,
            format_args!("group {name:?}: flowlet_gap_us"),
            was.flowlet_gap_us,
            group.flowlet_gap_us,
        );
        changed(
            &mut out,
            format_args!("group {name:?}: spray"),
            was.spray,
            group.spray,
        );
        changed(
            &mut out,
            format_args!("group {name:?}: hash_fields"),
            FieldList(was.hash_fields),
            FieldList(group.hash_fields),
        );
        changed(
            &mut out,
            format_args!("group {name:?}: flowlet_choice"),
            was.flowlet_choice,
            group.flowlet_choice,
        );
        if was.destinations != group.destinations {
            out.push(format!(
                "group {name:?}: destinations {} -> {}",
                Destinations(&was.destinations),
                Destinations(&group.destinations)
            ));
        }
        if was.telemetry != group.telemetry {
            out.push(format!(
                "group {name:?}: telemetry {:?} -> {:?}",
                was.telemetry, group.telemetry
            ));
        }
        if was.route_source() != group.route_source() {
            let show =
                |s: Option<RouteSource>| s.map_or("its own next hops".into(), |s| s.to_string());
            out.push(format!(
                "group {name:?}: {} -> {}",
                show(was.route_source()),
                show(group.route_source())
            ));
        }
        if was.weights != group.weights {
            out.push(format!(
                "group {name:?}: weights {:?} -> {:?}",
                was.weights, group.weights
            ));
        }
        added_removed(&mut out, &was.next_hops, &group.next_hops, |nh, how| {
            format!("group {name:?}: next hop \"{nh}\" {how}")
        });
    }
    for group in old
        .groups
        .iter()
        .filter(|g| !new.groups.iter().any(|n| n.name == g.name))
    {
        out.push(format!("group {:?} removed", group.name));
    }
    // Indexed by prefix: a config holds up to 16384 routes, and a scan per
    // route made a reload of that many take seconds.
    let (old_targets, new_targets) = (route_targets(old), route_targets(new));
    for route in &new.routes {
        let group = &new.groups[route.group].name;
        match old_targets.get(&route.prefix) {
            None => out.push(format!("route {} -> {group:?} added", route.prefix)),
            Some(&was) if was != group => out.push(format!(
                "route {}: group {was:?} -> {group:?}",
                route.prefix
            )),
            Some(_) => {}
        }
    }
    for route in &old.routes {
        if !new_targets.contains_key(&route.prefix) {
            out.push(format!("route {} removed", route.prefix));
        }
    }
    for entry in &new.overrides {
        match old.overrides.iter().find(|o| o.name == entry.name) {
            None => out.push(format!("override {:?} added: {entry}", entry.name)),
            Some(was) if was != entry => {
                out.push(format!("override {:?}: {was} -> {entry}", entry.name))
            }
            Some(_) => {}
        }
    }
    for entry in &old.overrides {
        if !new.overrides.iter().any(|o| o.name == entry.name) {
            out.push(format!("override {:?} removed", entry.name));
        }
    }
    out
}

/// Each route's prefix -> the name of the group that carries it.
fn route_targets(config: &Config) -> HashMap<&Prefix, &String> {
    config
        .routes
        .iter()
        .map(|r| (&r.prefix, &config.groups[r.group].name))
        .collect()
}

/// A group's destinations as a log line shows them:
/// `[leaf2 10.2.0.0/16 via l2, leaf3 10.3.0.0/16 10.30.0.0/16 via l3]`.
struct Destinations<'a>(&'a [Destination]);

impl fmt::Display for Destinations<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{}", d.name)?;
            for prefix in &d.prefixes {
                write!(f, " {prefix}")?;
            }
            write!(f, " via {}", d.telemetry_device)?;
        }
        f.write_str("]")
    }
}

/// Adds "{what} {old} -> {new}" if the value changed.
fn changed<T: PartialEq + fmt::Display>(
    out: &mut Vec<String>,
    what: impl fmt::Display,
    old: T,
    new: T,
) {
    if old != new {
        out.push(format!("{what} {old} -> {new}"));
    }
}

/// Adds `line(item, "added")` for each item only `new` has, then
/// `line(item, "removed")` for each only `old` has; order within a list is
/// not a change.
fn added_removed<T: PartialEq>(
    out: &mut Vec<String>,
    old: &[T],
    new: &[T],
    line: impl Fn(&T, &str) -> String,
) {
    for item in new.iter().filter(|i| !old.contains(i)) {
        out.push(line(item, "added"));
    }
    for item in old.iter().filter(|i| !new.contains(i)) {
        out.push(line(item, "removed"));
    }
}

/// A hash seed the way a config writes it: `0x5eed1234`.
#[derive(PartialEq)]
struct Hex(u32);

impl fmt::Display for Hex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// Hash fields by name: `[src_ip, dst_ip]`.
#[derive(PartialEq)]
struct FieldList(HashFields);

impl fmt::Display for FieldList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = HashFields::NAMES
            .iter()
            .filter(|(_, field)| self.0.contains(*field))
            .map(|(n, _)| *n)
            .collect();
        write!(f, "[{}]", names.join(", "))
    }
}
