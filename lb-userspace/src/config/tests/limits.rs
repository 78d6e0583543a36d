//! The data plane's table sizes and the caps on what a file may list or
//! name: each limit is reachable exactly and one past it is an error at
//! the first item too many; a value too long to repeat is quoted cut short.

use lb_common::limits::{MAX_GROUPS, MAX_NEXTHOPS_PER_GROUP, MAX_ROUTES};

use super::{NEXT_HOPS, SWITCH, err, ok, with_group, with_route, with_switch};
use crate::config::{MAX_INGRESS_INTERFACES, NAME_MAX_LEN};

/// `groups` groups "g0".. of `per_group` next hops each, one next hop a
/// line, with interface `interface(group, index)` and a MAC unique over
/// the file; a route to "g0". Group `g`'s `[[group]]` is on line
/// `3 + g * (per_group + 4)`, its next hop `i` on line
/// `6 + g * (per_group + 4) + i`, column 3.
fn many(groups: usize, per_group: usize, interface: impl Fn(usize, usize) -> String) -> String {
    let mut text = String::from(SWITCH);
    for g in 0..groups {
        text += &format!("[[group]]\nname = \"g{g}\"\nnext_hops = [\n");
        for i in 0..per_group {
            let iface = interface(g, i);
            text += &format!(
                "  {{ interface = \"{iface}\", mac = \"02:00:00:00:{g:02x}:{i:02x}\" }},\n"
            );
        }
        text += "]\n";
    }
    text + "[[route]]\nprefix = \"10.0.0.0/8\"\ngroup = \"g0\"\n"
}

#[test]
fn limits_are_reachable_exactly() {
    let mut per_group = ok(&many(1, MAX_NEXTHOPS_PER_GROUP, |_, _| "eth1".into()));
    assert_eq!(per_group.groups.pop().map(|g| g.next_hops.len()), Some(64));

    let groups = ok(&many(MAX_GROUPS as usize, 1, |_, _| "eth1".into()));
    assert_eq!(groups.groups.len(), 64);

    // 16 groups of 64: exactly MAX_NEXTHOPS.
    let total = ok(&many(16, 64, |_, _| "eth1".into()));
    assert_eq!(
        total
            .groups
            .iter()
            .map(|g| g.next_hops.len())
            .sum::<usize>(),
        1024
    );

    // 4 groups of 64 distinct interfaces: exactly MAX_EGRESS_PORTS.
    let ports = ok(&many(4, 64, |g, i| format!("p{g}x{i}")));
    let mut distinct: Vec<_> = ports
        .groups
        .iter()
        .flat_map(|g| g.next_hops.iter().map(|n| n.interface.as_str()))
        .collect();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), 256);
}

#[test]
fn too_many_next_hops_in_a_group() {
    // Next hop 64 of group 0: line 6 + 64.
    assert_eq!(
        err(&many(1, MAX_NEXTHOPS_PER_GROUP + 1, |_, _| "eth1".into())),
        "configs/x.toml:70:3: group \"g0\" has too many next hops: \
         at most 64 are allowed per group"
    );
}

#[test]
fn too_many_groups() {
    // Group 64's header: line 3 + 64 * 5.
    assert_eq!(
        err(&many(MAX_GROUPS as usize + 1, 1, |_, _| "eth1".into())),
        "configs/x.toml:323:1: too many groups: at most 64 are allowed"
    );
}

#[test]
fn too_many_next_hops_in_total() {
    // Next hop 0 of group 16: line 6 + 16 * 68.
    assert_eq!(
        err(&many(17, 64, |_, _| "eth1".into())),
        "configs/x.toml:1094:3: too many next hops: at most 1024 are allowed across all groups"
    );
}

#[test]
fn too_many_egress_interfaces() {
    // Groups 0-3 use 256 distinct interfaces; group 4 reuses one of
    // them except at next hop `new`, which introduces the 257th: line
    // 6 + 4 * 68 + new, at its interface value (column 17). Reusing an
    // interface before or after that is fine.
    for (new, line) in [(0, 278), (63, 341)] {
        let text = many(5, 64, |g, i| {
            if g == 4 && i != new {
                "p0x0".into()
            } else {
                format!("p{g}x{i}")
            }
        });
        assert_eq!(
            err(&text),
            format!(
                "configs/x.toml:{line}:17: too many egress interfaces: \
                 at most 256 distinct next-hop interfaces are allowed"
            )
        );
    }
}

#[test]
fn too_many_routes() {
    let mut text = with_route("");
    for i in 0..=MAX_ROUTES {
        let (a, b) = (i >> 8, i & 0xff);
        text += &format!("[[route]]\nprefix = \"10.{a}.{b}.0/24\"\ngroup = \"spines\"\n");
    }
    // Route 16384's header: line 6 + 16384 * 3.
    assert_eq!(
        err(&text),
        "configs/x.toml:49158:1: too many routes: at most 16384 are allowed"
    );
    let fits = text
        .lines()
        .take(5 + 3 * MAX_ROUTES as usize)
        .collect::<Vec<_>>();
    assert_eq!(ok(&fits.join("\n")).routes.len(), 16384);
}

/// `count` distinct ingress interfaces, on line 2 from column 15, each
/// `"e{i:04}", ` (9 characters), then a group and a route.
fn ingress(count: usize) -> String {
    let names: Vec<String> = (0..count).map(|i| format!("\"e{i:04}\"")).collect();
    with_group(&format!("name = \"g\"\n{NEXT_HOPS}")).replacen(
        "interfaces = [\"eth0\"]",
        &format!("interfaces = [{}]", names.join(", ")),
        1,
    )
}

#[test]
fn too_many_ingress_interfaces() {
    assert_eq!(
        ok(&ingress(MAX_INGRESS_INTERFACES)).switch.interfaces.len(),
        1024
    );
    // Name 1024 at column 15 + 1024 * 9.
    assert_eq!(
        err(&ingress(MAX_INGRESS_INTERFACES + 1)),
        "configs/x.toml:2:9231: too many interfaces in switch.interfaces: \
         at most 1024 are allowed"
    );
}

#[test]
fn group_name_length() {
    let named = |name: &str| {
        with_group(&format!("name = \"{name}\"\n{NEXT_HOPS}"))
            .replace("group = \"g\"", &format!("group = \"{name}\""))
    };
    let longest = "g".repeat(NAME_MAX_LEN);
    assert_eq!(ok(&named(&longest)).groups[0].name, longest);
    let quoted = "g".repeat(64);
    assert_eq!(
        err(&named(&"g".repeat(NAME_MAX_LEN + 1))),
        format!(
            "configs/x.toml:4:8: group name \"{quoted}…\" (65 bytes) is 65 bytes long; \
             at most 64 are allowed"
        )
    );
}

/// A value of any length is quoted in at most 64 characters and its
/// length: in validation's messages and in the toml crate's alike.
#[test]
fn huge_values_are_quoted_cut_short() {
    let huge = "a".repeat(10 << 20);
    let quoted = "a".repeat(64);
    assert_eq!(
        err(&with_route(&format!(
            "[[route]]\nprefix = \"10.0.0.0/8\"\ngroup = \"{huge}\"\n"
        ))),
        format!(
            "configs/x.toml:8:9: unknown group \"{quoted}…\" (10485760 bytes) \
             (defined groups: \"spines\")"
        )
    );
    assert_eq!(
        err(&format!("{SWITCH}{huge} = 1\n")),
        format!(
            "configs/x.toml:3:1: unknown field `{quoted}…` (10485760 bytes), expected one of \
             `hash_seed`, `interfaces`, `xdp_mode`, `flowlet_table_size`, `dlb_mac`"
        )
    );
    // Characters are counted as written and bytes as the value holds
    // them: the escaped quote and newline are one byte each, "é" two.
    let mixed = format!("\\\"\\n{}", "é".repeat(70));
    let shown = format!("\\\"\\n{}", "é".repeat(62));
    assert_eq!(
        err(&with_switch(&format!("{SWITCH}xdp_mode = \"{mixed}\"\n"))),
        format!(
            "configs/x.toml:3:12: unknown xdp_mode \"{shown}…\" (142 bytes) \
             (valid modes: \"auto\", \"driver\", \"generic\")"
        )
    );
    // 64 characters are quoted whole.
    let whole = "b".repeat(64);
    assert_eq!(
        err(&with_switch(&format!("{SWITCH}xdp_mode = \"{whole}\"\n"))),
        format!(
            "configs/x.toml:3:12: unknown xdp_mode \"{whole}\" \
             (valid modes: \"auto\", \"driver\", \"generic\")"
        )
    );
}
