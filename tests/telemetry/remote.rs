//! The `remote` source against a real `prometheus-node-exporter` in a
//! namespace of the test's own (a veth whose TBF holds a queue that does
//! not move, read back as `tc` reads it), against a tiny HTTP server
//! answering garbage or nothing, and against the testbed's spines
//! ([`spines`]).

mod server;
mod spines;

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fabriclb::telemetry::remote::{Remote, Target};
use fabriclb::telemetry::{Reading, Source, TelemetryError};
use fabriclb::testbed::in_netns;
use server::{Answer, InFlight, Server};

/// A namespace of this process and `tag` (a tag used twice is a failure:
/// tests run in parallel), deleted on drop, also after a failed assert.
struct Netns {
    name: String,
}

impl Netns {
    fn new(tag: &str) -> Self {
        static TAGS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
        let mut tags = TAGS.lock().unwrap_or_else(|e| e.into_inner());
        assert!(
            !tags.iter().any(|t| t == tag),
            "netns tag {tag:?} used twice"
        );
        tags.push(tag.to_owned());
        let name = format!("rmt{}{tag}", std::process::id() % 100_000);
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        let ns = Self { name };
        run(Command::new("ip").args(["netns", "add", &ns.name]));
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    fn ip(&self, args: &[&str]) {
        run(Command::new("ip").args(["-n", &self.name]).args(args));
    }

    fn tc(&self, args: &[&str]) -> String {
        run(Command::new("tc").args(["-n", &self.name]).args(args))
    }

    fn exec(&self, args: &[&str]) {
        run(Command::new("ip")
            .args(["netns", "exec", &self.name])
            .args(args));
    }

    /// Runs `f` on a thread inside the namespace.
    fn within<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        in_netns(&self.name, f).expect("entering the test's namespace")
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

/// Runs `cmd`, panicking with its stderr if it fails; returns stdout.
fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `prometheus-node-exporter` with only the qdisc collector, listening on
/// `addr` in `ns`; killed and reaped on drop.
struct Exporter {
    child: Child,
}

impl Exporter {
    fn start(ns: &Netns, addr: &'static str) -> Self {
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &ns.name, "prometheus-node-exporter"])
            .args([
                "--collector.disable-defaults",
                "--collector.qdisc",
                "--web.disable-exporter-metrics",
                "--log.level=warn",
            ])
            .arg(format!("--web.listen-address={addr}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            // It warns that it runs as root, nothing the test needs.
            .stderr(Stdio::null());
        // SAFETY: prctl is async-signal-safe; a test that dies takes its
        // exporter with it.
        unsafe {
            command.pre_exec(|| {
                nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)?;
                Ok(())
            });
        }
        let exporter = Self {
            child: command.spawn().expect("starting prometheus-node-exporter"),
        };
        let listening = ns.within(move || {
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if std::net::TcpStream::connect(addr).is_ok() {
                    return true;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            false
        });
        assert!(
            listening,
            "node_exporter not listening on {addr} after 10 s"
        );
        exporter
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn target(url: &str, device: &str) -> Target {
    Target {
        url: url.into(),
        device: device.into(),
    }
}

pub type Readings = Vec<Result<Reading, TelemetryError>>;

/// One poll, timed.
pub fn timed_poll(remote: &mut Remote) -> (Readings, Duration) {
    let start = Instant::now();
    let readings = poll_once(remote);
    (readings, start.elapsed())
}

/// One poll; each reading says its switch read it during the poll, and
/// is given back without that moment, to compare.
fn poll_once(remote: &mut Remote) -> Readings {
    let asked = Instant::now();
    let readings = remote.poll();
    let answered = Instant::now();
    (readings.into_iter())
        .map(|reading| {
            reading.map(|r| {
                let at = r.read_at.expect("a scrape says when the switch read it");
                assert!(
                    asked <= at && at <= answered,
                    "read {at:?} outside the poll"
                );
                Reading { read_at: None, ..r }
            })
        })
        .collect()
}

/// One poll from inside `ns` (the first one there starts the scrape
/// threads, whose sockets then live in `ns`).
fn poll_in(ns: &Netns, remote: Remote) -> (Remote, Readings, Duration) {
    ns.within(move || {
        let mut remote = remote;
        let (readings, elapsed) = timed_poll(&mut remote);
        (remote, readings, elapsed)
    })
}

fn unreachable_why(result: &Result<Reading, TelemetryError>) -> &str {
    match result {
        Err(TelemetryError::Unreachable { source_name, why }) => {
            assert_eq!(*source_name, "remote");
            why
        }
        other => panic!("expected Unreachable, read {other:?}"),
    }
}

fn garbage_why(result: &Result<Reading, TelemetryError>) -> &str {
    match result {
        Err(TelemetryError::Garbage {
            source_name, why, ..
        }) => {
            assert_eq!(*source_name, "remote");
            why
        }
        other => panic!("expected Garbage, read {other:?}"),
    }
}

/// A root qdisc's bytes sent and backlog, as `tc -s -j` reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct TcStats {
    bytes: u64,
    backlog: u64,
}

fn tc_stats(ns: &Netns, dev: &str) -> TcStats {
    let json = ns.tc(&["-s", "-j", "qdisc", "show", "dev", dev]);
    let qdiscs: serde_json::Value = serde_json::from_str(&json).expect("tc's JSON");
    let root = qdiscs
        .as_array()
        .and_then(|all| all.iter().find(|q| q["root"] == true))
        .unwrap_or_else(|| panic!("no root qdisc on {dev}: {json}"));
    let field = |name: &str| {
        root[name]
            .as_u64()
            .unwrap_or_else(|| panic!("no {name} in {root}"))
    };
    TcStats {
        bytes: field("bytes"),
        backlog: field("backlog"),
    }
}

/// `dev`'s stats once two reads 200 ms apart agree.
fn stable_stats(ns: &Netns, dev: &str) -> TcStats {
    let mut last = tc_stats(ns, dev);
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(200));
        let now = tc_stats(ns, dev);
        if now == last {
            return now;
        }
        last = now;
    }
    panic!("{dev}'s queue never settled: {last:?}");
}

/// A veth `va`/`vb` in `ns` with nothing but the test's packets on it:
/// `va` sends to a permanent neighbour through a TBF.
fn quiet_veth(ns: &Netns) {
    ns.exec(&[
        "sysctl",
        "-qw",
        "net.ipv6.conf.all.disable_ipv6=1",
        "net.ipv6.conf.default.disable_ipv6=1",
    ]);
    ns.ip(&["link", "add", "va", "type", "veth", "peer", "name", "vb"]);
    ns.ip(&["link", "set", "va", "up"]);
    ns.ip(&["link", "set", "vb", "up"]);
    ns.ip(&["addr", "add", "10.77.0.1/24", "dev", "va"]);
    ns.ip(&[
        "neigh",
        "add",
        "10.77.0.2",
        "lladdr",
        "02:00:00:00:00:02",
        "dev",
        "va",
        "nud",
        "permanent",
    ]);
}

#[test]
fn remote_reads_backlog_and_bytes_as_tc_does() {
    let ns = Netns::new("tbf");
    quiet_veth(&ns);
    ns.tc(&[
        "qdisc", "add", "dev", "va", "root", "tbf", "rate", "1mbit", "burst", "5kb", "limit", "1mb",
    ]);
    let _exporter = Exporter::start(&ns, "127.0.0.1:9100");
    // 60 kB at 1 Mbit/s: a burst leaves, the rest queues. Then a rate of
    // 8 bit/s (and a bucket smaller than a packet) holds the queue still.
    ns.within(|| {
        let socket = std::net::UdpSocket::bind("10.77.0.1:0").unwrap();
        for _ in 0..60 {
            socket.send_to(&[0u8; 1000], "10.77.0.2:9").unwrap();
        }
    });
    ns.tc(&[
        "qdisc", "change", "dev", "va", "root", "tbf", "rate", "8bit", "burst", "5kb", "limit",
        "1mb",
    ]);
    let before = stable_stats(&ns, "va");
    assert!(
        before.backlog > 10_000 && before.bytes > 1000,
        "the TBF should hold a queue and have sent some: {before:?}"
    );
    let vb = tc_stats(&ns, "vb");

    let url = "http://127.0.0.1:9100/metrics";
    let remote = Remote::new(
        vec![
            target(url, "va"),
            target(url, "nosuchdev"),
            target(url, "vb"),
        ],
        Duration::from_secs(2),
    );
    let (remote, readings, _) = poll_in(&ns, remote);
    assert_eq!(
        tc_stats(&ns, "va"),
        before,
        "the queue moved during the scrape"
    );
    assert_eq!(
        readings[0],
        Ok(Reading {
            queued_bytes: before.backlog,
            tx_bytes: Some(before.bytes),
            speed_bytes_per_s: None,
            read_at: None,
        })
    );
    // The missing device is garbage; the others on its URL still read.
    let why = garbage_why(&readings[1]);
    assert!(why.contains("no node_qdisc_backlog series"), "{why}");
    assert!(
        matches!(&readings[1], Err(TelemetryError::Garbage { what, .. }) if what.contains("nosuchdev")),
        "{:?}",
        readings[1]
    );
    assert_eq!(
        readings[2],
        Ok(Reading {
            queued_bytes: vb.backlog,
            tx_bytes: Some(vb.bytes),
            speed_bytes_per_s: None,
            read_at: None,
        })
    );

    // tx_bytes is the exporter's node_qdisc_bytes_total, as it writes it.
    let body = ns.within(move || {
        let mut response = ureq::get(url).call().expect("GET");
        response.body_mut().read_to_string().expect("body")
    });
    let line = body
        .lines()
        .find(|l| l.starts_with(r#"node_qdisc_bytes_total{device="va",kind="tbf"} "#))
        .unwrap_or_else(|| panic!("no bytes series for va in:\n{body}"));
    let exported: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert_eq!(
        Some(exported as u64),
        readings[0].as_ref().unwrap().tx_bytes
    );
    drop(remote);
}

#[test]
fn remote_is_unreachable_within_the_timeout_once_the_exporter_is_killed() {
    let ns = Netns::new("kill");
    let timeout = Duration::from_secs(1);
    let exporter = Exporter::start(&ns, "127.0.0.1:9100");
    let url = "http://127.0.0.1:9100/metrics";
    let remote = Remote::new(vec![target(url, "lo"), target(url, "nosuchdev")], timeout);
    let (mut remote, readings, _) = poll_in(&ns, remote);
    assert!(readings[0].is_ok(), "{readings:?}");

    drop(exporter);
    for _ in 0..3 {
        let readings = poll_once(&mut remote);
        for reading in &readings {
            unreachable_why(reading);
        }
    }

    // A new exporter on the same address reads again at the next poll.
    let _exporter = Exporter::start(&ns, "127.0.0.1:9100");
    let readings = poll_once(&mut remote);
    assert!(readings[0].is_ok(), "{readings:?}");
    garbage_why(&readings[1]);
}

const GOOD: &str = "# HELP node_qdisc_backlog Number of bytes currently in queue to be sent.\n\
                    # TYPE node_qdisc_backlog gauge\n\
                    node_qdisc_backlog{device=\"x\",kind=\"tbf\"} 1234\n\
                    node_qdisc_backlog{device=\"y\",kind=\"fq_codel\"} 0\n\
                    # TYPE node_qdisc_bytes_total counter\n\
                    node_qdisc_bytes_total{device=\"x\",kind=\"tbf\"} 5678\n\
                    node_qdisc_bytes_total{device=\"y\",kind=\"fq_codel\"} 9.1e+07\n";

const GOOD_X: Reading = Reading {
    queued_bytes: 1234,
    tx_bytes: Some(5678),
    speed_bytes_per_s: None,
    read_at: None,
};

#[test]
fn remote_reads_garbage_and_silence_as_their_kinds() {
    let metrics = |body: &str| Server::start(Answer::Metrics(body.into()));
    let hung = Arc::new(InFlight::default());
    let servers = [
        Server::start(Answer::Raw(
            "200 OK",
            "text/html",
            "<!DOCTYPE html>\n<html><body>Moved to /new</body></html>\n".into(),
        )),
        metrics("node_qdisc_backlog{device=\"x\"} NaN\n"),
        metrics("node_qdisc_backlog{device=\"x\"} -1\n"),
        metrics("node_qdisc_backlog{device=\"x\"} abc\n"),
        Server::start(Answer::Raw(
            "500 Internal Server Error",
            "text/plain",
            GOOD.into(),
        )),
        Server::counted(Answer::Hang, &hung),
        Server::counted(Answer::HangInBody(GOOD.into()), &hung),
        metrics(GOOD),
    ];
    let timeout = Duration::from_millis(500);
    let mut remote = Remote::new(
        servers.iter().map(|s| target(&s.url(), "x")).collect(),
        timeout,
    );
    for poll in 0..3 {
        let readings = poll_once(&mut remote);
        let context = format!("poll {poll}: {readings:#?}");
        let html = garbage_why(&readings[0]);
        assert!(html.contains("not Prometheus text"), "{context}");
        let nan = garbage_why(&readings[1]);
        assert!(nan.contains("NaN, not a number of bytes"), "{context}");
        let negative = garbage_why(&readings[2]);
        assert!(negative.contains("-1, not a number of bytes"), "{context}");
        let abc = garbage_why(&readings[3]);
        assert!(abc.contains("not Prometheus text"), "{context}");
        let status = unreachable_why(&readings[4]);
        assert!(status.contains("500"), "{context}");
        let hung_reads = [unreachable_why(&readings[5]), unreachable_why(&readings[6])];
        assert!(
            hung_reads.iter().all(|why| {
                why.contains("no answer within") || why.contains("still not answered")
            }),
            "{context}"
        );
        assert_eq!(readings[7], Ok(GOOD_X), "{context}");
    }
    // The hung servers cost a poll the timeout once: both were asked at
    // the same time, not one after the other's deadline.
    assert_eq!(
        hung.most(),
        2,
        "the hung servers were scraped one after the other"
    );
}

#[test]
fn remote_a_hung_switch_delays_the_others_by_at_most_the_timeout() {
    let timeout = Duration::from_millis(500);
    let slow = Duration::from_millis(350);
    let in_flight = Arc::new(InFlight::default());
    let hung = Server::counted(Answer::Hang, &in_flight);
    let late = Server::counted(Answer::Slow(slow, GOOD.into()), &in_flight);
    let good = Server::start(Answer::Metrics(GOOD.into()));
    let mut remote = Remote::new(
        vec![
            target(&hung.url(), "x"),
            target(&late.url(), "x"),
            target(&good.url(), "x"),
        ],
        timeout,
    );
    for poll in 0..3 {
        let readings = poll_once(&mut remote);
        let why = unreachable_why(&readings[0]);
        assert!(
            why.contains("no answer within") || why.contains("still not answered"),
            "poll {poll}: {why}"
        );
        assert_eq!(readings[1], Ok(GOOD_X), "poll {poll}");
        assert_eq!(readings[2], Ok(GOOD_X), "poll {poll}");
    }
    // At once, not one after another: the late server answered while the
    // hung one's request was open, so a poll costs the timeout, not both.
    assert_eq!(in_flight.most(), 2, "scraped one after the other");
}

#[test]
fn remote_reads_a_switch_again_once_it_answers() {
    let timeout = Duration::from_millis(300);
    let server = Server::start(Answer::HangOnce(GOOD.into()));
    let mut remote = Remote::new(vec![target(&server.url(), "x")], timeout);
    let readings = poll_once(&mut remote);
    let why = unreachable_why(&readings[0]);
    assert!(why.contains("no answer within"), "{why}");
    // The hung scrape gives up at its deadline and frees its thread, which
    // then scrapes over a new connection.
    let start = Instant::now();
    let mut polls = Vec::new();
    while start.elapsed() < Duration::from_secs(2) {
        let readings = poll_once(&mut remote);
        let ok = readings[0] == Ok(GOOD_X);
        polls.push(readings);
        if ok {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        polls.last().map(|r| &r[0]),
        Some(&Ok(GOOD_X)),
        "never read again after the hang: {polls:#?}"
    );
    // Within a few polls 10 ms apart (3 measured): the thread is freed at
    // the hung scrape's deadline, as the poll that gave up on it returns.
    assert!(polls.len() <= 5, "{} polls to read again", polls.len());
    assert_eq!(server.connections(), 2, "the hung connection is replaced");
}

#[test]
fn remote_keeps_one_connection_and_scrapes_a_shared_url_once() {
    let server = Server::start(Answer::Metrics(GOOD.into()));
    let url = server.url();
    let mut remote = Remote::new(
        vec![target(&url, "x"), target(&url, "y"), target(&url, "x")],
        Duration::from_secs(1),
    );
    let polls = 20;
    for _ in 0..polls {
        let readings = poll_once(&mut remote);
        let y = Reading {
            queued_bytes: 0,
            tx_bytes: Some(91_000_000),
            speed_bytes_per_s: None,
            read_at: None,
        };
        assert_eq!(readings, [Ok(GOOD_X), Ok(y), Ok(GOOD_X)]);
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(server.requests(), polls, "one request per URL per poll");
    assert_eq!(server.connections(), 1, "one kept-alive connection");
}
