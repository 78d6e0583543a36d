//! Routes from the kernel: a daemon whose config has no `[[route]]`, only
//! a group following `proto bgp` routes, against routes and next-hop
//! objects the test installs in the leaf's namespace with `ip`, as FRR's
//! zebra would.

use std::collections::{BTreeMap, BTreeSet};

use fabriclb::metrics;
use fabriclb::testbed::bpffs::Bpffs;
use fabriclb::testbed::{Daemon, LeafMaps, UdpLoad, nexthop_labels};

use crate::bed::{Bed, wait_for};
use crate::inspect::in_leaf;

/// The leaf's config: XDP on h1, group "spines" following the main
/// table's BGP routes in `mode`.
fn config_text(mode: &str) -> String {
    format!(
        "[switch]\nhash_seed = 0x5eed\ninterfaces = [\"h1\"]\n\n\
         [[group]]\nname = \"spines\"\nmode = \"{mode}\"\n\
         kernel_routes = {{ table = \"main\", protocol = \"bgp\" }}\n"
    )
}

/// `nexthop via 198.18.j.2 dev sj [weight w]` for each spine.
fn nexthops(spines: &[(u8, u8)]) -> Vec<String> {
    let mut args = Vec::new();
    for &(j, weight) in spines {
        args.extend(["nexthop", "via"].map(String::from));
        args.push(format!("198.18.{j}.2"));
        args.extend([
            "dev".into(),
            format!("s{j}"),
            "weight".into(),
            weight.to_string(),
        ]);
    }
    args
}

/// `ip route <verb> 198.19.101.0/24 proto bgp` over `spines` in the leaf.
fn bgp_route(bed: &Bed, verb: &str, spines: &[(u8, u8)]) {
    let mut args: Vec<String> = ["route", verb, "198.19.101.0/24", "proto", "bgp"]
        .map(String::from)
        .to_vec();
    args.extend(nexthops(spines));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    bed.ip("leaf", &args).expect("ip route");
}

/// Packets the daemon's metrics count for spine `j` in learned group
/// `group`; `None` when the spine is not one of its next hops.
fn spine_packets(daemon: &Daemon, group: &str, j: u8) -> Option<u64> {
    let text = daemon.metrics().expect("metrics");
    let labels = format!(
        "group=\"{group}\",{}",
        nexthop_labels(&format!("s{j} 198.18.{j}.2"))
    );
    metrics::sample(&text, "fabriclb_nexthop_packets_total", &labels)
}

fn verdict(daemon: &Daemon, reason: &str) -> u64 {
    let text = daemon.metrics().expect("metrics");
    metrics::sample(
        &text,
        "fabriclb_packets_total",
        &format!("reason=\"{reason}\""),
    )
    .expect("verdict counter")
}

/// Waits until each of `spines` has carried packets in group `group`.
fn carrying(daemon: &Daemon, group: &str, spines: &[u8]) -> BTreeMap<u8, u64> {
    wait_for("the kernel's next hops carrying flows", || {
        let counts: BTreeMap<u8, u64> = spines
            .iter()
            .map(|&j| (j, spine_packets(daemon, group, j).unwrap_or(0)))
            .collect();
        Ok(counts.values().all(|&p| p > 0).then_some(counts))
    })
    .expect("traffic over the kernel's next hops")
    .0
}

/// The next-hop id that left between bucket tables `old` and `new`,
/// having checked that its buckets, and only they, moved.
fn only_the_leaver_moved(old: &[u32], new: &[u32]) -> u32 {
    let gone: BTreeSet<u32> = old.iter().copied().filter(|id| !new.contains(id)).collect();
    let [gone] = gone.iter().copied().collect::<Vec<_>>()[..] else {
        panic!("one next hop should have left: {gone:?}");
    };
    let moved = old.iter().zip(new).filter(|(a, b)| a != b).count();
    let held = old.iter().filter(|&&b| b == gone).count();
    assert_eq!(moved, held, "only the leaving next hop's buckets moved");
    gone
}

/// Stops `load`: every datagram arrived but what the links dropped.
fn all_delivered(bed: &Bed, load: UdpLoad) {
    let report = load.stop(&bed.testbed).expect("traffic");
    eprintln!("{report:?}");
    assert_eq!(
        report.received,
        report.sent - report.drops.lost(),
        "{report:?}"
    );
}

/// How long the daemon took from the first event of a burst to its
/// tables in the maps, from the log line that says so.
fn event_to_write_us(log: &str) -> u64 {
    let field = "event_to_write_us=";
    let at = log.rfind(field).expect("the write's log line") + field.len();
    log[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .expect("a number")
}

/// Group `id`'s buckets and which next-hop id each spine has, read from
/// the program's maps.
fn buckets(id: u32) -> impl Fn(&Bed) -> Vec<u32> {
    move |bed| {
        LeafMaps::open(&bed.testbed)
            .expect("leaf maps")
            .buckets(id)
            .expect("buckets")
    }
}

/// A BGP multipath route over spines 1-3 (spine 4 is a next hop of the
/// testbed's own route, not of this one): the daemon learns it with no
/// `[[route]]` in its config and forwards over exactly those three. A
/// `replace` without spine 3 (its session dropped) updates the group in
/// place: spine 3's buckets, and only they, move; spine 3 carries nothing
/// more. The route deleted, its packets go to the kernel (`no_route`).
#[test]
fn a_bgp_multipath_route_is_forwarded_over_its_next_hops_and_a_leaving_one_moves_only_its_flows() {
    let bed = Bed::up("K", 1);
    bgp_route(&bed, "add", &[(1, 1), (2, 1), (3, 1)]);
    let daemon = bed.daemon(&config_text("ecmp"), &[]).expect("fabriclb");
    let log = daemon
        .wait_for_log(
            "group spines#1: learned: s1 198.18.1.2, s2 198.18.2.2, s3 198.18.3.2, 1 routes",
        )
        .expect("the route learned");
    eprintln!("{log}");
    let load = UdpLoad::start(&bed.testbed, 64).expect("traffic");
    let before = carrying(&daemon, "spines#1", &[1, 2, 3]);
    assert_eq!(
        spine_packets(&daemon, "spines#1", 4),
        None,
        "spine 4 is no next hop"
    );
    let old = buckets(0)(&bed);
    let ids: Vec<u32> = {
        let mut ids = old.clone();
        ids.sort_unstable();
        ids.dedup();
        ids
    };
    assert_eq!(ids.len(), 3, "three next hops in the buckets: {ids:?}");

    daemon.skip_log().expect("log");
    bgp_route(&bed, "replace", &[(1, 1), (2, 1)]);
    let log = daemon
        .wait_for_log("kernel routes in the maps")
        .expect("the change written");
    eprintln!("{log}");
    assert!(
        log.contains("group spines#1: next hops changed (was s1 198.18.1.2, s2 198.18.2.2, s3 198.18.3.2): s1 198.18.1.2, s2 198.18.2.2, 1 routes"),
        "{log}"
    );
    eprintln!("route replace -> maps: {} us", event_to_write_us(&log));
    only_the_leaver_moved(&old, &buckets(0)(&bed));
    let stopped = spine_packets(&daemon, "spines#1", 3);
    let after = wait_for("spines 1 and 2 carrying spine 3's share", || {
        let now = carrying(&daemon, "spines#1", &[1, 2]);
        Ok((now[&1] + now[&2] > before[&1] + before[&2] + 4000).then_some(now))
    })
    .expect("traffic goes on")
    .0;
    assert_eq!(
        spine_packets(&daemon, "spines#1", 3),
        None,
        "s3 left the group"
    );
    eprintln!("before {before:?}, s3 at its last {stopped:?}, after {after:?}");

    daemon.skip_log().expect("log");
    let no_route = verdict(&daemon, "no_route");
    bed.ip("leaf", &["route", "del", "198.19.101.0/24", "proto", "bgp"])
        .expect("ip route del");
    daemon
        .wait_for_log("group spines#1: gone")
        .expect("the route unlearned");
    wait_for("the receivers' packets going to the kernel", || {
        Ok((verdict(&daemon, "no_route") > no_route + 1000).then_some(()))
    })
    .expect("no_route");
    // The kernel forwards what fabriclb passes up.
    all_delivered(&bed, load);
}

/// `ip nexthop` objects in a group with weights: the buckets follow the
/// weights (3:1), and a weight changed to 1:1 moves only the difference.
#[test]
fn nexthop_object_groups_with_weights_become_weighted_buckets() {
    let bed = Bed::up("L", 1);
    for j in 1..=2 {
        let (id, via, dev) = (j.to_string(), format!("198.18.{j}.2"), format!("s{j}"));
        bed.ip(
            "leaf",
            &["nexthop", "add", "id", &id, "via", &via, "dev", &dev],
        )
        .expect("ip nexthop");
    }
    bed.ip("leaf", &["nexthop", "add", "id", "10", "group", "1,3/2"])
        .expect("ip nexthop group");
    bed.ip(
        "leaf",
        &[
            "route",
            "add",
            "198.19.101.0/24",
            "nhid",
            "10",
            "proto",
            "bgp",
        ],
    )
    .expect("ip route");
    let daemon = bed.daemon(&config_text("ecmp"), &[]).expect("fabriclb");
    daemon
        .wait_for_log("group spines#1: learned: s1 198.18.1.2 weight 3, s2 198.18.2.2, 1 routes")
        .expect("the route learned");
    let shares = |buckets: &[u32]| {
        let mut shares = BTreeMap::new();
        for b in buckets {
            *shares.entry(*b).or_insert(0) += 1;
        }
        shares.into_values().collect::<Vec<usize>>()
    };
    let old = buckets(0)(&bed);
    let mut weighted = shares(&old);
    weighted.sort_unstable();
    assert_eq!(weighted, [128, 384]);
    let load = UdpLoad::start(&bed.testbed, 64).expect("traffic");
    let counts = carrying(&daemon, "spines#1", &[1, 2]);
    eprintln!("3:1 by weight, packets {counts:?}");

    daemon.skip_log().expect("log");
    bed.ip("leaf", &["nexthop", "replace", "id", "10", "group", "1/2"])
        .expect("ip nexthop replace");
    let log = daemon
        .wait_for_log("kernel routes in the maps")
        .expect("the change written");
    eprintln!("nexthop replace -> maps: {} us", event_to_write_us(&log));
    let new = buckets(0)(&bed);
    assert_eq!(shares(&new), [256, 256]);
    let moved = old.iter().zip(&new).filter(|(a, b)| a != b).count();
    assert_eq!(moved, 128, "only the difference moved");
    load.stop(&bed.testbed).expect("traffic");
}

/// IPv6: a BGP route over two spines' IPv6 addresses is learned and its
/// gateways resolved through the neighbour table (solicited at once).
#[test]
fn ipv6_routes_are_learned_and_their_gateways_resolved() {
    let bed = Bed::up("M", 1);
    for j in 1..=2 {
        bed.ip(
            "leaf",
            &[
                "-6",
                "addr",
                "add",
                &format!("2001:db8:{j}::1/64"),
                "dev",
                &format!("s{j}"),
                "nodad",
            ],
        )
        .expect("leaf address");
        bed.ip(
            &format!("s{j}"),
            &[
                "-6",
                "addr",
                "add",
                &format!("2001:db8:{j}::2/64"),
                "dev",
                "leaf",
                "nodad",
            ],
        )
        .expect("spine address");
    }
    bed.ip(
        "leaf",
        &[
            "-6",
            "route",
            "add",
            "2001:db8:100::/64",
            "proto",
            "bgp",
            "nexthop",
            "via",
            "2001:db8:1::2",
            "dev",
            "s1",
            "nexthop",
            "via",
            "2001:db8:2::2",
            "dev",
            "s2",
        ],
    )
    .expect("ip -6 route");
    let daemon = bed.daemon(&config_text("ecmp"), &[]).expect("fabriclb");
    daemon
        .wait_for_log("group spines#1: learned: s1 2001:db8:1::2, s2 2001:db8:2::2, 1 routes")
        .expect("the route learned");
    wait_for("both IPv6 next hops resolved", || {
        let text = daemon.metrics()?;
        let usable = |j: u32| {
            let labels = format!(
                "group=\"spines#1\",{}",
                nexthop_labels(&format!("s{j} 2001:db8:{j}::2"))
            );
            metrics::sample(&text, "fabriclb_nexthop_usable", &labels) == Some(1)
        };
        Ok((usable(1) && usable(2)).then_some(()))
    })
    .expect("usable");
}

/// `ip route <verb>` lines for the 2000 BGP routes `10.a.b.0/24` over
/// `spines`.
fn many_routes(verb: &str, spines: &[(u8, u8)]) -> Vec<String> {
    let hops = nexthops(spines).join(" ");
    (0..2000)
        .map(|i| {
            format!(
                "route {verb} 10.{}.{}.0/24 proto bgp {hops}",
                100 + i / 250,
                i % 250
            )
        })
        .collect()
}

/// A reload (SIGHUP) keeps what was learned, and a restart onto the
/// pinned instance takes it over: the same group at the same id with the
/// same buckets, traffic forwarded throughout. Then spine 4's session
/// drops over 2001 routes at once: the group loses spine 4 in place and
/// only spine 4's buckets move, however the burst was cut into writes.
#[test]
fn reload_keeps_learned_routes_and_a_restart_takes_them_over() {
    let bed = Bed::up("N", 1);
    let four = [(1, 1), (2, 1), (3, 1), (4, 1)];
    bgp_route(&bed, "add", &four);
    bed.ip_batch("leaf", &many_routes("add", &four))
        .expect("ip -batch");
    let bpffs = Bpffs::mount("netns-kernel-routes").expect("bpffs");
    let pins = bpffs.path().to_str().expect("path").to_owned();
    let args = ["--bpffs", pins.as_str(), "--instance", "leaf"];
    let daemon = bed
        .daemon(&config_text("flowlet"), &args)
        .expect("fabriclb");
    daemon
        .wait_for_log("group spines#1: learned")
        .expect("the route learned");
    let load = UdpLoad::start(&bed.testbed, 64).expect("traffic");
    carrying(&daemon, "spines#1", &[1, 2, 3, 4]);
    let learned = buckets(0)(&bed);

    daemon.reconfigure(&config_text("ecmp")).expect("SIGHUP");
    let log = daemon.wait_for_log("config reloaded").expect("reloaded");
    assert!(!log.contains("gone"), "{log}");
    assert_eq!(buckets(0)(&bed), learned, "the reload kept the buckets");
    assert_eq!(
        LeafMaps::open(&bed.testbed)
            .expect("maps")
            .group(0)
            .expect("group")
            .member_count,
        4
    );

    daemon.stop().expect("SIGTERM");
    let daemon = bed
        .daemon(&config_text("ecmp"), &args)
        .expect("fabriclb again");
    let log = daemon.log().expect("log");
    assert!(log.contains("taking over the pinned instance"), "{log}");
    assert!(log.contains("group spines#1: learned"), "{log}");
    assert_eq!(buckets(0)(&bed), learned, "the restart kept the buckets");
    // status names the learned group as the daemon does.
    let config = bed.scratch("status.toml");
    std::fs::write(&config, config_text("ecmp")).expect("config");
    let config = config.to_str().expect("path");
    let json = in_leaf(&bed, &bpffs, &["status", "--json", "--config", config]);
    let status: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(status["groups"][0]["name"], "spines#1", "{status}");
    assert_eq!(
        status["groups"][0]["next_hops"][3]["name"], "s4 198.18.4.2",
        "{status}"
    );

    daemon.skip_log().expect("log");
    let mut drop = many_routes("replace", &four[..3]);
    drop.push(format!(
        "route replace 198.19.101.0/24 proto bgp {}",
        nexthops(&four[..3]).join(" ")
    ));
    bed.ip_batch("leaf", &drop).expect("ip -batch");
    let maps = LeafMaps::open(&bed.testbed).expect("maps");
    wait_for("spine 4 out of every route, in one group", || {
        let one = maps.group(0)?.member_count == 3 && maps.group(1)?.in_use == 0;
        Ok(one.then_some(()))
    })
    .unwrap_or_else(|e| {
        panic!(
            "{e}; the daemon's log:\n{}",
            daemon.log().unwrap_or_default()
        )
    });
    let log = daemon.log().expect("log");
    let writes: Vec<u64> = log
        .lines()
        .filter(|l| l.contains("kernel routes in the maps"))
        .map(event_to_write_us)
        .collect();
    eprintln!("2001 routes lose spine 4: writes, event to write (us): {writes:?}");
    only_the_leaver_moved(&learned, &buckets(0)(&bed));
    all_delivered(&bed, load);
}

/// A port losing its carrier: the kernel deletes the next-hop objects
/// through it and shrinks their groups without a word. FRR 8.4 (Debian
/// 12's) then adds the object back and moves its route back onto the
/// group, which no longer holds it. The daemon learns the route as the
/// kernel has it, as a daemon started then would.
#[test]
fn a_lost_carrier_deletes_its_next_hop_objects_as_the_kernel_does() {
    let bed = Bed::up("X", 1);
    let add_single = |j: u32| {
        let (id, via, dev) = (j.to_string(), format!("198.18.{j}.2"), format!("s{j}"));
        bed.ip(
            "leaf",
            &["nexthop", "add", "id", &id, "via", &via, "dev", &dev],
        )
        .expect("ip nexthop");
    };
    (1..=3).for_each(add_single);
    for (id, group) in [("10", "1/2/3"), ("11", "1/3")] {
        bed.ip("leaf", &["nexthop", "add", "id", id, "group", group])
            .expect("ip nexthop group");
    }
    let route_via = |nhid: &str| {
        bed.ip(
            "leaf",
            &[
                "route",
                "replace",
                "198.19.101.0/24",
                "nhid",
                nhid,
                "proto",
                "bgp",
            ],
        )
        .expect("ip route");
    };
    route_via("10");
    let daemon = bed.daemon(&config_text("ecmp"), &[]).expect("fabriclb");
    daemon
        .wait_for_log("learned: s1 198.18.1.2, s2 198.18.2.2, s3 198.18.3.2, 1 routes")
        .expect("the route learned");

    // Spine 2's end down, and what zebra does about it.
    bed.ip("s2", &["link", "set", "leaf", "down"])
        .expect("down");
    route_via("11");
    daemon
        .wait_for_log("s1 198.18.1.2, s3 198.18.3.2, 1 routes")
        .expect("spine 2 out");
    bed.ip("s2", &["link", "set", "leaf", "up"]).expect("up");
    add_single(2);
    daemon.skip_log().expect("log");
    route_via("10");
    let group = bed
        .ip("leaf", &["nexthop", "show", "id", "10"])
        .expect("ip");
    assert!(group.contains("group 1/3 "), "the kernel's group: {group}");
    // A route whose learning is logged: by then the move back was read.
    bed.ip(
        "leaf",
        &[
            "route",
            "add",
            "198.19.102.0/24",
            "via",
            "198.18.4.2",
            "dev",
            "s4",
            "proto",
            "bgp",
        ],
    )
    .expect("ip route");
    let log = daemon
        .wait_for_log("s4 198.18.4.2, 1 routes")
        .expect("the second route learned");
    assert!(
        !log.contains("s2 198.18.2.2"),
        "spine 2 learned back: {log}"
    );
    let groups = LeafMaps::open(&bed.testbed).expect("maps");
    let members = |id| groups.group(id).expect("group").member_count;
    assert_eq!((members(0), members(1)), (2, 1));
}
