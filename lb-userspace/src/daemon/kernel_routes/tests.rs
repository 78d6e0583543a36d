//! Kernel routes to fabriclb routes and groups: sets, sharing, weights,
//! in-place updates, what is skipped and said once.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;

use lb_common::abi::{NEXTHOP_USABLE, NextHop};
use lb_common::limits::MAX_GROUPS;

use super::kernel::{KernelTable, Skip};
use super::learned::Learned;
use crate::config::{self, Config, NextHopSpec, Prefix};
use crate::dataplane::tables::Tables;
use crate::netlink::{Gateway, KernelRoute, NextHopObject, RouteEvent, RouteKey, Via};

/// A file group "local" with a route, and "uplinks" following table main,
/// protocol bgp.
fn file() -> Config {
    let text = "[switch]\ninterfaces = [\"eth0\"]\n\
        [[group]]\nname = \"uplinks\"\nmode = \"flowlet\"\n\
        kernel_routes = { table = \"main\", protocol = \"bgp\" }\n\
        [[group]]\nname = \"local\"\nnext_hops = [{ interface = \"eth9\", ip = \"10.9.0.1\" }]\n\
        [[route]]\nprefix = \"10.9.0.0/16\"\ngroup = \"local\"\n";
    config::parse(text, Path::new("kernel.toml")).expect("valid config")
}

const BGP: u8 = 186;

fn prefix(s: &str) -> Prefix {
    let (addr, len) = s.split_once('/').expect("a prefix");
    Prefix {
        addr: addr.parse().expect("an address"),
        len: len.parse().expect("a length"),
    }
}

/// Spine `n`'s gateway: `198.18.n.2` on ifindex `10 + n`.
fn spine(n: u8, weight: u32) -> Gateway {
    Gateway {
        ifindex: 10 + u32::from(n),
        addr: Some(IpAddr::from([198, 18, n, 2])),
        weight,
    }
}

fn route(p: &str, protocol: u8, via: Via) -> RouteEvent {
    RouteEvent::Route(KernelRoute {
        key: RouteKey {
            table: 254,
            prefix: prefix(p),
            priority: 20,
        },
        protocol,
        via,
    })
}

/// An empty table following the main table's BGP routes.
fn table() -> KernelTable {
    let kernel = file().groups[0].kernel_routes.expect("follows");
    KernelTable::from_dump(vec![kernel], Vec::new())
}

fn via(spines: &[u8]) -> Via {
    Via::Gateways(spines.iter().map(|&n| spine(n, 1)).collect())
}

/// Ifindex `10 + n` is port `sn`; 1 is no port (a loopback).
fn port(ifindex: u32) -> Option<String> {
    (ifindex > 10).then(|| format!("s{}", ifindex - 10))
}

/// Learns `table` for `file()`: the report and the effective config.
fn learn(learned: &mut Learned, table: &KernelTable) -> (super::learned::Report, Config) {
    learn_for(&file(), learned, table)
}

/// Learns `table` for `file`, whose first group follows it.
fn learn_for(
    file: &Config,
    learned: &mut Learned,
    table: &KernelTable,
) -> (super::learned::Report, Config) {
    let kernel = file.groups[0].kernel_routes.expect("follows");
    let selected = BTreeMap::from([("uplinks".to_string(), table.select(&kernel, &port))]);
    let report = learned.update(file, &selected);
    (report, learned.effective(file))
}

/// `n` routes, `10.1.0.0/16` ... `10.n.0.0/16`, all over spines 1-4.
fn over_four_spines(table: &mut KernelTable, n: u8) -> Vec<String> {
    let prefixes: Vec<String> = (1..=n).map(|i| format!("10.{i}.0.0/16")).collect();
    for p in &prefixes {
        table.apply(route(p, BGP, via(&[1, 2, 3, 4])));
    }
    prefixes
}

fn usable(_: &NextHopSpec) -> NextHop {
    NextHop {
        flags: NEXTHOP_USABLE,
        dst_mac: [2, 0, 0, 0, 0, 1],
        ..NextHop::default()
    }
}

fn group<'a>(config: &'a Config, name: &str) -> &'a config::Group {
    config
        .groups
        .iter()
        .find(|g| g.name == name)
        .unwrap_or_else(|| panic!("no group {name}"))
}

fn routes_of(config: &Config, name: &str) -> Vec<String> {
    config
        .routes
        .iter()
        .filter(|r| config.groups[r.group].name == name)
        .map(|r| r.prefix.to_string())
        .collect()
}

#[test]
fn routes_with_the_same_next_hops_share_a_group_with_the_parents_settings() {
    let mut table = table();
    table.apply(route("10.1.0.0/16", BGP, via(&[1, 2, 3, 4])));
    table.apply(route("10.2.0.0/16", BGP, via(&[4, 3, 2, 1])));
    table.apply(route("10.3.0.0/16", BGP, via(&[1, 2])));
    table.apply(route("10.4.0.0/16", 4, via(&[1, 2])));
    let mut learned = Learned::default();
    let (report, config) = learn(&mut learned, &table);
    let names: Vec<&str> = config.groups.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, ["local", "uplinks#1", "uplinks#2"]);
    assert_eq!(routes_of(&config, "local"), ["10.9.0.0/16"]);
    assert_eq!(
        routes_of(&config, "uplinks#2"),
        ["10.1.0.0/16", "10.2.0.0/16"]
    );
    assert_eq!(routes_of(&config, "uplinks#1"), ["10.3.0.0/16"]);
    let shared = group(&config, "uplinks#2");
    assert_eq!(shared.mode, config::Mode::Flowlet, "the parent's mode");
    assert_eq!(shared.kernel_routes, None);
    let hops: Vec<String> = shared.next_hops.iter().map(ToString::to_string).collect();
    assert_eq!(
        hops,
        [
            "s1 198.18.1.2",
            "s2 198.18.2.2",
            "s3 198.18.3.2",
            "s4 198.18.4.2"
        ]
    );
    assert!(shared.weights.is_empty(), "equal weights");
    assert_eq!(
        report.groups,
        [
            "group uplinks#1: learned: s1 198.18.1.2, s2 198.18.2.2, 1 routes",
            "group uplinks#2: learned: s1 198.18.1.2, s2 198.18.2.2, s3 198.18.3.2, \
             s4 198.18.4.2, 2 routes"
        ]
    );
    let tables = Tables::build(&config, None, usable).expect("tables");
    assert_eq!(tables.groups.len(), 3);
    assert_eq!(tables.routes.len(), 4);
}

/// A learning group's telemetry, per learned group: `remote` targets
/// made from its templates for each next hop, `counters-db` ports named
/// after the interfaces on this switch's COUNTERS_DB, or each next hop's
/// switch and port made from the group's `counters_db` and `sonic_port`.
#[test]
fn learned_groups_get_a_telemetry_target_per_next_hop() {
    let mut table = table();
    table.apply(route("10.1.0.0/16", BGP, via(&[1, 2])));
    let with = |keys: &str| {
        let text = format!(
            "[switch]\ninterfaces = [\"eth0\"]\n[telemetry]\n\
             counters_db = \"unix:/run/redis/redis.sock\"\n\
             [[group]]\nname = \"uplinks\"\nmode = \"flowlet\"\n\
             kernel_routes = {{ table = \"main\", protocol = \"bgp\" }}\n{keys}"
        );
        let file = config::parse(&text, Path::new("kernel.toml")).expect("valid config");
        let (_, config) = learn_for(&file, &mut Learned::default(), &table);
        group(&config, "uplinks#1").telemetry.clone()
    };
    let remote = with(
        "telemetry = \"remote\"\ntelemetry_url = \"http://{ip}:9100/metrics\"\n\
         telemetry_device = \"fleaf\"\n",
    );
    let target = |j: u8| crate::telemetry::remote::Target {
        url: format!("http://198.18.{j}.2:9100/metrics"),
        device: "fleaf".into(),
    };
    assert_eq!(
        remote,
        Some(config::GroupTelemetry::Remote {
            targets: vec![target(1), target(2)]
        })
    );
    assert_eq!(
        with("telemetry = \"counters-db\"\n"),
        Some(config::GroupTelemetry::CountersDb {
            ports: vec!["s1".into(), "s2".into()],
            switches: vec![None, None],
        })
    );
    let address = |a: &str| a.parse::<crate::telemetry::counters_db::Address>().ok();
    assert_eq!(
        with(
            "telemetry = \"counters-db\"\ncounters_db = \"redis://{switch}:6379\"\n\
             sonic_port = \"fleaf\"\nswitch_addresses = { s1 = \"192.0.2.11\" }\n"
        ),
        Some(config::GroupTelemetry::CountersDb {
            ports: vec!["fleaf".into(), "fleaf".into()],
            switches: vec![
                address("redis://192.0.2.11:6379"),
                address("redis://198.18.2.2:6379")
            ],
        })
    );
}

#[test]
fn weights_become_weighted_buckets() {
    let mut table = table();
    let weighted = Via::Gateways(vec![spine(1, 1), spine(2, 3)]);
    table.apply(route("10.1.0.0/16", BGP, weighted));
    let (_, config) = learn(&mut Learned::default(), &table);
    assert_eq!(group(&config, "uplinks#1").weights, [1, 3]);
    let tables = Tables::build(&config, None, usable).expect("tables");
    let g = &tables.groups[1];
    let share = |id| g.buckets.iter().filter(|&&b| b == id).count();
    assert_eq!((share(g.members[0]), share(g.members[1])), (128, 384));
}

/// A session drops: every route of the set loses spine 4 in one burst.
/// The group keeps its name and id, spine 4's buckets alone move, and
/// spines 1-3 keep every bucket they had.
#[test]
fn a_next_hop_leaving_every_route_updates_the_group_in_place() {
    let mut table = table();
    let prefixes = over_four_spines(&mut table, 20);
    let mut learned = Learned::default();
    let (_, before) = learn(&mut learned, &table);
    let old = Tables::build(&before, None, usable).expect("tables");
    for p in &prefixes {
        table.apply(route(p, BGP, via(&[1, 2, 3])));
    }
    let (report, after) = learn(&mut learned, &table);
    assert_eq!(
        report.groups,
        [
            "group uplinks#1: next hops changed (was s1 198.18.1.2, s2 198.18.2.2, \
          s3 198.18.3.2, s4 198.18.4.2): s1 198.18.1.2, s2 198.18.2.2, s3 198.18.3.2, \
          20 routes"
        ]
    );
    let new = Tables::build(&after, Some(&old), usable).expect("tables");
    let (was, now) = (&old.groups[1], &new.groups[1]);
    assert_eq!((was.name.as_str(), was.id), (now.name.as_str(), now.id));
    let gone = was.members[3];
    assert_eq!(&now.members[..], &was.members[..3], "next-hop ids kept");
    for (a, b) in was.buckets.iter().zip(&now.buckets) {
        assert!(a == b || *a == gone, "a bucket of a staying next hop moved");
    }
    assert!(!now.buckets.contains(&gone));
}

/// Each bucket's next hop in group `name` of `tables`, by spec.
fn bucket_specs(tables: &Tables, name: &str) -> Vec<Option<String>> {
    let group = tables
        .groups
        .iter()
        .find(|g| g.name == name)
        .expect("group");
    group
        .buckets
        .iter()
        .map(|b| {
            let slot = group.members.iter().position(|m| m == b)?;
            Some(group.specs[slot].to_string())
        })
        .collect()
}

/// A burst split over two writes: the routes that lost spine 4 first get
/// a group of their own, which starts from their old group's buckets, so
/// their flows on spines 1-3 stay; once all have moved, the new set takes
/// the old group over in place and the early movers come back to it, to
/// the very same next hops.
#[test]
fn a_split_burst_moves_no_flow_but_spine_4s() {
    let mut table = table();
    let prefixes = over_four_spines(&mut table, 10);
    let mut learned = Learned::default();
    let (_, start) = learn(&mut learned, &table);
    let t0 = Tables::build(&start, None, usable).expect("tables");
    for p in &prefixes[..3] {
        table.apply(route(p, BGP, via(&[1, 2, 3])));
    }
    let (report, mid) = learn(&mut learned, &table);
    assert_eq!(routes_of(&mid, "uplinks#1").len(), 7);
    assert_eq!(routes_of(&mid, "uplinks#2").len(), 3);
    assert_eq!(report.splits, [("uplinks#2".into(), "uplinks#1".into())]);
    let mut t1 = Tables::build(&mid, Some(&t0), usable).expect("tables");
    t1.inherit(&t0, "uplinks#2", "uplinks#1", &[]);
    let spine4 = Some("s4 198.18.4.2".to_string());
    let before = bucket_specs(&t0, "uplinks#1");
    let split = bucket_specs(&t1, "uplinks#2");
    for (old, new) in before.iter().zip(&split) {
        assert!(old == new || *old == spine4, "{old:?} -> {new:?}");
    }
    for p in &prefixes[3..] {
        table.apply(route(p, BGP, via(&[1, 2, 3])));
    }
    let (report, end) = learn(&mut learned, &table);
    assert_eq!(routes_of(&end, "uplinks#1").len(), 10);
    assert_eq!(group(&end, "uplinks#1").next_hops.len(), 3);
    assert!(end.groups.iter().all(|g| g.name != "uplinks#2"));
    assert!(
        report
            .groups
            .contains(&"group uplinks#2: gone (no route has its next hops)".into())
    );
    let t2 = Tables::build(&end, Some(&t1), usable).expect("tables");
    assert_eq!(
        bucket_specs(&t2, "uplinks#1"),
        split,
        "back where they were"
    );
}

/// Spine 4 leaves every route (its BGP session drops) and comes back:
/// going, only its buckets move; back, it takes exactly those again, so
/// every bucket is where it was before and no other flow moved twice.
#[test]
fn a_spine_back_takes_back_its_own_buckets() {
    let mut table = table();
    let prefixes = over_four_spines(&mut table, 4);
    let mut learned = Learned::default();
    let (_, start) = learn(&mut learned, &table);
    let t0 = Tables::build(&start, None, usable).expect("tables");
    for p in &prefixes {
        table.apply(route(p, BGP, via(&[1, 2, 3])));
    }
    let (_, without) = learn(&mut learned, &table);
    let t1 = Tables::build(&without, Some(&t0), usable).expect("tables");
    let spine4 = Some("s4 198.18.4.2".to_string());
    let before = bucket_specs(&t0, "uplinks#1");
    let gone = bucket_specs(&t1, "uplinks#1");
    let moved = before.iter().zip(&gone).filter(|(b, g)| b != g).count();
    assert_eq!(moved, before.iter().filter(|b| **b == spine4).count());
    for (b, g) in before.iter().zip(&gone) {
        assert!(b == g || *b == spine4, "{b:?} -> {g:?}");
    }
    for p in &prefixes {
        table.apply(route(p, BGP, via(&[1, 2, 3, 4])));
    }
    let (_, back) = learn(&mut learned, &table);
    let t2 = Tables::build(&back, Some(&t1), usable).expect("tables");
    let after = bucket_specs(&t2, "uplinks#1");
    let elsewhere = before.iter().zip(&after).filter(|(b, a)| b != a).count();
    assert_eq!(
        elsewhere, 0,
        "buckets not where they were before spine 4 left"
    );
}

#[test]
fn next_hop_objects_and_their_groups() {
    let mut table = table();
    for n in 1..=3 {
        table.apply(RouteEvent::NextHop {
            id: u32::from(n),
            object: Some(NextHopObject::Single(spine(n, 1))),
        });
    }
    table.apply(RouteEvent::NextHop {
        id: 100,
        object: Some(NextHopObject::Group(vec![(1, 1), (2, 1), (3, 2)])),
    });
    table.apply(route("10.1.0.0/16", BGP, Via::Object(100)));
    table.apply(route("10.2.0.0/16", BGP, Via::Object(2)));
    let (_, config) = learn(&mut Learned::default(), &table);
    assert_eq!(group(&config, "uplinks#1").weights, [1, 1, 2]);
    assert_eq!(routes_of(&config, "uplinks#1"), ["10.1.0.0/16"]);
    assert_eq!(routes_of(&config, "uplinks#2"), ["10.2.0.0/16"]);
    // A member leaves the group object: the routes through it follow.
    table.apply(RouteEvent::NextHop {
        id: 100,
        object: Some(NextHopObject::Group(vec![(1, 1), (2, 1)])),
    });
    let mut learned = Learned::default();
    let (_, config) = learn(&mut learned, &table);
    assert_eq!(group(&config, "uplinks#1").next_hops.len(), 2);
    // Deleting the object deletes the routes through it.
    table.apply(RouteEvent::NextHopRemoved(100));
    let (_, config) = learn(&mut learned, &table);
    assert_eq!(routes_of(&config, "uplinks#1"), Vec::<String>::new());
    assert_eq!(routes_of(&config, "uplinks#2"), ["10.2.0.0/16"]);
}

/// A port's carrier lost: the kernel deletes its next-hop objects and
/// shrinks their groups without a word. FRR, its link back, adds the
/// object again and moves the route back to the group object, still
/// without that member (seen on the BGP testbed: `ip monitor nexthop
/// route` shows the object added and the route moved, nothing else). The
/// route is learned as the kernel has it, as a daemon started then would.
#[test]
fn a_port_down_deletes_its_next_hop_objects_as_the_kernel_does() {
    let mut table = table();
    for n in 1..=3 {
        table.apply(RouteEvent::NextHop {
            id: u32::from(n),
            object: Some(NextHopObject::Single(spine(n, 1))),
        });
    }
    let group = |members: &[u32]| NextHopObject::Group(members.iter().map(|&m| (m, 1)).collect());
    table.apply(RouteEvent::NextHop {
        id: 100,
        object: Some(group(&[1, 2, 3])),
    });
    table.apply(RouteEvent::NextHop {
        id: 101,
        object: Some(group(&[2])),
    });
    table.apply(route("10.1.0.0/16", BGP, Via::Object(100)));
    table.apply(route("10.2.0.0/16", BGP, Via::Object(101)));
    let mut learned = Learned::default();

    assert!(table.port_down(spine(2, 1).ifindex));
    assert!(
        !table.port_down(spine(2, 1).ifindex),
        "nothing left to delete"
    );
    // The link back: the object again, the route back onto group 100.
    table.apply(RouteEvent::NextHop {
        id: 2,
        object: Some(NextHopObject::Single(spine(2, 1))),
    });
    table.apply(route("10.1.0.0/16", BGP, Via::Object(100)));
    let (_, config) = learn(&mut learned, &table);
    let next_hops: Vec<String> = group_of(&config, "10.1.0.0/16")
        .next_hops
        .iter()
        .map(|n| n.interface.clone())
        .collect();
    assert_eq!(next_hops, ["s1", "s3"]);
    // The group that held spine 2 alone went with it, and its route.
    assert!(
        config
            .routes
            .iter()
            .all(|r| r.prefix != prefix("10.2.0.0/16")),
        "{config:?}"
    );
}

/// The group `config` routes `p` to.
fn group_of<'a>(config: &'a Config, p: &str) -> &'a config::Group {
    let route = config.routes.iter().find(|r| r.prefix == prefix(p));
    &config.groups[route.expect("routed").group]
}

#[test]
fn routes_fabriclb_cannot_forward_are_skipped_and_said_once() {
    let mut table = table();
    let onlink = Via::Gateways(vec![Gateway {
        addr: None,
        ..spine(1, 1)
    }]);
    let loopback = Via::Gateways(vec![Gateway {
        ifindex: 1,
        ..spine(1, 1)
    }]);
    let wide = Via::Gateways(
        (0..65)
            .map(|i| Gateway {
                addr: Some(IpAddr::from([198, 18, 1, i])),
                ..spine(1, 1)
            })
            .collect(),
    );
    table.apply(route("10.1.0.0/16", BGP, onlink));
    table.apply(route("10.2.0.0/16", BGP, loopback));
    table.apply(route("10.3.0.0/16", BGP, Via::Nowhere));
    table.apply(route("10.4.0.0/16", BGP, wide));
    table.apply(route("10.5.0.0/16", BGP, Via::Object(7)));
    table.apply(route("10.6.0.0/16", BGP, via(&[1])));
    let mut learned = Learned::default();
    let (report, config) = learn(&mut learned, &table);
    assert_eq!(
        report.skipped,
        [
            (prefix("10.1.0.0/16"), Skip::NoGateway),
            (prefix("10.2.0.0/16"), Skip::NotAPort(1)),
            (prefix("10.3.0.0/16"), Skip::NotUnicast),
            (prefix("10.4.0.0/16"), Skip::TooManyNextHops(65)),
            (prefix("10.5.0.0/16"), Skip::Object(7)),
        ]
    );
    assert_eq!(routes_of(&config, "uplinks#1"), ["10.6.0.0/16"]);
    let (again, _) = learn(&mut learned, &table);
    assert_eq!(again, Default::default(), "nothing new to say");
    table.apply(RouteEvent::RouteRemoved(RouteKey {
        table: 254,
        prefix: prefix("10.1.0.0/16"),
        priority: 20,
    }));
    let (gone, _) = learn(&mut learned, &table);
    assert_eq!(gone.unskipped, [prefix("10.1.0.0/16")]);
}

#[test]
fn sets_beyond_the_groups_left_are_skipped() {
    let mut table = table();
    // One group per route: each has a set of its own.
    for i in 0..MAX_GROUPS {
        let gateway = Gateway {
            addr: Some(IpAddr::from([198, 18, 1, i as u8 + 1])),
            ..spine(1, 1)
        };
        table.apply(route(
            &format!("10.{i}.0.0/16"),
            BGP,
            Via::Gateways(vec![gateway]),
        ));
    }
    let (report, config) = learn(&mut Learned::default(), &table);
    // The file's own group leaves MAX_GROUPS - 1.
    assert_eq!(config.groups.len(), MAX_GROUPS as usize);
    assert_eq!(report.skipped.len(), 1);
    assert_eq!(report.skipped[0].1, Skip::NoGroupLeft);
    Tables::build(&config, None, usable).expect("tables fit");
}

#[test]
fn the_lowest_metric_of_a_prefix_is_the_route() {
    let mut table = table();
    table.apply(route("10.1.0.0/16", BGP, via(&[1, 2])));
    let RouteEvent::Route(mut worse) = route("10.1.0.0/16", BGP, via(&[3])) else {
        unreachable!()
    };
    worse.key.priority = 100;
    table.apply(RouteEvent::Route(worse));
    let (_, config) = learn(&mut Learned::default(), &table);
    assert_eq!(group(&config, "uplinks#1").next_hops.len(), 2);
}

/// Only followed routes are kept: another protocol's change is nothing to
/// write, and a followed route replaced by another protocol's is gone.
#[test]
fn routes_no_group_follows_are_not_kept() {
    let mut table = table();
    assert!(
        !table.apply(route("10.1.0.0/16", 4, via(&[1]))),
        "static: not followed"
    );
    assert!(table.apply(route("10.2.0.0/16", BGP, via(&[1]))));
    let (_, config) = learn(&mut Learned::default(), &table);
    assert_eq!(routes_of(&config, "uplinks#1"), ["10.2.0.0/16"]);
    assert!(
        table.apply(route("10.2.0.0/16", 4, via(&[1]))),
        "taken over by static"
    );
    let (_, config) = learn(&mut Learned::default(), &table);
    assert!(routes_of(&config, "uplinks#1").is_empty());
    assert!(!table.apply(RouteEvent::Lost));
}

/// Lost events (an overrun) or a failed stream make the next write dump
/// the routes again; events about routes nobody follows write nothing.
#[test]
fn lost_events_read_the_routes_again_and_unfollowed_ones_write_nothing() {
    let mut watch = super::KernelWatch {
        table: table(),
        ..Default::default()
    };
    watch.take(Some(vec![route("10.1.0.0/16", 4, via(&[1]))]));
    assert_eq!(watch.due(), None, "a static route: nothing to write");
    watch.take(Some(vec![RouteEvent::Lost]));
    assert!(watch.stale, "lost events: dump again");
    assert!(watch.due().is_some());
    let mut failed = super::KernelWatch::default();
    failed.take(None);
    assert!(
        failed.stale && failed.due().is_some(),
        "a failed stream: again"
    );
}
