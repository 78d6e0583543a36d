//! The config tests, one file per concern, and the config texts they
//! share: each helper says on which line and column its parts land, since
//! the expected errors name them.

mod destinations;
mod diagnostics;
mod diff;
mod events;
mod group;
mod kernel_routes;
mod limits;
mod next_hop;
mod overrides;
mod parse;
mod problems;
mod route;
mod schema;
mod switch;
mod telemetry;

use std::path::Path;

use super::{Config, parse};

const FILE: &str = "configs/x.toml";

fn ok(text: &str) -> Config {
    match parse(text, Path::new(FILE)) {
        Ok(config) => config,
        Err(e) => panic!("expected a valid config, got: {e}"),
    }
}

fn err(text: &str) -> String {
    match parse(text, Path::new(FILE)) {
        Ok(config) => panic!("expected an error, got {config:?}"),
        Err(e) => e.to_string(),
    }
}

/// The warnings of valid config `text`, as printed.
fn warnings(text: &str) -> Vec<String> {
    ok(text).warnings.iter().map(ToString::to_string).collect()
}

/// Lines 1-2.
const SWITCH: &str = "[switch]\ninterfaces = [\"eth0\"]\n";

/// `SWITCH`, then a group with a single next hop on lines 3-5, then
/// `route` (starting on line 6).
fn with_route(route: &str) -> String {
    format!(
        "{SWITCH}[[group]]\nname = \"spines\"\n\
         next_hops = [{{ interface = \"eth1\", mac = \"02:00:00:00:01:02\" }}]\n{route}"
    )
}

/// `SWITCH`, then `[[group]]` on line 3 followed by `group` (starting on
/// line 4), then a route to it.
fn with_group(group: &str) -> String {
    format!("{SWITCH}[[group]]\n{group}[[route]]\nprefix = \"10.0.0.0/8\"\ngroup = \"g\"\n")
}

/// `with_route` with one route, of `prefix` to "spines": a minimal valid
/// config for a valid `prefix`. The prefix is on line 7, column 10.
fn route_prefix(prefix: &str) -> String {
    with_route(&format!(
        "[[route]]\nprefix = \"{prefix}\"\ngroup = \"spines\"\n"
    ))
}

/// `switch`, a `[switch]` table, then a valid group "g" and a route to
/// it: a config whose only problems are the switch's.
fn with_switch(switch: &str) -> String {
    format!(
        "{switch}[[group]]\nname = \"g\"\n{NEXT_HOPS}\
         [[route]]\nprefix = \"10.0.0.0/8\"\ngroup = \"g\"\n"
    )
}

/// `text`, which starts with `SWITCH`, with `key` added to the switch
/// table on line 3 (column 1); the rest moves down a line.
fn with_switch_key(text: &str, key: &str) -> String {
    text.replacen(SWITCH, &format!("{SWITCH}{key}\n"), 1)
}

/// A group "g" whose only next hop is `{ interface = "eth1", <next_hop> }`
/// on line 5, column 14.
fn with_next_hop(next_hop: &str) -> String {
    with_group(&format!(
        "name = \"g\"\nnext_hops = [{{ interface = \"eth1\", {next_hop} }}]\n"
    ))
}

/// A `next_hops` line with a single next hop.
const NEXT_HOPS: &str = "next_hops = [{ interface = \"eth1\", ip = \"10.0.0.1\" }]\n";

/// A group "g" with `key` on line 5 (column 1), then `NEXT_HOPS`.
fn with_group_key(key: &str) -> String {
    with_group(&format!("name = \"g\"\n{key}\n{NEXT_HOPS}"))
}

/// `SWITCH`, then for each `(name, interface, ip)` a group of that one
/// next hop (`[[group]]` on line 3, 6, ..., its name at column 8), then
/// `routes`.
fn with_groups(groups: &[(&str, &str, &str)], routes: &str) -> String {
    let mut text = String::from(SWITCH);
    for (name, interface, ip) in groups {
        text += &format!(
            "[[group]]\nname = \"{name}\"\n\
             next_hops = [{{ interface = \"{interface}\", ip = \"{ip}\" }}]\n"
        );
    }
    text + routes
}
