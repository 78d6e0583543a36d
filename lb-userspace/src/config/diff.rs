//! What a live reload changes, for the daemon's log.

use lb_common::select::hash::HashFields;

use super::schema::{Config, Prefix};

/// What differs between two configs, one line per change, for the log of
/// a live reload.
pub fn changes(old: &Config, new: &Config) -> Vec<String> {
    let mut out = Vec::new();
    let (a, b) = (&old.switch, &new.switch);
    if a.hash_seed != b.hash_seed {
        out.push(format!(
            "switch.hash_seed {:#x} -> {:#x}",
            a.hash_seed, b.hash_seed
        ));
    }
    for name in b.interfaces.iter().filter(|i| !a.interfaces.contains(i)) {
        out.push(format!("switch.interfaces: {name:?} added"));
    }
    for name in a.interfaces.iter().filter(|i| !b.interfaces.contains(i)) {
        out.push(format!("switch.interfaces: {name:?} removed"));
    }
    if a.xdp_mode != b.xdp_mode {
        out.push(format!("switch.xdp_mode {} -> {}", a.xdp_mode, b.xdp_mode));
    }
    if a.flowlet_table_size != b.flowlet_table_size {
        out.push(format!(
            "switch.flowlet_table_size {} -> {}",
            a.flowlet_table_size, b.flowlet_table_size
        ));
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
        if was.mode != group.mode {
            out.push(format!(
                "group {name:?}: mode {} -> {}",
                was.mode, group.mode
            ));
        }
        if was.flowlet_gap_us != group.flowlet_gap_us {
            out.push(format!(
                "group {name:?}: flowlet_gap_us {} -> {}",
                was.flowlet_gap_us, group.flowlet_gap_us
            ));
        }
        if was.spray != group.spray {
            out.push(format!(
                "group {name:?}: spray {} -> {}",
                was.spray, group.spray
            ));
        }
        if was.hash_fields != group.hash_fields {
            out.push(format!(
                "group {name:?}: hash_fields {} -> {}",
                field_list(was.hash_fields),
                field_list(group.hash_fields)
            ));
        }
        for nh in group
            .next_hops
            .iter()
            .filter(|n| !was.next_hops.contains(n))
        {
            out.push(format!("group {name:?}: next hop \"{nh}\" added"));
        }
        for nh in was
            .next_hops
            .iter()
            .filter(|n| !group.next_hops.contains(n))
        {
            out.push(format!("group {name:?}: next hop \"{nh}\" removed"));
        }
    }
    for group in old
        .groups
        .iter()
        .filter(|g| !new.groups.iter().any(|n| n.name == g.name))
    {
        out.push(format!("group {:?} removed", group.name));
    }
    let target = |config: &Config, prefix: &Prefix| {
        config
            .routes
            .iter()
            .find(|r| r.prefix == *prefix)
            .map(|r| config.groups[r.group].name.clone())
    };
    for route in &new.routes {
        let group = &new.groups[route.group].name;
        match target(old, &route.prefix) {
            None => out.push(format!("route {} -> {group:?} added", route.prefix)),
            Some(was) if was != *group => out.push(format!(
                "route {}: group {was:?} -> {group:?}",
                route.prefix
            )),
            Some(_) => {}
        }
    }
    for route in &old.routes {
        if target(new, &route.prefix).is_none() {
            out.push(format!("route {} removed", route.prefix));
        }
    }
    out
}

/// `[src_ip, dst_ip]`.
fn field_list(fields: HashFields) -> String {
    let names: Vec<&str> = HashFields::NAMES
        .iter()
        .filter(|(_, f)| fields.contains(*f))
        .map(|(n, _)| *n)
        .collect();
    format!("[{}]", names.join(", "))
}
