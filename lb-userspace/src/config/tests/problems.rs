//! One pass over a file reports every problem it can, in file order, and
//! none that only follows from another.

use std::path::Path;

use super::{NEXT_HOPS, SWITCH, err};
use crate::config::{PROBLEMS_LISTED, parse};

/// Two problems in `[switch]`'s line, one in each of two groups, one
/// route to a refused group, one bad route and one override with a bad
/// key of its own.
const MANY: &str = "[switch]\ninterfaces = [\"eth0\", \"eth0\"]\n\
    [[group]]\nname = \"spines\"\nmode = \"sprinkle\"\n\
    next_hops = [{ interface = \"eth1\", ip = \"10.0.0.1\" }]\n\
    [[group]]\nname = \"leaves\"\nnext_hops = [{ interface = \"eth2\", mac = \"zz\" }]\n\
    [[group]]\nname = \"ok\"\nnext_hops = [{ interface = \"eth3\", ip = \"10.0.0.3\" }]\n\
    [[route]]\nprefix = \"10.1.0.0/16\"\ngroup = \"spines\"\n\
    [[route]]\nprefix = \"10.2.0.0/33\"\ngroup = \"ok\"\n\
    [[override]]\nname = \"pin\"\ndst = \"10.1.0.0/16\"\ndest_qp = 0\n\
    next_hop = { interface = \"eth1\", ip = \"10.0.0.1\" }\n";

/// Each table, group, route and override is checked on its own: the
/// route to the refused group "spines" and the override of its prefix are
/// not reported for that, the other override's and route's own problems
/// are.
#[test]
fn every_problem_of_a_file_is_reported_in_file_order() {
    assert_eq!(
        err(MANY),
        "configs/x.toml:2:23: duplicate interface \"eth0\" in switch.interfaces \
         (first at line 2, column 15)\n\
         configs/x.toml:5:8: unsupported group mode \"sprinkle\" \
         (supported modes: \"ecmp\", \"flowlet\", \"per-packet\")\n\
         configs/x.toml:9:42: invalid MAC address \"zz\": expected 6 hex octets separated \
         by ':', e.g. \"02:00:00:00:01:02\"\n\
         configs/x.toml:17:10: invalid prefix \"10.2.0.0/33\": length 33 is out of range \
         for IPv4 (0..=32)\n\
         configs/x.toml:22:11: override \"pin\" dest_qp 0 is out of range 1..=16777215 \
         (a RoCEv2 queue pair number)"
    );
}

/// With every group valid, a route to one that does not exist is
/// reported, beside the other routes' problems.
#[test]
fn an_unknown_group_is_reported_once_every_group_is_valid() {
    let text = format!(
        "{SWITCH}[[group]]\nname = \"g\"\n{NEXT_HOPS}\
         [[route]]\nprefix = \"10.1.0.0/16\"\ngroup = \"h\"\n\
         [[route]]\nprefix = \"10.1.0.0/16\"\ngroup = \"g\"\n"
    );
    assert_eq!(
        err(&text),
        "configs/x.toml:8:9: unknown group \"h\" (defined groups: \"g\")\n\
         configs/x.toml:10:10: duplicate prefix 10.1.0.0/16 (first at line 7, column 10)"
    );
}

/// The groups read `[telemetry]`'s settings, which read
/// `[ars_profile]`'s: with the profile refused, a group's own problem is
/// left for the next pass rather than judged against settings that are
/// not there.
#[test]
fn what_depends_on_a_refused_table_waits_for_it() {
    let text = format!(
        "{SWITCH}[ars_profile]\nsampling_interval = 16\n\
         [[group]]\nname = \"g\"\nmode = \"sprinkle\"\n{NEXT_HOPS}\
         [[route]]\nprefix = \"10.1.0.0/16\"\ngroup = \"g\"\n"
    );
    assert_eq!(
        err(&text),
        "configs/x.toml:4:21: ars_profile sampling_interval (microseconds) 16 is out of \
         range 1000..=1000000"
    );
}

/// A file refused many times over lists the first problems in its
/// message, as the daemon logs it, and says how many more there are;
/// the error holds them all, for `check-config --json`.
#[test]
fn a_long_list_of_problems_is_cut_short_in_the_message_only() {
    let bad = PROBLEMS_LISTED + 5;
    let mut text = format!("{SWITCH}[[group]]\nname = \"g\"\n{NEXT_HOPS}");
    for i in 0..bad {
        text += &format!("[[route]]\nprefix = \"10.{i}.0.0/33\"\ngroup = \"g\"\n");
    }
    let error = parse(&text, Path::new("configs/x.toml")).expect_err("refused");
    let problems = error.problems();
    assert_eq!(problems.len(), bad);
    assert_eq!(problems[bad - 1].0, Some((3 * bad + 4, 10)));
    let message = error.to_string();
    let lines: Vec<_> = message.lines().collect();
    assert_eq!(lines.len(), PROBLEMS_LISTED + 1);
    assert_eq!(
        lines[0],
        "configs/x.toml:7:10: invalid prefix \"10.0.0.0/33\": length 33 is out of range \
         for IPv4 (0..=32)"
    );
    assert_eq!(
        lines[PROBLEMS_LISTED],
        "configs/x.toml: 5 more problems (`fabriclb check-config --json` lists them all)"
    );
}

/// A group's next hops are checked each on its own, and the group's
/// routes against it: a typo in two MACs is two problems, and a route's
/// own problem is still found.
#[test]
fn each_next_hop_of_a_group_is_checked_on_its_own() {
    let text = format!(
        "{SWITCH}[[group]]\nname = \"g\"\nnext_hops = [\n\
         {{ interface = \"eth1\", mac = \"02:00:00:00:01\" }},\n\
         {{ interface = \"eth2\", ip = \"10.0.0.2\" }},\n\
         {{ interface = \"eth3\", mac = \"02:00:00:00:03:0g\" }},\n\
         {{ interface = \"eth2\", ip = \"10.0.0.2\" }},\n]\n\
         [[route]]\nprefix = \"10.1.0.1/16\"\ngroup = \"g\"\n"
    );
    assert_eq!(
        err(&text),
        "configs/x.toml:6:29: invalid MAC address \"02:00:00:00:01\": expected 6 hex octets \
         separated by ':', e.g. \"02:00:00:00:01:02\"\n\
         configs/x.toml:8:29: invalid MAC address \"02:00:00:00:03:0g\": expected 6 hex octets \
         separated by ':', e.g. \"02:00:00:00:01:02\"\n\
         configs/x.toml:9:1: duplicate next hop \"eth2 10.0.0.2\" in group \"g\" \
         (first at line 7, column 1)\n\
         configs/x.toml:12:10: prefix \"10.1.0.1/16\" has host bits set; did you mean \
         \"10.1.0.0/16\"?"
    );
}
