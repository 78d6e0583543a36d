//! Errors from the TOML layer (syntax, types, unknown and missing keys) and
//! the line:column they point at.

use super::{
    NEXT_HOPS, SWITCH, err, route_prefix, with_group_key, with_next_hop, with_route, with_switch,
};

#[test]
fn syntax_error() {
    assert_eq!(
        err("[switch\ninterfaces = [\"eth0\"]\n"),
        "configs/x.toml:1:8: unclosed table, expected `]`"
    );
    assert_eq!(
        err("[switch]\ninterfaces = [\"eth0\"\n"),
        "configs/x.toml:2:21: unclosed array, expected `]`"
    );
}

#[test]
fn type_errors() {
    assert_eq!(
        err("[switch]\nhash_seed = -1\ninterfaces = [\"eth0\"]\n"),
        "configs/x.toml:2:13: hash_seed = -1 is out of range: it takes 0..=4294967295"
    );
    assert_eq!(
        err("[switch]\nhash_seed = 0x1_0000_0000\ninterfaces = [\"eth0\"]\n"),
        "configs/x.toml:2:13: hash_seed = 4294967296 is out of range: it takes 0..=4294967295"
    );
    assert_eq!(
        err(&with_next_hop("ip = \"10.0.0.1\", vlan = \"100\"")),
        "configs/x.toml:5:60: vlan takes a whole number, not the string \"100\": \
         write it without quotes or a unit"
    );
    assert_eq!(
        err(&with_group_key("flowlet_gap_us = \"256us\"")),
        "configs/x.toml:5:18: flowlet_gap_us takes a whole number, not the string \"256us\": \
         write it without quotes or a unit"
    );
    assert_eq!(
        err(&with_group_key("flowlet_gap_us = 2.5")),
        "configs/x.toml:5:18: flowlet_gap_us takes a whole number, not the floating point \
         `2.5`: write it without quotes or a unit"
    );
    assert_eq!(
        err("[switch]\ninterfaces = \"eth0\"\n"),
        "configs/x.toml:2:14: interfaces takes a list in brackets, not the string \"eth0\": \
         e.g. interfaces = [...]"
    );
}

/// `[route]` for `[[route]]` (and the reverse for `[switch]`) reads as a
/// type error at the header to serde; the message names the brackets.
#[test]
fn tables_with_the_wrong_brackets() {
    assert_eq!(
        err(&route_prefix("10.0.0.0/8").replace("[[route]]", "[route]")),
        "configs/x.toml:6:1: [route] is a single table, but a config lists routes: \
         write [[route]] above each one"
    );
    assert_eq!(
        err(&with_group_key("").replace("[[group]]", "[group]")),
        "configs/x.toml:3:1: [group] is a single table, but a config lists groups: \
         write [[group]] above each one"
    );
    assert_eq!(
        err(&SWITCH.replace("[switch]", "[[switch]]")),
        "configs/x.toml:1:1: there is one [switch] table, not a list of them: write [switch]"
    );
    for table in ["ars_profile", "telemetry"] {
        assert_eq!(
            err(&format!(
                "{}[[{table}]]  # shared\n",
                route_prefix("10.0.0.0/8")
            )),
            format!(
                "configs/x.toml:9:1: there is one [{table}] table, not a list of them: \
                 write [{table}]"
            )
        );
    }
    // After [[route]]s, a [route] reads to the toml crate as a table
    // defined twice; [[group]] after a [group] likewise.
    assert_eq!(
        err(&format!("{}[route]\n", route_prefix("10.0.0.0/8"))),
        "configs/x.toml:9:2: [route] is a single table, but a config lists routes: \
         write [[route]] above each one"
    );
    assert_eq!(
        err(&format!(
            "{}[[group]]\n",
            with_group_key("").replace("[[group]]", "[group]")
        )),
        "configs/x.toml:10:3: [[group]] after a [group]: a config lists groups, \
         so write [[group]] above each one"
    );
}

/// The toml crate's "duplicate key" names no key; the message does.
#[test]
fn duplicates_name_the_key() {
    assert_eq!(
        err(&format!("{SWITCH}hash_seed = 1\nhash_seed = 2\n")),
        "configs/x.toml:4:1: duplicate key `hash_seed`: a key may be set once per table"
    );
    assert_eq!(
        err(&with_next_hop("ip = \"10.0.0.1\", ip = \"10.0.0.2\"")),
        "configs/x.toml:5:53: duplicate key `ip`: a key may be set once per table"
    );
    assert_eq!(
        err(&format!("{SWITCH}[switch]\n")),
        "configs/x.toml:3:2: table [switch] is defined twice: put all its keys under one [switch]"
    );
}

/// serde names Rust types; the messages name what the file should hold.
#[test]
fn type_errors_say_what_the_file_should_hold() {
    assert_eq!(
        err(&with_group_key("mode = 1")),
        "configs/x.toml:5:8: mode takes a string in quotes, not the integer `1`"
    );
    assert_eq!(
        err("[switch]\ninterfaces = [\"eth0\", [\"eth1\"]]\n"),
        "configs/x.toml:2:23: expected a string in quotes, not the list"
    );
    assert_eq!(
        err(&with_route(
            "[[route]]\nprefix = \"10.0.0.0/8\"\ngroup = [\"spines\"]\n"
        )),
        "configs/x.toml:8:9: group takes a string in quotes, not the list"
    );
    assert_eq!(
        err(&with_group_key("").replace(NEXT_HOPS, "next_hops = [\"eth1\"]\n")),
        "configs/x.toml:6:14: expected a next hop, e.g. { interface = \"eth1\", \
         ip = \"10.0.0.1\" }, not the string \"eth1\""
    );
    assert_eq!(
        err(&with_group_key("").replace("name = \"g\"", "name = { a = 1 }")),
        "configs/x.toml:4:8: name takes a string in quotes, not the table"
    );
    // serde's words for a value's kind, not inside a value.
    assert_eq!(
        err(&with_group_key("flowlet_gap_us = \"a map, a sequence\"")),
        "configs/x.toml:5:18: flowlet_gap_us takes a whole number, not the string \
         \"a map, a sequence\": write it without quotes or a unit"
    );
    assert_eq!(
        err("switch = 1\n"),
        "configs/x.toml:1:10: switch takes the [switch] table, not the integer `1`"
    );
    assert_eq!(
        err(&format!(
            "{SWITCH}flowlet_table_size = 99999999999999999999\n"
        )),
        "configs/x.toml:3:22: flowlet_table_size = 99999999999999999999 is out of range"
    );
}

#[test]
fn unknown_key() {
    assert_eq!(
        err("[switch]\ninterfaces = [\"eth0\"]\nhash_sead = 1\n"),
        "configs/x.toml:3:1: unknown field `hash_sead`, \
         expected one of `hash_seed`, `interfaces`, `xdp_mode`, `flowlet_table_size`, `dlb_mac`"
    );
    assert_eq!(
        err(&with_group_key("weight = 2")),
        "configs/x.toml:5:1: unknown field `weight`, \
         expected one of `name`, `mode`, `hash_fields`, `flowlet_gap_us`, `spray`, `flowlet_choice`, \
         `telemetry`, `telemetry_url`, `telemetry_device`, `counters_db`, `sonic_port`, `switch_addresses`, `next_hops`, \
         `kernel_routes`, `sonic_routes`, `destinations`"
    );
    assert_eq!(
        err(&with_next_hop("ip = \"10.0.0.1\", vlna = 5")),
        "configs/x.toml:5:53: unknown field `vlna`, \
         expected one of `interface`, `mac`, `ip`, `vlan`, `telemetry_url`, \
         `telemetry_device`, `sonic_port`, `counters_db`"
    );
    assert_eq!(
        err(&with_route(
            "[[route]]\nprefix = \"10.0.0.0/8\"\ngroup = \"spines\"\nmetric = 1\n"
        )),
        "configs/x.toml:9:1: unknown field `metric`, expected `prefix` or `group`"
    );
    assert_eq!(
        err(&format!("{}[routes]\n", with_route(""))),
        "configs/x.toml:6:2: unknown field `routes`, expected one of `switch`, `ars_profile`, `telemetry`, `events`, `group`, `route`, `override`"
    );
}

#[test]
fn missing_switch() {
    assert_eq!(
        err("# empty\n"),
        "configs/x.toml:1:1: missing field `switch`"
    );
    assert_eq!(
        err(&with_route("").replacen(SWITCH, "", 1)),
        "configs/x.toml:1:1: missing field `switch`"
    );
}

#[test]
fn columns_count_characters_and_lines_survive_crlf() {
    let text = with_route("[[route]]\nprefix = \"10.1.0.0/16\"\ngroup = \"spïnes\"\n")
        .replace('\n', "\r\n");
    assert_eq!(
        err(&text),
        "configs/x.toml:8:9: unknown group \"spïnes\" (defined groups: \"spines\")"
    );
    let text = with_switch("[switch]\ninterfaces = [\"ü\", \"ü\"]\n").replace('\n', "\r\n");
    assert_eq!(
        err(&text),
        "configs/x.toml:2:20: duplicate interface \"ü\" in switch.interfaces \
         (first at line 2, column 15)"
    );
}
