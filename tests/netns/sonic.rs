//! `run --sonic` on the testbed's leaf, driven from a real `redis-server`
//! holding SONiC's rows (CONFIG_DB `SWITCH_HASH|GLOBAL` with
//! ConfigDBConnector's `ecmp_hash@` list as in `sonic-hash.yang`, the ARS
//! tables of `sonic-ars.yang`), under a collective: each change in Redis
//! changes the data plane live, an invalid row is refused with its key,
//! the counters land in COUNTERS_DB, and nothing is lost.

use fabriclb::sonic::{APPL_DB, NextHopCounters};
use fabriclb::testbed::redis::{RedisServer, Scratch, command as run};
use fabriclb::testbed::scenario::sonic::{self, FIVE_TUPLE, WITH_QP, shares};
use fabriclb::testbed::{Routing, Shape, read_metric};

use fabriclb::testbed::bpffs::Bpffs;

use crate::bed::{Bed, assert_delivered, fabriclb, steady, wait_for};
use crate::inspect::in_leaf;

/// Two senders, 16 QPs each on one UDP source port per connection: the
/// five-tuple puts each connection on one spine (two at most carry
/// anything), the destination QP spreads its QPs over all four. Switching
/// `ecmp_hash` in CONFIG_DB moves the data plane from one to the other;
/// ARS rows make the group per-packet; an edit of the file keeps SONiC's
/// settings over it; an out-of-range idle time is refused with its key
/// while traffic flows.
#[test]
fn sonic_config_db_drives_the_leaf_live() {
    let bed = Bed::up("P", 2);
    let dir = Scratch::new("netns-sonic");
    let server = RedisServer::start_with(&dir, &["--port", "0", "--notify-keyspace-events", "AKE"]);
    let mut config_db = server.conn(4);
    run(
        &mut config_db,
        &["HSET", "SWITCH_HASH|GLOBAL", "ecmp_hash@", FIVE_TUPLE],
    );
    let address = format!("unix:{}", server.socket.display());
    let mut collective = steady(2);
    collective.exchange.messages = 16_000;
    let result = bed.collective_with(&collective, &["--sonic", &address], |daemon| {
        let (five, _) = shares(&bed.testbed, daemon)?;
        let spread = five.iter().filter(|&&s| s > 0.0).count();
        anyhow::ensure!(spread <= 2, "five-tuple over {spread} spines: {five:?}");

        run(
            &mut config_db,
            &["HSET", "SWITCH_HASH|GLOBAL", "ecmp_hash@", WITH_QP],
        );
        let log = daemon.wait_for_log("config reloaded")?;
        let change = "config change: group \"spines\": hash_fields [src_ip, dst_ip, ip_protocol, \
                      l4_src_port, l4_dst_port] -> [src_ip, dst_ip, ip_protocol, l4_src_port, \
                      l4_dst_port, rdma_bth_dest_qp]";
        anyhow::ensure!(
            log.contains("sonic: SONiC's settings changed: reloading") && log.contains(change),
            "expected {change:?}:\n{log}"
        );
        let (qp, _) = shares(&bed.testbed, daemon)?;
        anyhow::ensure!(qp.iter().all(|&s| s > 0.0), "with the QP: {qp:?}");

        // SONiC's ARS: a profile, an object, the spine ports using it.
        run(
            &mut config_db,
            &[
                "HSET",
                "ARS_PROFILE|default",
                "algorithm",
                "ewma",
                "default_ars_object",
                "spray",
            ],
        );
        run(
            &mut config_db,
            &[
                "HSET",
                "ARS_OBJECT|spray",
                "assign_mode",
                "per_packet_quality",
                "flowlet_idle_time",
                "300",
            ],
        );
        for j in 1..=4 {
            run(
                &mut config_db,
                &[
                    "HSET",
                    &format!("ARS_INTERFACE|s{j}"),
                    "scaling_factor",
                    "1",
                ],
            );
        }
        let (ars, _) = wait_for("metrics showing per-packet", || {
            let c = bed.counters(daemon)?;
            Ok((c.mode == "per-packet").then_some(c))
        })?;
        let (_, _) = wait_for("packets sprayed", || {
            let c = bed.counters(daemon)?;
            Ok((c.sprayed > ars.sprayed).then_some(()))
        })?;
        daemon.wait_for_log("config change: group \"spines\": mode ecmp -> per-packet")?;

        // The file edited: SONiC's settings stay over it, the rest of the
        // edit applies.
        daemon.write_config(&bed.config("hash_fields = [\"src_ip\"]\nspray = \"all\""))?;
        let log = daemon.wait_for_log("config reloaded")?;
        anyhow::ensure!(
            log.contains("config change: group \"spines\": spray self-contained -> all")
                && !log.contains("hash_fields"),
            "expected the spray alone to change:\n{log}"
        );

        run(
            &mut config_db,
            &["HSET", "ARS_OBJECT|spray", "flowlet_idle_time", "99999"],
        );
        let refusal = "sonic: ignored \"ARS_OBJECT|spray\" field \"flowlet_idle_time\": \
                       \"99999\" is not a number in 2..=2047 (microseconds)";
        daemon.wait_for_log(refusal)?;
        let before = bed.counters(daemon)?;
        let (after, _) = wait_for("traffic after the refusal", || {
            let c = bed.counters(daemon)?;
            Ok((c.forwarded > before.forwarded + 1_000).then_some(c))
        })?;
        anyhow::ensure!(after.mode == "per-packet", "{after:?}");

        // The counters, where SONiC's tooling reads them.
        let mut counters_db = server.conn(2);
        let name = NextHopCounters::name("spines", &bed.testbed.spine_label(1));
        let key = NextHopCounters::key(&name);
        let (packets, _) = wait_for("counters in COUNTERS_DB", || {
            let packets: Option<u64> = redis::cmd("HGET")
                .arg(&key)
                .arg("packets")
                .query(&mut counters_db)?;
            Ok(packets.filter(|&p| p > 0))
        })?;
        let names: Vec<String> = redis::cmd("HKEYS")
            .arg("COUNTERS_FABRICLB_NEXTHOP_NAME_MAP")
            .query(&mut counters_db)?;
        anyhow::ensure!(names.len() == 4, "{names:?}");
        Ok((five, qp, packets))
    });
    let (report, (five, qp, packets)) = result.expect("run driven from CONFIG_DB");
    eprintln!(
        "five-tuple shares {five:.2?}, with the QP {qp:.2?}; {packets} packets on s1 in \
         COUNTERS_DB; sent {}, received {}; {}",
        report.sent_packets, report.received.packets, report.drops
    );
    assert_delivered(&report);
}

/// `--scenario sonic` in full: each change's mode and spread (the
/// withdrawn spine carries nothing until it is back; the group learned
/// from APPL_DB takes the ARS object of its next hops' ports), nothing
/// lost beyond what the testbed's links dropped.
#[test]
fn scenario_sonic_changes_the_data_plane_from_sonics_redis_alone() {
    let scenario = sonic::scenario(sonic::SECONDS);
    let bed = Bed::shaped("Q", scenario.shape.clone());
    let run = sonic::measure(&bed.testbed, fabriclb(), bed.workdir(), &scenario).expect("scenario");
    eprintln!("{run:#?}");
    let modes: Vec<&str> = run.changes.iter().map(|c| c.group_mode.as_str()).collect();
    assert_eq!(
        modes,
        [
            "ecmp",
            "ecmp",
            "ecmp",
            "ecmp",
            "per-packet",
            "flowlet",
            "ecmp"
        ]
    );
    let spines = |i: usize| {
        run.changes[i]
            .spine_shares
            .iter()
            .filter(|&&s| s > 0.0)
            .count()
    };
    assert!(spines(0) <= 2, "{:?}", run.changes[0]);
    assert_eq!(spines(1), 4, "{:?}", run.changes[1]);
    assert_eq!(spines(2), 3, "{:?}", run.changes[2]);
    assert_eq!(run.changes[2].spine_shares[3], 0.0, "{:?}", run.changes[2]);
    assert_eq!(spines(3), 4, "{:?}", run.changes[3]);
    assert_eq!(run.lost, run.link_lost, "{run:?}");
}

/// A group that follows APPL_DB's BGP routes (`sonic_routes`), on a leaf
/// whose config lists no next hop and no route: the route row over two
/// spines is learned at start, rows fabriclb cannot take are said with
/// their key and why (an invalid one, a blackhole), a third spine added to
/// the row takes traffic once the daemon says the row is in the maps, and
/// the row deleted leaves the packets to the kernel's own route until it
/// is back. Nothing is lost.
#[test]
fn sonic_routes_follow_appl_db_route_rows() {
    let bed = Bed::shaped(
        "R",
        Shape {
            hosts: 2,
            spines: 3,
            routing: Routing::AppDb,
            ..Shape::default()
        },
    );
    let dir = Scratch::new("netns-sonic-routes");
    let server = RedisServer::start_with(&dir, &["--port", "0", "--notify-keyspace-events", "AKE"]);
    let mut appl_db = server.conn(APPL_DB);
    let write = |db: &mut redis::Connection, args: Vec<String>| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run(db, &args);
    };
    write(&mut appl_db, bed.testbed.appl_db_route(&[1, 2]));
    run(
        &mut appl_db,
        &[
            "HSET",
            "ROUTE_TABLE:10.99.0.0/16",
            "nexthop",
            "198.18.1.2,198.18.2.2",
            "ifname",
            "s1",
            "protocol",
            "bgp",
        ],
    );
    run(
        &mut appl_db,
        &[
            "HSET",
            "ROUTE_TABLE:10.98.0.0/16",
            "blackhole",
            "true",
            "protocol",
            "bgp",
        ],
    );
    let address = format!("unix:{}", server.socket.display());
    let mut collective = steady(2);
    collective.exchange.messages = 16_000;
    let bpffs = Bpffs::mount("netns-sonic-routes").expect("bpffs");
    let pins = bpffs.path().to_str().expect("path").to_owned();
    let config = dir.0.join("leaf.toml");
    std::fs::write(&config, bed.config("")).expect("config");
    let config = config.to_str().expect("path").to_owned();
    let args = ["--sonic", &address, "--bpffs", &pins, "--instance", "leaf"];
    let result = bed.collective_with(&collective, &args, |daemon| {
        let log = daemon.log()?;
        for said in [
            "route not learned: its packets go to the kernel prefix=10.98.0.0/16 reason=not a \
             unicast route",
            "learned routes: group spines#1: learned: s1 198.18.1.2, s2 198.18.2.2, 1 routes",
            "sonic: ignored \"ROUTE_TABLE:10.99.0.0/16\" field \"nexthop\": 2 addresses for 1 \
             interfaces in ifname: the lists go in pairs",
        ] {
            anyhow::ensure!(log.contains(said), "expected {said:?}:\n{log}");
        }
        let (two, _) = shares(&bed.testbed, daemon)?;
        anyhow::ensure!(
            two[0] > 0.0 && two[1] > 0.0 && two[2] == 0.0,
            "over s1 and s2: {two:?}"
        );

        write(&mut appl_db, bed.testbed.appl_db_route(&[1, 2, 3]));
        let log = daemon.wait_for_log("APPL_DB routes in the maps")?;
        let change = "learned routes: group spines#1: next hops changed (was s1 198.18.1.2, s2 \
                      198.18.2.2): s1 198.18.1.2, s2 198.18.2.2, s3 198.18.3.2, 1 routes";
        anyhow::ensure!(log.contains(change), "expected {change:?}:\n{log}");
        let (three, _) = shares(&bed.testbed, daemon)?;
        anyhow::ensure!(three.iter().all(|&s| s > 0.0), "over all three: {three:?}");
        // `status --sonic` names the learned group as the daemon does.
        let status = ["status", "--json", "--config", &config, "--sonic", &address];
        let json: serde_json::Value = serde_json::from_str(&in_leaf(&bed, &bpffs, &status))?;
        let group = &json["groups"][0];
        anyhow::ensure!(group["name"] == "spines#1", "{json}");
        let names: Vec<&str> = (0..3)
            .filter_map(|j| group["next_hops"][j]["name"].as_str())
            .collect();
        anyhow::ensure!(
            names == ["s1 198.18.1.2", "s2 198.18.2.2", "s3 198.18.3.2"],
            "{json}"
        );

        run(&mut appl_db, &["DEL", "ROUTE_TABLE:198.19.0.0/16"]);
        daemon.wait_for_log("group spines#1: gone (no route has its next hops)")?;
        let no_route = || {
            read_metric(
                &daemon.metrics()?,
                "fabriclb_packets_total",
                "reason=\"no_route\"",
            )
        };
        let before = no_route()?;
        wait_for("packets with no route, to the kernel", || {
            let now = no_route()?;
            Ok((now > before + 1_000).then_some(()))
        })?;
        // Back, for the run's closing count of the group.
        write(&mut appl_db, bed.testbed.appl_db_route(&[1, 2, 3]));
        daemon.wait_for_log("APPL_DB routes in the maps")?;
        bed.fresh_counters(daemon)?;
        Ok((two, three, no_route()?))
    });
    let (report, (two, three, kernel)) = result.expect("run driven from APPL_DB");
    eprintln!(
        "shares over two spines {two:.2?}, three {three:.2?}; {kernel} packets to the kernel \
         while the row was gone; sent {}, received {}; {}",
        report.sent_packets, report.received.packets, report.drops
    );
    let lost = report.drops.lost();
    assert_eq!(
        report.received.packets,
        report.sent_packets - lost,
        "{report:?}"
    );
    // What fabriclb did not forward while the row was gone, the kernel did.
    assert_eq!(
        report.leaf.forwarded + kernel,
        report.sent_packets - report.drops.lost_in("h"),
        "{report:?}"
    );
}
