//! The daemon's side of telemetry: readings from the spines' real
//! exporters become metrics (every series the shipped dashboard and rules
//! use among them), and a source that goes silent degrades its next hop
//! to the default quality after the stated staleness, logs that once, and
//! stops nothing.

use fabriclb::testbed::{Exporters, nexthop_labels, read_metric};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::bed::{Bed, wait_for};

const STALE_AFTER_MS: u64 = 200;

#[test]
fn a_silent_exporter_goes_stale_once_and_its_next_hop_back_to_the_default() {
    let bed = Bed::up("e", 1);
    let exporters = Exporters::start(&bed.testbed).expect("exporters");
    let (interface, ip) = (bed.testbed.spine_label(2).split_once(' '))
        .map(|(i, a)| (i.to_owned(), a.to_owned()))
        .expect("a spine's label");
    // An override too (for no traffic), so that every family is there.
    let config = bed.config("mode = \"flowlet\"\ntelemetry = \"remote\"")
        + &format!(
            "\n[telemetry]\nstale_after_ms = {STALE_AFTER_MS}\n\n[[override]]\n\
             name = \"unused\"\ndst = \"198.19.200.0/24\"\n\
             next_hop = {{ interface = \"{interface}\", ip = \"{ip}\" }}\n"
        );
    let daemon = bed.daemon(&config, &[]).expect("daemon");
    let label = |j: usize| nexthop_labels(&bed.testbed.spine_label(j));
    let metric = |name: &str, j: usize| -> anyhow::Result<u64> {
        read_metric(&daemon.metrics()?, name, &label(j))
    };

    // Every spine answers: fresh, an idle queue, the default quality.
    wait_for("every spine's telemetry fresh", || {
        let fresh = (1..=4).all(|j| metric("fabriclb_telemetry_stale", j).ok() == Some(0));
        Ok(fresh.then_some(()))
    })
    .expect("fresh telemetry");
    for j in 1..=4 {
        assert_eq!(
            metric("fabriclb_nexthop_queue_bytes", j).unwrap(),
            0,
            "s{j}"
        );
        assert_eq!(
            metric("fabriclb_nexthop_quality_band", j).unwrap(),
            0,
            "s{j}"
        );
        assert_eq!(metric("fabriclb_nexthop_quality", j).unwrap(), 1024, "s{j}");
        assert_eq!(
            metric("fabriclb_telemetry_errors_total", j).unwrap(),
            0,
            "s{j}"
        );
    }

    // Every series the shipped rules and dashboard name is exported.
    let text = daemon.metrics().expect("metrics");
    let exported = crate::observability::series_named(&text);
    let used = crate::observability::series_the_dashboards_use();
    let missing: Vec<&String> = used.difference(&exported).collect();
    assert!(missing.is_empty(), "not exported: {missing:?}\n{text}");

    // Spine 1's exporter dies: its next hop goes stale, the others not.
    daemon.skip_log().expect("log");
    let pid = exporters.pids()[0];
    kill(Pid::from_raw(pid as i32), Signal::SIGKILL).expect("kill the exporter");
    let log = daemon
        .wait_for_log("telemetry stale")
        .expect("the staleness is logged");
    assert!(log.contains("s1 198.18.1.2"), "{log}");
    wait_for("spine 1 stale in the metrics", || {
        Ok((metric("fabriclb_telemetry_stale", 1)? == 1).then_some(()))
    })
    .expect("stale metric");
    assert_eq!(metric("fabriclb_nexthop_quality", 1).unwrap(), 1024);
    for j in 2..=4 {
        assert_eq!(metric("fabriclb_telemetry_stale", j).unwrap(), 0, "s{j}");
    }
    // It keeps failing every 10 ms; the log says so once, not per poll.
    wait_for("more failed reads", || {
        Ok((metric("fabriclb_telemetry_errors_total", 1)? >= 20).then_some(()))
    })
    .expect("errors counted");
    let log = daemon.log().expect("log");
    let unreachable = log
        .lines()
        .filter(|l| l.contains("s1 198.18.1.2") && l.contains("unreachable"))
        .count();
    assert_eq!(unreachable, 1, "{log}");
    // The daemon still answers and forwards: a reload goes through.
    daemon
        .reconfigure(&config.replace("flowlet", "per-packet"))
        .expect("SIGHUP");
    daemon
        .wait_for_log("config reloaded")
        .expect("a reload under a dead source");
}
