//! `run --sonic`'s reader and publisher against a real `redis-server`,
//! rows written the way SONiC keeps them: CONFIG_DB (4) `TABLE|key`
//! hashes with ConfigDBConnector's `field@` lists, APPL_DB (0)
//! `TABLE:key`, as `sonic-hash.yang`, `sonic-ars.yang` and swss's
//! `switch.json` define them.

use std::time::Duration;

use fabriclb::sonic::routes::{Hop, Via};
use fabriclb::sonic::{ApplRoutes, Follower, NextHopCounters, Overlay, Publisher, Rows};
use fabriclb::telemetry::counters_db::Address;
use fabriclb::testbed::redis::{RedisServer, Scratch, command as run};
use lb_common::select::hash::HashFields;

/// How long a read or a write may take to be seen: generous for a local
/// socket.
const BOUND: Duration = Duration::from_secs(10);
/// How long a change may take to be seen where notifications are on: far
/// more than one takes, and short of the re-read without them, so a
/// follower that only re-read would fail.
const CHANGE_BOUND: Duration = Duration::from_secs(fabriclb::sonic::follow::REREAD.as_secs() / 2);

fn address(server: &RedisServer) -> Address {
    format!("unix:{}", server.socket.display())
        .parse()
        .expect("address")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// The next rows the follower reads that `wanted` accepts, within [`BOUND`].
fn until(
    rt: &tokio::runtime::Runtime,
    follower: &mut Follower,
    wanted: impl Fn(&Rows) -> bool,
) -> Rows {
    within(BOUND, rt, follower, wanted)
}

/// [`until`] within `bound`.
fn within(
    bound: Duration,
    rt: &tokio::runtime::Runtime,
    follower: &mut Follower,
    wanted: impl Fn(&Rows) -> bool,
) -> Rows {
    rt.block_on(async {
        tokio::time::timeout(bound, async {
            loop {
                let rows = follower.next().await;
                if wanted(&rows) {
                    return rows;
                }
            }
        })
        .await
        .expect("the wanted rows within the bound")
    })
}

fn hash_fields(rows: &Rows) -> Option<HashFields> {
    Overlay::from_rows(rows).hash_fields
}

const FIVE_TUPLE: &str = "SRC_IP,DST_IP,IP_PROTOCOL,L4_SRC_PORT,L4_DST_PORT";
const WITH_QP: &str = "SRC_IP,DST_IP,IP_PROTOCOL,L4_SRC_PORT,L4_DST_PORT,RDMA_BTH_DEST_QP";

#[test]
fn sonic_rows_are_read_and_followed_by_keyspace_notifications() {
    let dir = Scratch::new("sonic-follow");
    let server = RedisServer::start_with(&dir, &["--port", "0", "--notify-keyspace-events", "AKE"]);
    let mut config_db = server.conn(4);
    let mut appl_db = server.conn(0);
    run(
        &mut config_db,
        &["HSET", "SWITCH_HASH|GLOBAL", "ecmp_hash@", FIVE_TUPLE],
    );
    run(
        &mut appl_db,
        &[
            "HSET",
            "SWITCH_TABLE:switch",
            "ecmp_hash_seed",
            "10",
            "fdb_aging_time",
            "600",
        ],
    );
    run(
        &mut config_db,
        &["HSET", "ARS_PROFILE|default", "algorithm", "ewma"],
    );
    run(
        &mut config_db,
        &[
            "HSET",
            "ARS_OBJECT|fast",
            "assign_mode",
            "per_flowlet_quality",
        ],
    );
    // An unrelated table: neither read nor a reason to read again.
    run(&mut config_db, &["HSET", "PORT|Ethernet0", "mtu", "9100"]);

    let rt = runtime();
    let mut follower = Follower::start(address(&server)).expect("thread");
    let rows = until(&rt, &mut follower, |_| true);
    let five = HashFields(HashFields::ALL.0 & !HashFields::RDMA_BTH_DEST_QP.0);
    assert_eq!(hash_fields(&rows), Some(five));
    assert_eq!(Overlay::from_rows(&rows).hash_seed, Some(10));
    assert_eq!(
        rows.config.keys().collect::<Vec<_>>(),
        [
            "ARS_OBJECT|fast",
            "ARS_PROFILE|default",
            "SWITCH_HASH|GLOBAL"
        ]
    );

    run(
        &mut config_db,
        &["HSET", "SWITCH_HASH|GLOBAL", "ecmp_hash@", WITH_QP],
    );
    within(CHANGE_BOUND, &rt, &mut follower, |rows| {
        hash_fields(rows) == Some(HashFields::ALL)
    });
    run(
        &mut appl_db,
        &["HSET", "SWITCH_TABLE:switch", "ecmp_hash_seed", "99"],
    );
    within(CHANGE_BOUND, &rt, &mut follower, |rows| {
        Overlay::from_rows(rows).hash_seed == Some(99)
    });
    run(&mut config_db, &["DEL", "ARS_PROFILE|default"]);
    let rows = within(CHANGE_BOUND, &rt, &mut follower, |rows| {
        !rows.config.contains_key("ARS_PROFILE|default")
    });
    assert_eq!(Overlay::from_rows(&rows).ars, None);

    // A key of another type is kept as what it is: refused with its key.
    run(&mut config_db, &["SET", "ARS_INTERFACE|Ethernet0", "fast"]);
    let rows = within(CHANGE_BOUND, &rt, &mut follower, |rows| {
        rows.config.contains_key("ARS_INTERFACE|Ethernet0")
    });
    assert_eq!(
        rows.config["ARS_INTERFACE|Ethernet0"],
        Err("not a hash; SONiC keeps every row as one".to_string())
    );
}

/// APPL_DB's route rows: read whole at start (more than a round trip's
/// batch), then each changed row re-read on its notification (a burst of
/// a thousand prefixes, as a BGP session going down rewrites them), a
/// deleted row gone, a next-hop group followed, and a key of another type
/// kept as what it is.
#[test]
fn appl_db_route_rows_are_read_and_followed_row_by_row() {
    let dir = Scratch::new("sonic-routes");
    let server = RedisServer::start_with(&dir, &["--port", "0", "--notify-keyspace-events", "AKE"]);
    let mut appl_db = server.conn(0);
    let prefix = |i: usize| format!("ROUTE_TABLE:10.{}.{}.0/24", i / 256, i % 256);
    let routes = 1_500;
    let mut pipe = redis::pipe();
    for i in 0..routes {
        pipe.cmd("HSET")
            .arg(prefix(i))
            .arg("nexthop")
            .arg("198.18.1.2,198.18.2.2")
            .arg("ifname")
            .arg("Ethernet0,Ethernet4")
            .arg("protocol")
            .arg("bgp")
            .ignore();
    }
    pipe.query::<()>(&mut appl_db).expect("routes written");

    let rt = runtime();
    let mut follower = Follower::start(address(&server)).expect("thread");
    let rows = until(&rt, &mut follower, |_| true);
    let read = ApplRoutes::from_rows(&rows);
    assert_eq!(read.routes.len(), routes);
    assert_eq!(read.refusals, []);

    // Spine 2 leaves every route, one write per prefix.
    let mut pipe = redis::pipe();
    for i in 0..1_000 {
        pipe.cmd("HSET")
            .arg(prefix(i))
            .arg("nexthop")
            .arg("198.18.1.2")
            .arg("ifname")
            .arg("Ethernet0")
            .ignore();
    }
    pipe.query::<()>(&mut appl_db).expect("routes rewritten");
    let single = Via::Hops(vec![Hop {
        gateway: Some("198.18.1.2".parse().expect("ip")),
        ifname: "Ethernet0".into(),
        weight: 1,
    }]);
    within(CHANGE_BOUND, &rt, &mut follower, |rows| {
        let read = ApplRoutes::from_rows(rows);
        read.routes.values().filter(|r| r.via == single).count() == 1_000
    });

    run(&mut appl_db, &["DEL", &prefix(0)]);
    run(
        &mut appl_db,
        &[
            "HSET",
            "NEXTHOP_GROUP_TABLE:1",
            "nexthop",
            "198.18.1.2",
            "ifname",
            "Ethernet0",
        ],
    );
    run(&mut appl_db, &["SET", "ROUTE_TABLE:10.200.0.0/16", "x"]);
    let rows = within(CHANGE_BOUND, &rt, &mut follower, |rows| {
        let read = ApplRoutes::from_rows(rows);
        read.routes.len() == routes - 1
            && read.groups.contains_key("1")
            && !read.refusals.is_empty()
    });
    let refusals: Vec<String> = ApplRoutes::from_rows(&rows)
        .refusals
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        refusals,
        ["\"ROUTE_TABLE:10.200.0.0/16\": not a hash; SONiC keeps every row as one"]
    );
}

#[test]
fn a_restarted_redis_is_read_whole_again() {
    let dir = Scratch::new("sonic-restart");
    let args = ["--port", "0", "--notify-keyspace-events", "AKE"];
    let server = RedisServer::start_with(&dir, &args);
    run(
        &mut server.conn(4),
        &["HSET", "SWITCH_HASH|GLOBAL", "ecmp_hash@", FIVE_TUPLE],
    );
    let rt = runtime();
    let mut follower = Follower::start(address(&server)).expect("thread");
    until(&rt, &mut follower, |rows| hash_fields(rows).is_some());

    // A crash loses the rows; SONiC's config reload writes them back.
    server.kill();
    let server = RedisServer::start_with(&dir, &args);
    run(
        &mut server.conn(4),
        &["HSET", "SWITCH_HASH|GLOBAL", "ecmp_hash@", WITH_QP],
    );
    until(&rt, &mut follower, |rows| {
        hash_fields(rows) == Some(HashFields::ALL)
    });
}

#[test]
fn without_keyspace_notifications_the_rows_are_still_read() {
    let dir = Scratch::new("sonic-silent");
    let server = RedisServer::start(&dir);
    let flags: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("notify-keyspace-events")
        .query(&mut server.conn(0))
        .expect("CONFIG GET");
    assert!(
        !fabriclb::sonic::follow::notifications_on(&flags[1]),
        "{flags:?}"
    );
    run(
        &mut server.conn(4),
        &["HSET", "SWITCH_HASH|GLOBAL", "ecmp_hash@", WITH_QP],
    );
    let rt = runtime();
    let mut follower = Follower::start(address(&server)).expect("thread");
    let rows = until(&rt, &mut follower, |_| true);
    assert_eq!(hash_fields(&rows), Some(HashFields::ALL));
}

fn counters(name: &str, packets: u64, band: Option<u32>) -> NextHopCounters {
    NextHopCounters {
        name: name.into(),
        packets,
        bytes: packets * 1000,
        sprayed_packets: 3,
        quality: 1024,
        quality_band: band,
        usable: true,
    }
}

fn hgetall(db: &mut redis::Connection, key: &str) -> Vec<(String, String)> {
    let mut fields: Vec<(String, String)> =
        redis::cmd("HGETALL").arg(key).query(db).expect("HGETALL");
    fields.sort();
    fields
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = list
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    v.sort();
    v
}

/// Until `check` passes on COUNTERS_DB, within [`BOUND`].
fn eventually(db: &mut redis::Connection, check: impl Fn(&mut redis::Connection) -> bool) {
    let start = std::time::Instant::now();
    while !check(db) {
        assert!(start.elapsed() < BOUND, "COUNTERS_DB never showed it");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn counters_are_published_with_a_name_map_and_stale_keys_go() {
    let dir = Scratch::new("sonic-publish");
    let server = RedisServer::start(&dir);
    let mut db = server.conn(2);
    // What a daemon before this one left.
    run(
        &mut db,
        &[
            "HSET",
            "COUNTERS_FABRICLB_NEXTHOP_NAME_MAP",
            "old|eth9|10.0.9.1",
            "fabriclb:old|eth9|10.0.9.1",
        ],
    );
    run(
        &mut db,
        &[
            "HSET",
            "COUNTERS:fabriclb:old|eth9|10.0.9.1",
            "packets",
            "5",
        ],
    );

    let publisher = Publisher::start(address(&server)).expect("thread");
    let a = NextHopCounters::name("spines", "eth4 10.0.4.1");
    let b = NextHopCounters::name("spines", "eth5 fe80::1 vlan 100");
    assert_eq!(b, "spines|eth5|fe80::1|vlan|100");
    publisher.offer(vec![counters(&a, 10, Some(2)), counters(&b, 20, None)]);
    eventually(&mut db, |db| {
        hgetall(db, "COUNTERS_FABRICLB_NEXTHOP_NAME_MAP").len() == 2
    });
    assert_eq!(
        hgetall(&mut db, "COUNTERS_FABRICLB_NEXTHOP_NAME_MAP"),
        pairs(&[
            ("spines|eth4|10.0.4.1", "fabriclb:spines|eth4|10.0.4.1"),
            (
                "spines|eth5|fe80::1|vlan|100",
                "fabriclb:spines|eth5|fe80::1|vlan|100"
            ),
        ])
    );
    assert_eq!(
        hgetall(&mut db, "COUNTERS:fabriclb:spines|eth4|10.0.4.1"),
        pairs(&[
            ("packets", "10"),
            ("bytes", "10000"),
            ("sprayed_packets", "3"),
            ("quality", "1024"),
            ("quality_band", "2"),
            ("usable", "1"),
        ])
    );
    assert!(hgetall(&mut db, "COUNTERS:fabriclb:old|eth9|10.0.9.1").is_empty());

    // A next hop gone: its key goes with it.
    publisher.offer(vec![counters(&a, 11, None)]);
    eventually(&mut db, |db| {
        hgetall(db, "COUNTERS_FABRICLB_NEXTHOP_NAME_MAP").len() == 1
    });
    assert!(hgetall(&mut db, "COUNTERS:fabriclb:spines|eth5|fe80::1|vlan|100").is_empty());
    assert_eq!(
        hgetall(&mut db, "COUNTERS:fabriclb:spines|eth4|10.0.4.1"),
        pairs(&[
            ("packets", "11"),
            ("bytes", "11000"),
            ("sprayed_packets", "3"),
            ("quality", "1024"),
            ("usable", "1"),
        ])
    );
}
