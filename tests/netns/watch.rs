//! `fabriclb watch`: the flow events of a running daemon, live.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use fabriclb::daemon::flow_events::{WatchEvent, WatchLine};
use fabriclb::testbed::{Daemon, UdpLoad};

use crate::bed::{Bed, fabriclb};
use crate::failover::{every_spine_carrying, s2_out_and_idle};

/// How long a watch may take to show what the test waits for.
const PATIENCE: Duration = Duration::from_secs(10);

/// `fabriclb watch` of `daemon` with `args`, its events read on a thread
/// (killed when dropped, so a test that fails leaves no watch behind).
struct Watch {
    child: Child,
    events: mpsc::Receiver<WatchEvent>,
}

impl Watch {
    fn start(daemon: &Daemon, args: &[&str]) -> Self {
        let mut child = Command::new(fabriclb())
            .arg("watch")
            .args(&daemon.reload_args()[1..])
            .args(["--json"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("fabriclb watch");
        let stdout = child.stdout.take().expect("piped");
        // Said once the daemon subscribed it: every event after is seen.
        let mut said = String::new();
        let stderr = child.stderr.take().expect("piped");
        BufReader::new(stderr).read_line(&mut said).expect("stderr");
        assert!(said.starts_with("watching "), "{said}");
        let (tx, events) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                match serde_json::from_str(&line) {
                    Ok(WatchLine::Event(event)) => {
                        if tx.send(*event).is_err() {
                            return;
                        }
                    }
                    other => panic!("watch printed {line:?}: {other:?}"),
                }
            }
        });
        Self { child, events }
    }

    /// Events until `done` holds for the ones so far; panics after
    /// [`PATIENCE`] with what came.
    fn until(&self, what: &str, done: impl Fn(&[WatchEvent]) -> bool) -> Vec<WatchEvent> {
        let mut seen = Vec::new();
        let deadline = std::time::Instant::now() + PATIENCE;
        while !done(&seen) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.events.recv_timeout(left) {
                Ok(event) => seen.push(event),
                Err(_) => panic!("no {what} within {PATIENCE:?}; watched:\n{seen:#?}"),
            }
        }
        seen
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn is_s2(end: &Option<fabriclb::daemon::flow_events::PathEnd>) -> bool {
    end.as_ref()
        .is_some_and(|e| e.interface == "s2" && e.address == "198.18.2.2")
}

/// Under UDP flows in flowlet mode, spine 2's end of its link goes down:
/// `watch` shows s2 leaving its group with the reason, and the flows that
/// were on it moving off mid-flowlet for `failover`, each with its
/// five-tuple, from s2 (as the choice saw it: quality, load) to another
/// spine. A second watch filtered to one of those flows shows only its
/// events; one filtered to another group shows none of them.
#[test]
fn watch_shows_flows_failing_over_off_a_downed_spine_and_why() {
    let bed = Bed::up("wt", 1);
    let daemon = bed
        .daemon(
            &bed.config("mode = \"flowlet\""),
            &["--refresh-interval-ms", "60000"],
        )
        .expect("fabriclb");
    let load = UdpLoad::start(&bed.testbed, 64).expect("traffic");
    every_spine_carrying(&bed, &daemon);
    let watch = Watch::start(&daemon, &[]);
    let other_group = Watch::start(&daemon, &["--group", "elsewhere"]);

    bed.ip("s2", &["link", "set", "leaf", "down"])
        .expect("down");
    let seen = watch.until("s2 leaving and 4 of its flows failing over", |seen| {
        seen.iter().any(|e| e.event == "next_hop_down")
            && seen.iter().filter(|e| e.cause == "failover").count() >= 4
    });
    s2_out_and_idle(&bed, &daemon);
    let down = seen.iter().find(|e| e.event == "next_hop_down");
    let down = down.expect("s2 left");
    assert_eq!(
        (down.group.as_str(), down.cause.as_str(), is_s2(&down.from)),
        ("spines", "unusable", true),
        "{down:#?}"
    );
    assert_eq!(down.reason.as_deref(), Some("interface s2 down"));
    let moves: Vec<&WatchEvent> = seen.iter().filter(|e| e.cause == "failover").collect();
    for event in &moves {
        assert_eq!(event.event, "flowlet_move", "{event:#?}");
        assert!(is_s2(&event.from), "moved off s2: {event:#?}");
        let to = event.to.as_ref().expect("moved somewhere");
        assert!(
            ["s1", "s3", "s4"].contains(&to.interface.as_str()),
            "{event:#?}"
        );
        let flow = event.flow.as_ref().expect("a flow");
        assert_eq!((flow.protocol, flow.qp), (17, None), "{event:#?}");
        // Mid-flowlet: 64 flows at thousands of datagrams a second each
        // come back well within the 256 µs gap... or barely past it.
        assert!(event.gap_us.is_some_and(|gap| gap < 100_000), "{event:#?}");
        assert_eq!(to.quality, Some(1024), "no telemetry: default quality");
    }

    eprintln!("{down}\n{}", moves[0]);
    let flow = moves[0].flow.as_ref().expect("a flow");
    let filter = format!(
        "udp src {}:{} dst {}:{}",
        flow.src, flow.src_port, flow.dst, flow.dst_port
    );
    let one_flow = Watch::start(&daemon, &["--flow", &filter]);
    bed.ip("s2", &["link", "set", "leaf", "up"]).expect("up");
    watch.until("s2 back", |seen| {
        seen.iter().any(|e| e.event == "next_hop_up")
    });
    // Back up, s2 takes back its own buckets: flowlets move onto it for
    // the choice, not a failover; the filtered watch may see its flow's
    // move, and nothing of any other flow.
    std::thread::sleep(Duration::from_millis(500));
    drop(watch);
    for event in one_flow.events.try_iter() {
        assert_eq!(event.flow.as_ref(), Some(flow), "{event:#?}");
    }
    assert_eq!(other_group.events.try_iter().count(), 0);
    let report = load.stop(&bed.testbed).expect("traffic");
    eprintln!("{report:?}");
}
