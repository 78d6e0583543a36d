//! `fabriclb watch`: the flow events of a running daemon, live.

use std::time::{Duration, Instant};

use fabriclb::daemon::flow_events::{PathEnd, WatchEvent};
use fabriclb::testbed::{Daemon, EventWatch, UdpLoad};

use crate::bed::{Bed, fabriclb};
use crate::failover::{every_spine_carrying, s2_out_and_idle};

/// How long a watch may take to show what the test waits for.
const PATIENCE: Duration = Duration::from_secs(10);

fn watch(daemon: &Daemon, args: &[&str]) -> EventWatch {
    EventWatch::start(fabriclb(), daemon, args).expect("fabriclb watch")
}

/// `watch`'s events until `done` holds for the ones so far; panics after
/// [`PATIENCE`] with what came, or at a line that is no event.
fn until(watch: &EventWatch, what: &str, done: impl Fn(&[WatchEvent]) -> bool) -> Vec<WatchEvent> {
    let mut seen = Vec::new();
    let deadline = Instant::now() + PATIENCE;
    while !done(&seen) {
        match watch.next_within(deadline.saturating_duration_since(Instant::now())) {
            Some(Ok(event)) => seen.push(event),
            Some(Err(line)) => panic!("watch printed {line:?}"),
            None => panic!("no {what} within {PATIENCE:?}; watched:\n{seen:#?}"),
        }
    }
    seen
}

fn is_s2(end: &Option<PathEnd>) -> bool {
    end.as_ref()
        .is_some_and(|e| e.interface == "s2" && e.address == "198.18.2.2")
}

/// Under UDP flows in flowlet mode, spine 2's end of its link goes down:
/// `watch` shows s2 leaving its group with the reason, and the flows that
/// were on it moving off at their next packet for `failover`, each with its
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
    let all = watch(&daemon, &[]);
    let other_group = watch(&daemon, &["--group", "elsewhere"]);

    bed.ip("s2", &["link", "set", "leaf", "down"])
        .expect("down");
    // A flow still sending fails over at its next packet, milliseconds
    // after the one before (64 flows, a few hundred datagrams a second
    // each). A flow idle for seconds whose next hop went down fails over
    // too, when it sends again (a gap of 2.76 s seen once), so the flows
    // counted are those still sending.
    let sending = |e: &WatchEvent| e.cause == "failover" && e.gap_us.is_some_and(|g| g < 100_000);
    let seen = until(&all, "s2 leaving and 4 of its flows failing over", |seen| {
        seen.iter().any(|e| e.event == "next_hop_down")
            && seen.iter().filter(|e| sending(e)).count() >= 4
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
        assert!(event.gap_us.is_some(), "{event:#?}");
        assert_eq!(to.quality, Some(1024), "no telemetry: default quality");
    }

    eprintln!("{down}\n{}", moves[0]);
    let flow = moves[0].flow.as_ref().expect("a flow");
    let filter = format!(
        "udp src {}:{} dst {}:{}",
        flow.src, flow.src_port, flow.dst, flow.dst_port
    );
    let one_flow = watch(&daemon, &["--flow", &filter]);
    bed.ip("s2", &["link", "set", "leaf", "up"]).expect("up");
    until(&all, "s2 back", |seen| {
        seen.iter().any(|e| e.event == "next_hop_up")
    });
    // Back up, s2 takes back its own buckets: flowlets move onto it for
    // the choice, not a failover. With the daemon stopped the watches end
    // with everything it sent them: the filtered one may hold its flow's
    // moves and nothing of any other flow; the other group's, nothing.
    let report = load.stop(&bed.testbed).expect("traffic");
    daemon.stop().expect("the daemon stops");
    for event in one_flow.stop() {
        assert_eq!(event.flow.as_ref(), Some(flow), "{event:#?}");
    }
    assert_eq!(other_group.stop(), []);
    eprintln!("{report:?}");
}
