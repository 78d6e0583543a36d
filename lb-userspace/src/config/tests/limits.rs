//! The data plane's table sizes: each limit is reachable exactly and one
//! past it is an error at the first item too many.

use lb_common::limits::{MAX_GROUPS, MAX_NEXTHOPS_PER_GROUP, MAX_ROUTES};

use super::{SWITCH, err, ok, with_route};

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
