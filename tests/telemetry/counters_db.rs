//! `counters-db` against a real `redis-server` on a socket of the test's
//! own, holding COUNTERS_DB rows shaped the way SONiC writes them:
//! portsorch's name maps, syncd's `COUNTERS:<oid>` hashes with decimal
//! string values, in database 2. Each test starts its own server in its
//! own scratch directory, so they run in parallel with anything.

use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::time::{Duration, Instant};

use fabriclb::telemetry::counters_db::{Address, CountersDb, Switches};
use fabriclb::telemetry::{Reading, Source, TelemetryError};
use fabriclb::testbed::redis::{RedisServer as Redis, Scratch};

/// The source's timeout in these tests: generous for a local socket.
const TIMEOUT: Duration = Duration::from_millis(500);
/// How long a server may take to answer, or a looked-for reading to show.
const BOUND: Duration = Duration::from_secs(10);
const OCCUPANCY: &str = "SAI_QUEUE_STAT_CURR_OCCUPANCY_BYTES";
const OUT_OCTETS: &str = "SAI_PORT_STAT_IF_OUT_OCTETS";

/// Writes to COUNTERS_DB.
struct Db(redis::Connection);

impl Db {
    fn hset(&mut self, key: &str, pairs: &[(&str, String)]) {
        let mut cmd = redis::cmd("HSET");
        cmd.arg(key);
        for (field, value) in pairs {
            cmd.arg(*field).arg(value);
        }
        cmd.query::<i64>(&mut self.0)
            .unwrap_or_else(|e| panic!("HSET {key}: {e}"));
    }

    fn run(&mut self, args: &[&str]) {
        let mut cmd = redis::cmd(args[0]);
        for arg in &args[1..] {
            cmd.arg(*arg);
        }
        cmd.query::<redis::Value>(&mut self.0)
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    }

    /// One port as portsorch and syncd write it: the name maps first, then
    /// the counter rows, every value a decimal string.
    fn write(&mut self, port: &Port) {
        self.hset("COUNTERS_PORT_NAME_MAP", &[(port.name, port.oid.clone())]);
        self.write_queues(port);
        self.write_port_row(port);
    }

    fn write_queues(&mut self, port: &Port) {
        for q in &port.queues {
            let name = format!("{}:{}", port.name, q.index);
            self.hset("COUNTERS_QUEUE_NAME_MAP", &[(&name, q.oid.clone())]);
            self.hset("COUNTERS_QUEUE_PORT_MAP", &[(&q.oid, port.oid.clone())]);
            self.hset("COUNTERS_QUEUE_INDEX_MAP", &[(&q.oid, q.index.to_string())]);
            if let Some(kind) = q.kind {
                self.hset("COUNTERS_QUEUE_TYPE_MAP", &[(&q.oid, kind.to_string())]);
            }
            self.hset(
                &format!("COUNTERS:{}", q.oid),
                &[
                    ("SAI_QUEUE_STAT_PACKETS", "1000".into()),
                    ("SAI_QUEUE_STAT_BYTES", "1500000".into()),
                    ("SAI_QUEUE_STAT_DROPPED_PACKETS", "0".into()),
                    (OCCUPANCY, q.occupancy.to_string()),
                ],
            );
        }
    }

    fn write_port_row(&mut self, port: &Port) {
        let mut fields = vec![
            ("SAI_PORT_STAT_IF_IN_OCTETS", "555".to_string()),
            ("SAI_PORT_STAT_IF_OUT_UCAST_PKTS", "77".to_string()),
        ];
        if let Some(out) = port.out_octets {
            fields.push((OUT_OCTETS, out.to_string()));
        }
        self.hset(&format!("COUNTERS:{}", port.oid), &fields);
    }
}

struct Port {
    name: &'static str,
    oid: String,
    queues: Vec<Queue>,
    out_octets: Option<u64>,
}

struct Queue {
    index: u32,
    oid: String,
    kind: Option<&'static str>,
    occupancy: u64,
}

/// A port with SONiC-shaped OIDs (`base` keeps ports' and restarts' OIDs
/// apart), unicast queues 0..=7 holding `unicast`, multicast queues 8 and
/// 9 holding `multicast` (never counted).
fn sonic_port(
    name: &'static str,
    base: u64,
    unicast: [u64; 8],
    multicast: [u64; 2],
    out_octets: Option<u64>,
) -> Port {
    let queue = |index: u32, kind, occupancy| Queue {
        index,
        oid: format!("oid:0x15{:012x}", base * 0x100 + u64::from(index)),
        kind: Some(kind),
        occupancy,
    };
    let mut queues: Vec<Queue> = (0..8)
        .map(|i| queue(i, "SAI_QUEUE_TYPE_UNICAST", unicast[i as usize]))
        .collect();
    queues.push(queue(8, "SAI_QUEUE_TYPE_MULTICAST", multicast[0]));
    queues.push(queue(9, "SAI_QUEUE_TYPE_MULTICAST", multicast[1]));
    Port {
        name,
        oid: format!("oid:0x10{:012x}", base),
        queues,
        out_octets,
    }
}

fn over_socket(socket: &Path, ports: &[&str]) -> CountersDb {
    let address: Address = format!("unix:{}", socket.display())
        .parse()
        .expect("address");
    CountersDb::new(
        address,
        ports.iter().map(|p| p.to_string()).collect(),
        TIMEOUT,
    )
}

fn ok(queued_bytes: u64, tx_bytes: Option<u64>) -> Result<Reading, TelemetryError> {
    Ok(Reading {
        queued_bytes,
        tx_bytes,
        speed_bytes_per_s: None,
        read_at: None,
    })
}

/// [`ok`] on a port whose STATE_DB row says it runs at `mbit` Mbit/s.
fn ok_at(queued_bytes: u64, tx_bytes: Option<u64>, mbit: u64) -> Result<Reading, TelemetryError> {
    Ok(Reading {
        speed_bytes_per_s: Some(mbit * 125_000),
        ..ok(queued_bytes, tx_bytes)?
    })
}

fn garbage(what: &str, why: &str) -> Result<Reading, TelemetryError> {
    Err(TelemetryError::Garbage {
        source_name: "counters-db",
        what: what.into(),
        why: why.into(),
    })
}

/// Polls until `done` holds, bounded; returns the last poll.
fn poll_until(
    db: &mut CountersDb,
    what: &str,
    done: impl Fn(&[Result<Reading, TelemetryError>]) -> bool,
) -> Vec<Result<Reading, TelemetryError>> {
    let start = Instant::now();
    loop {
        let polled = db.poll();
        if done(&polled) {
            return polled;
        }
        assert!(
            start.elapsed() < BOUND,
            "{what} within {BOUND:?}; last poll {polled:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn assert_unreachable(polled: &[Result<Reading, TelemetryError>], paths: usize, mentions: &str) {
    assert_eq!(polled.len(), paths, "{polled:?}");
    for result in polled {
        match result {
            Err(TelemetryError::Unreachable { source_name, why }) => {
                assert_eq!(*source_name, "counters-db");
                assert!(why.contains(mentions), "`{why}` does not name `{mentions}`");
            }
            other => panic!("expected Unreachable, got {other:?} in {polled:?}"),
        }
    }
}

#[test]
fn sums_unicast_occupancy_and_reads_out_octets() {
    let dir = Scratch::new("sums");
    let server = Redis::start(&dir);
    let mut db = Db(server.conn(2));
    let mut e0 = sonic_port(
        "Ethernet0",
        2,
        [100, 200, 300, 400, 500, 600, 700, 800],
        [1_000_000, 2_000_000],
        Some(123_456_789),
    );
    // A queue of both kinds counts.
    e0.queues[0].kind = Some("SAI_QUEUE_TYPE_ALL");
    let mut e4 = sonic_port(
        "Ethernet4",
        3,
        [0, 0, 0, 1500, 0, 0, 0, 9000],
        [7777, 8888],
        Some(42),
    );
    // The type map does not list queue 7: its 9000 bytes still count.
    e4.queues[7].kind = None;
    // A port row without SAI_PORT_STAT_IF_OUT_OCTETS.
    let e8 = sonic_port("Ethernet8", 4, [1, 2, 3, 4, 5, 6, 7, 8], [9, 9], None);
    for p in [&e0, &e4, &e8] {
        db.write(p);
    }
    // portsorch's operational speeds in STATE_DB; Ethernet8 is not up.
    let mut state = Db(server.conn(6));
    state.hset("PORT_TABLE|Ethernet0", &[("speed", "400000".into())]);
    state.hset("PORT_TABLE|Ethernet4", &[("speed", "100000".into())]);

    // Path order is the order given, not the switch's.
    let mut source = over_socket(&server.socket, &["Ethernet4", "Ethernet0", "Ethernet8"]);
    assert_eq!(source.name(), "counters-db");
    assert_eq!(
        source.poll(),
        [
            ok_at(10_500, Some(42), 100_000),
            ok_at(3_600, Some(123_456_789), 400_000),
            ok(36, None)
        ]
    );

    // Counters move, and Ethernet0 loses a lane (100G): the next poll
    // shows them.
    state.hset("PORT_TABLE|Ethernet0", &[("speed", "100000".into())]);
    db.hset(
        &format!("COUNTERS:{}", e0.queues[3].oid),
        &[(OCCUPANCY, "4000".into())],
    );
    db.hset(
        &format!("COUNTERS:{}", e0.oid),
        &[(OUT_OCTETS, "123457789".into())],
    );
    db.hset(&format!("COUNTERS:{}", e8.oid), &[(OUT_OCTETS, "5".into())]);
    let moved = [
        ok_at(10_500, Some(42), 100_000),
        ok_at(7_200, Some(123_457_789), 100_000),
        ok(36, Some(5)),
    ];
    assert_eq!(source.poll(), moved);

    // Multicast queues fill up: nothing changes.
    db.hset(
        &format!("COUNTERS:{}", e4.queues[8].oid),
        &[(OCCUPANCY, "999999".into())],
    );
    db.hset(
        &format!("COUNTERS:{}", e4.queues[9].oid),
        &[(OCCUPANCY, "888888".into())],
    );
    assert_eq!(source.poll(), moved);
}

#[test]
fn finds_a_port_added_after_start() {
    let dir = Scratch::new("added");
    let server = Redis::start(&dir);
    let mut db = Db(server.conn(2));
    db.write(&sonic_port("Ethernet0", 2, [10; 8], [5, 5], Some(1000)));
    let mut source = over_socket(&server.socket, &["Ethernet0", "Ethernet8"]);
    assert_eq!(
        source.poll(),
        [
            ok(80, Some(1000)),
            garbage("COUNTERS_PORT_NAME_MAP Ethernet8", "no such port")
        ]
    );

    // portsorch adds the port, queue counters come later.
    let e8 = sonic_port("Ethernet8", 4, [1, 0, 0, 0, 0, 0, 0, 2], [3, 3], Some(77));
    db.hset("COUNTERS_PORT_NAME_MAP", &[(e8.name, e8.oid.clone())]);
    db.write_port_row(&e8);
    let no_queues = garbage(
        "COUNTERS_QUEUE_NAME_MAP Ethernet8:*",
        "no unicast queues listed",
    );
    let polled = poll_until(&mut source, "Ethernet8 in the port map", |p| {
        p[1] == no_queues
    });
    assert_eq!(polled[0], ok(80, Some(1000)));

    db.write_queues(&e8);
    let polled = poll_until(&mut source, "Ethernet8's queues", |p| p[1].is_ok());
    assert_eq!(polled, [ok(80, Some(1000)), ok(3, Some(77))]);
}

#[test]
fn garbage_blinds_only_its_own_path() {
    let dir = Scratch::new("garbage");
    let server = Redis::start(&dir);
    let mut db = Db(server.conn(2));
    let e0 = sonic_port("Ethernet0", 2, [1, 2, 3, 4, 5, 6, 7, 8], [0, 0], Some(100));
    let e4 = sonic_port("Ethernet4", 3, [10; 8], [0, 0], Some(200));
    db.write(&e0);
    db.write(&e4);
    let mut source = over_socket(&server.socket, &["Ethernet0", "Ethernet4", "Ethernet12"]);
    let unknown = || garbage("COUNTERS_PORT_NAME_MAP Ethernet12", "no such port");
    assert_eq!(
        source.poll(),
        [ok(36, Some(100)), ok(80, Some(200)), unknown()]
    );

    // A value that is not a number.
    let q5 = format!("COUNTERS:{}", e0.queues[5].oid);
    db.hset(&q5, &[(OCCUPANCY, "abc".into())]);
    assert_eq!(
        source.poll(),
        [
            garbage(&format!("{q5} {OCCUPANCY}"), "not a decimal count: \"abc\""),
            ok(80, Some(200)),
            unknown(),
        ]
    );
    db.hset(&q5, &[(OCCUPANCY, "6".into())]);

    // A counter row that is gone.
    let q2 = format!("COUNTERS:{}", e4.queues[2].oid);
    db.run(&["DEL", &q2]);
    assert_eq!(
        source.poll(),
        [
            ok(36, Some(100)),
            garbage(&format!("{q2} {OCCUPANCY}"), "missing"),
            unknown()
        ]
    );
    db.write(&e4);

    // A port counter that is not a number.
    let p0 = format!("COUNTERS:{}", e0.oid);
    db.hset(&p0, &[(OUT_OCTETS, "12x".into())]);
    assert_eq!(
        source.poll(),
        [
            garbage(
                &format!("{p0} {OUT_OCTETS}"),
                "not a decimal count: \"12x\""
            ),
            ok(80, Some(200)),
            unknown(),
        ]
    );
    db.hset(&p0, &[(OUT_OCTETS, "101".into())]);

    // A speed that is not Mbit/s, in STATE_DB: the pipeline visits it
    // and comes back to COUNTERS_DB for the next poll.
    let mut state = Db(server.conn(6));
    state.hset("PORT_TABLE|Ethernet4", &[("speed", "40G".into())]);
    let bad_speed = garbage(
        "STATE_DB PORT_TABLE|Ethernet4 speed",
        "not a decimal count: \"40G\"",
    );
    assert_eq!(source.poll(), [ok(36, Some(101)), bad_speed, unknown()]);
    state.run(&["DEL", "PORT_TABLE|Ethernet4"]);
    assert_eq!(
        source.poll(),
        [ok(36, Some(101)), ok(80, Some(200)), unknown()]
    );

    // A row of the wrong type: Redis answers that command with an error,
    // the rest of the pipeline still reads.
    let q1 = format!("COUNTERS:{}", e4.queues[1].oid);
    db.run(&["DEL", &q1]);
    db.run(&["SET", &q1, "7"]);
    let polled = source.poll();
    assert_eq!(polled[0], ok(36, Some(101)));
    assert_eq!(polled[2], unknown());
    match &polled[1] {
        Err(TelemetryError::Garbage { what, why, .. }) => {
            assert_eq!(*what, format!("{q1} {OCCUPANCY}"));
            assert!(
                why.contains("WRONGTYPE") || why.contains("WrongType"),
                "{why}"
            );
        }
        other => panic!("expected Garbage for Ethernet4, got {other:?}"),
    }

    // Repaired: everything but the unknown port reads again.
    db.run(&["DEL", &q1]);
    db.write(&e4);
    assert_eq!(
        source.poll(),
        [ok(36, Some(101)), ok(80, Some(200)), unknown()]
    );
}

#[test]
fn unreachable_while_down_then_reconnects() {
    let dir = Scratch::new("restart");
    let server = Redis::start(&dir);
    Db(server.conn(2)).write(&sonic_port("Ethernet0", 2, [1; 8], [0, 0], Some(10)));
    Db(server.conn(2)).write(&sonic_port("Ethernet4", 3, [2; 8], [0, 0], Some(20)));
    let socket = dir.socket();
    let mut source = over_socket(&socket, &["Ethernet0", "Ethernet4"]);
    assert_eq!(source.poll(), [ok(8, Some(10)), ok(16, Some(20))]);

    server.kill();
    let start = Instant::now();
    assert_unreachable(&source.poll(), 2, &socket.display().to_string());
    assert_unreachable(&source.poll(), 2, &socket.display().to_string());
    assert!(
        start.elapsed() < 4 * TIMEOUT,
        "two polls of a dead socket took {:?}",
        start.elapsed()
    );

    // Back on the same socket with new OIDs, as after a syncd restart: the
    // first poll reconnects and reads the new maps.
    let server = Redis::start(&dir);
    Db(server.conn(2)).write(&sonic_port("Ethernet0", 12, [3; 8], [0, 0], Some(30)));
    Db(server.conn(2)).write(&sonic_port("Ethernet4", 13, [4; 8], [0, 0], Some(40)));
    assert_eq!(source.poll(), [ok(24, Some(30)), ok(32, Some(40))]);

    // Restarted between two polls: the kept connection is dead, the poll
    // still reads through a fresh one.
    server.kill();
    let server = Redis::start(&dir);
    Db(server.conn(2)).write(&sonic_port("Ethernet0", 22, [5; 8], [0, 0], Some(50)));
    Db(server.conn(2)).write(&sonic_port("Ethernet4", 23, [6; 8], [0, 0], Some(60)));
    assert_eq!(source.poll(), [ok(40, Some(50)), ok(48, Some(60))]);
}

#[test]
fn unreachable_without_a_server_or_an_answer() {
    let dir = Scratch::new("silent");

    // No socket at all.
    let missing = dir.0.join("none.sock");
    let mut source = over_socket(&missing, &["Ethernet0", "Ethernet4"]);
    assert_unreachable(&source.poll(), 2, &missing.display().to_string());

    // Nothing listening on a TCP port.
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let address: Address = format!("redis://127.0.0.1:{port}")
        .parse()
        .expect("address");
    let mut refused = CountersDb::new(address, vec!["Ethernet0".into()], TIMEOUT);
    assert_unreachable(&refused.poll(), 1, &format!("127.0.0.1:{port}"));

    // A socket that accepts and never answers: the timeout ends the poll.
    let silent = dir.0.join("silent.sock");
    let _listener = UnixListener::bind(&silent).expect("bind");
    let mut source = over_socket(&silent, &["Ethernet0", "Ethernet4"]);
    let start = Instant::now();
    assert_unreachable(&source.poll(), 2, &silent.display().to_string());
    let took = start.elapsed();
    assert!(
        took >= TIMEOUT / 2 && took < 4 * TIMEOUT,
        "silent poll took {took:?}"
    );
}

#[test]
fn reads_over_tcp() {
    let dir = Scratch::new("tcp");
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let port_arg = port.to_string();
    let server = Redis::start_with(&dir, &["--port", &port_arg, "--bind", "127.0.0.1"]);
    Db(server.conn(2)).write(&sonic_port("Ethernet0", 2, [7; 8], [100, 100], Some(9)));
    let address: Address = format!("redis://127.0.0.1:{port}")
        .parse()
        .expect("address");
    assert_eq!(address.to_string(), format!("redis://127.0.0.1:{port}"));
    let mut source = CountersDb::new(address, vec!["Ethernet0".into()], TIMEOUT);
    assert_eq!(source.poll(), [ok(56, Some(9))]);
}

#[test]
fn a_frozen_server_times_out_then_reads_again() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;

    let dir = Scratch::new("frozen");
    // A listen backlog Redis also uses for its unix socket, small enough
    // for the polls below to fill it.
    let server = Redis::start_with(&dir, &["--port", "0", "--tcp-backlog", "4"]);
    Db(server.conn(2)).write(&sonic_port("Ethernet0", 2, [1; 8], [0, 0], Some(10)));
    let mut source = over_socket(&server.socket, &["Ethernet0"]);
    assert_eq!(source.poll(), [ok(8, Some(10))]);

    // Stopped after the connection is up: only the source's own read
    // timeout can end the poll.
    let pid = Pid::from_raw(i32::try_from(server.pid()).expect("pid"));
    kill(pid, Signal::SIGSTOP).expect("SIGSTOP redis-server");
    let start = Instant::now();
    let polled = source.poll();
    let took = start.elapsed();
    assert_unreachable(&polled, 1, &server.socket.display().to_string());
    assert!(
        took >= TIMEOUT / 2 && took < 4 * TIMEOUT,
        "frozen poll took {took:?}"
    );

    // Still stopped, polled over and over: each poll's connection waits in
    // the listen backlog until that is full, and then connecting must fail
    // rather than block. On a thread, so a hang fails the test instead of
    // stalling it.
    let socket = server.socket.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let fast = Duration::from_millis(20);
        let address: Address = format!("unix:{}", socket.display())
            .parse()
            .expect("address");
        let mut source = CountersDb::new(address, vec!["Ethernet0".into()], fast);
        for _ in 0..40 {
            let polled = source.poll();
            if tx.send(polled).is_err() {
                return;
            }
        }
    });
    for i in 0..40 {
        let polled = rx.recv_timeout(BOUND).unwrap_or_else(|_| {
            panic!("poll {i} of a stopped server did not return within {BOUND:?}")
        });
        assert_unreachable(&polled, 1, &server.socket.display().to_string());
    }
    kill(pid, Signal::SIGCONT).expect("SIGCONT redis-server");

    // Running again: a fresh connection reads, the dropped one's late
    // replies are never mistaken for this poll's.
    Db(server.conn(2)).hset(
        &format!(
            "COUNTERS:{}",
            sonic_port("Ethernet0", 2, [0; 8], [0, 0], None).oid
        ),
        &[(OUT_OCTETS, "11".into())],
    );
    assert_eq!(source.poll(), [ok(8, Some(11))]);
}

/// Paths on two switches' COUNTERS_DB, interleaved (as a leaf's next hops
/// toward two spines and their destinations): each reads its own switch's
/// row and comes back in path order; one switch gone blinds only its
/// paths.
#[test]
fn paths_on_several_switches_read_each_its_own() {
    let (dir_a, dir_b) = (Scratch::new("switch-a"), Scratch::new("switch-b"));
    let (a, b) = (Redis::start(&dir_a), Redis::start(&dir_b));
    let address = |socket: &Path| -> Address {
        format!("unix:{}", socket.display())
            .parse()
            .expect("address")
    };
    Db(a.conn(2)).write(&sonic_port(
        "l2",
        2,
        [10, 0, 0, 0, 0, 0, 0, 0],
        [0, 0],
        Some(1),
    ));
    Db(a.conn(2)).write(&sonic_port(
        "l3",
        3,
        [30, 0, 0, 0, 0, 0, 0, 0],
        [0, 0],
        Some(3),
    ));
    Db(b.conn(2)).write(&sonic_port(
        "l2",
        4,
        [20, 0, 0, 0, 0, 0, 0, 0],
        [0, 0],
        Some(2),
    ));
    Db(b.conn(2)).write(&sonic_port(
        "l3",
        5,
        [40, 0, 0, 0, 0, 0, 0, 0],
        [0, 0],
        Some(4),
    ));
    let paths = vec![
        (address(&a.socket), "l2".to_string()),
        (address(&b.socket), "l2".to_string()),
        (address(&a.socket), "l3".to_string()),
        (address(&b.socket), "l3".to_string()),
    ];
    let mut switches = Switches::new(paths, TIMEOUT);
    assert_eq!(
        switches.poll(),
        [
            ok(10, Some(1)),
            ok(20, Some(2)),
            ok(30, Some(3)),
            ok(40, Some(4))
        ]
    );
    b.kill();
    let polled = switches.poll();
    assert_eq!(
        (&polled[0], &polled[2]),
        (&ok(10, Some(1)), &ok(30, Some(3)))
    );
    assert_unreachable(&[polled[1].clone(), polled[3].clone()], 2, "switch-b");
}

/// Every switch is asked at once, each on a thread of its own: two frozen
/// spines cost a poll one timeout, not one each, the one still answering
/// reads in the same poll, and once thawed they read again.
#[test]
fn frozen_switches_cost_a_poll_one_timeout_and_blind_only_their_paths() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;

    let dirs = [
        Scratch::new("fan-a"),
        Scratch::new("fan-b"),
        Scratch::new("fan-c"),
    ];
    let servers: Vec<Redis> = dirs.iter().map(Redis::start).collect();
    let mut paths = Vec::new();
    for (i, server) in (1u64..).zip(&servers) {
        Db(server.conn(2)).write(&sonic_port(
            "l2",
            i,
            [i, 0, 0, 0, 0, 0, 0, 0],
            [0, 0],
            Some(i),
        ));
        let address: Address = format!("unix:{}", server.socket.display())
            .parse()
            .expect("address");
        paths.push((address, "l2".to_string()));
    }
    let mut switches = Switches::new(paths, TIMEOUT);
    let all_read = [ok(1, Some(1)), ok(2, Some(2)), ok(3, Some(3))];
    assert_eq!(switches.poll(), all_read);

    let pid = |server: &Redis| Pid::from_raw(i32::try_from(server.pid()).expect("pid"));
    for frozen in &servers[1..] {
        kill(pid(frozen), Signal::SIGSTOP).expect("SIGSTOP redis-server");
    }
    let start = Instant::now();
    let polled = switches.poll();
    let took = start.elapsed();
    assert_eq!(polled[0], ok(1, Some(1)));
    assert_unreachable(&polled[1..2], 1, "fan-b");
    assert_unreachable(&polled[2..], 1, "fan-c");
    // One after the other, the two would have taken a timeout each.
    assert!(
        took >= TIMEOUT * 9 / 10 && took < TIMEOUT * 8 / 5,
        "a poll with two frozen switches took {took:?}"
    );

    for frozen in &servers[1..] {
        kill(pid(frozen), Signal::SIGCONT).expect("SIGCONT redis-server");
    }
    let start = Instant::now();
    loop {
        let polled = switches.poll();
        if polled == all_read {
            break;
        }
        assert_eq!(polled[0], ok(1, Some(1)));
        assert!(
            start.elapsed() < BOUND,
            "thawed switches read again within {BOUND:?}; last poll {polled:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
