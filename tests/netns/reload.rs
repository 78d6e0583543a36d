//! Live reloads: by SIGHUP under traffic, by the file watcher, or not at
//! all with `--no-watch`; a refused config changes nothing.

use std::time::Duration;

use fabriclb::config;
use fabriclb::testbed::{Daemon, LeafCounters, read_metric};

use crate::bed::{Bed, assert_delivered, steady, wait_for};

/// Waits until the metrics show the group in `mode`; the snapshot that
/// does was taken after the reload wrote the maps.
fn wait_for_mode(bed: &Bed, daemon: &Daemon, mode: &str) -> anyhow::Result<LeafCounters> {
    let (counters, took) = wait_for(&format!("metrics showing mode {mode}"), || {
        let c = bed.counters(daemon)?;
        Ok((c.mode == mode).then_some(c))
    })?;
    eprintln!("metrics showed mode {mode} after {took:?} more");
    Ok(counters)
}

/// When the config in force was taken, as the metrics say.
fn taken_at(text: &str) -> anyhow::Result<f64> {
    let metric = "fabriclb_config_last_reload_success_timestamp_seconds ";
    let line = (text.lines().find_map(|l| l.strip_prefix(metric)))
        .ok_or_else(|| anyhow::anyhow!("no {metric}in the metrics"))?;
    Ok(line.parse()?)
}

/// Under steady load, the group goes ecmp -> (an invalid config, refused)
/// -> per-packet -> flowlet -> ecmp by editing the file and sending SIGHUP
/// (the watcher off, so only SIGHUP reloads). Each change is logged, shows
/// in the metrics (the refusal too) and takes effect in the data plane's
/// counters; no packet is lost but those the testbed's links drop.
#[test]
fn live_mode_changes_by_sighup_lose_nothing() {
    let bed = Bed::up("m", 2);
    let result = bed.collective_with(&steady(2), &["--no-watch"], |daemon| {
        let (start, _) = wait_for("traffic forwarded", || {
            let c = bed.counters(daemon)?;
            Ok((c.forwarded > 0).then_some(c))
        })?;
        anyhow::ensure!(
            start.mode == "ecmp" && start.sprayed == 0 && start.pinned == 0,
            "{start:?}"
        );

        let invalid = bed.config("mode = \"sprinkle\"");
        let error = config::parse(&invalid, daemon.config_file())
            .expect_err("sprinkle is no mode")
            .to_string();
        // Line 7, the group's mode, at the value.
        let at = format!("{}:7:8: ", daemon.config_file().display());
        anyhow::ensure!(error.starts_with(&at), "{error}");
        daemon.reconfigure(&invalid)?;
        let log = daemon.wait_for_log("new config refused")?;
        let refusal = format!("new config refused, the running one stays: {error}");
        anyhow::ensure!(
            log.contains(SIGHUP) && log.trim_end().ends_with(&refusal),
            "expected {refusal:?} after the SIGHUP line, got:\n{log}"
        );
        // The refusal is logged after the reload gave up: nothing changed.
        let refused = bed.counters(daemon)?;
        anyhow::ensure!(
            refused.mode == "ecmp" && refused.sprayed == 0 && refused.pinned == 0,
            "an invalid config changed something: {refused:?}"
        );
        // And said in the metrics, the config in force since the start.
        let started = wait_for("the refusal in the metrics", || {
            let text = daemon.metrics()?;
            let loaded = read_metric(&text, "fabriclb_config_last_reload_successful", "")?;
            Ok((loaded == 0).then(|| taken_at(&text)))
        })?
        .0?;

        let mut took = Vec::new();
        let mut from = "ecmp";
        for (mode, group) in [
            ("per-packet", "mode = \"per-packet\""),
            ("flowlet", "mode = \"flowlet\""),
            ("ecmp", ""),
        ] {
            let sent = daemon.reconfigure(&bed.config(group))?;
            let changes = daemon.wait_for_log("config reloaded")?;
            let change = format!("config change: group \"spines\": mode {from} -> {mode}");
            anyhow::ensure!(
                changes.contains(SIGHUP) && changes.contains(&change),
                "expected {change:?} after the SIGHUP line:\n{changes}"
            );
            from = mode;
            took.push((mode, sent.elapsed()));
            let a = wait_for_mode(&bed, daemon, mode)?;
            let text = daemon.metrics()?;
            anyhow::ensure!(
                read_metric(&text, "fabriclb_config_last_reload_successful", "")? == 1
                    && taken_at(&text)? > started,
                "the reload to {mode} is not in the metrics:\n{text}"
            );
            // Traffic goes on, and shows which path each packet took.
            let (b, _) = wait_for(&format!("{mode} forwarding"), || {
                let b = bed.counters(daemon)?;
                Ok(match mode {
                    "per-packet" => b.sprayed > a.sprayed,
                    "flowlet" => b.pinned > a.pinned,
                    _ => b.forwarded > a.forwarded + 1000,
                }
                .then_some(b))
            })?;
            let (sprayed, pinned) = (b.sprayed - a.sprayed, b.pinned - a.pinned);
            anyhow::ensure!(
                match mode {
                    "per-packet" => pinned == 0,
                    "flowlet" => sprayed == 0,
                    _ => sprayed == 0 && pinned == 0,
                },
                "in {mode} mode: {sprayed} sprayed, {pinned} pinned"
            );
        }
        Ok(took)
    });
    let (report, took) = result.expect("run with mode changes");
    eprintln!(
        "reloads logged after {took:?}; sent {}, received {}, forwarded {}, to the kernel {}; {}",
        report.sent_packets,
        report.received.packets,
        report.leaf.forwarded,
        report.leaf.passed_to_kernel,
        report.drops
    );
    assert_eq!(report.sent_packets, 2 * 6_000 * 8);
    assert_delivered(&report);
}

/// How the daemon announces a reload by SIGHUP, and one by its watcher.
const SIGHUP: &str = "SIGHUP: reloading";
const WATCHER: &str = "changed: reloading";

/// Waits for the next reload, which must be announced as `by` (and not the
/// other way) and change the group's mode `from` -> `to`, then for the
/// metrics showing `to`.
fn expect_reload(bed: &Bed, daemon: &Daemon, by: &str, from: &str, to: &str) {
    let log = daemon.wait_for_log("config reloaded").expect("reloaded");
    let other = if by == SIGHUP { WATCHER } else { SIGHUP };
    let change = format!("config change: group \"spines\": mode {from} -> {to}");
    assert!(
        log.contains(by) && !log.contains(other) && log.contains(&change),
        "expected a reload announced by {by:?} with {change:?}:\n{log}"
    );
    wait_for_mode(bed, daemon, to).expect(to);
}

/// With the watcher on (the default), rewriting the file reloads it, no
/// SIGHUP needed: renamed over, as editors save, and written in place.
#[test]
fn a_rewritten_config_reloads_without_sighup() {
    let bed = Bed::up("w", 1);
    let daemon = bed.daemon(&bed.config(""), &[]).expect("fabriclb");

    daemon
        .write_config(&bed.config("mode = \"flowlet\""))
        .expect("write");
    expect_reload(&bed, &daemon, WATCHER, "ecmp", "flowlet");

    daemon.skip_log().expect("log");
    std::fs::write(daemon.config_file(), bed.config("mode = \"per-packet\"")).expect("write");
    expect_reload(&bed, &daemon, WATCHER, "flowlet", "per-packet");
    daemon.stop().expect("stop");
}

/// With `--no-watch`, a rewritten file is left alone until SIGHUP.
#[test]
fn with_no_watch_only_sighup_reloads() {
    let bed = Bed::up("n", 1);
    let daemon = bed
        .daemon(&bed.config(""), &["--no-watch"])
        .expect("fabriclb");
    daemon
        .write_config(&bed.config("mode = \"flowlet\""))
        .expect("write");
    // Four times the watcher's interval: a watcher would have reloaded by
    // then, and the SIGHUP below would find nothing to change.
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        bed.counters(&daemon).expect("metrics").mode,
        "ecmp",
        "reloaded without SIGHUP"
    );
    daemon.hangup().expect("SIGHUP");
    expect_reload(&bed, &daemon, SIGHUP, "ecmp", "flowlet");
    daemon.stop().expect("stop");
}

/// A reload that changes nothing the telemetry pollers use (here the
/// flowlet gap) keeps them running, the same thread with its sockets and
/// counters; one that takes a group's source away stops its poller. (Each
/// reload started every poller anew, and the daemon's memory grew by
/// about 12 kB a reload.)
#[test]
fn a_reload_keeps_the_telemetry_pollers_it_does_not_change() {
    let bed = Bed::up("W", 1);
    let linux = "mode = \"flowlet\"\ntelemetry = \"linux\"";
    let daemon = bed.daemon(&bed.config(linux), &[]).expect("fabriclb");
    let pollers = || telemetry_threads(daemon.pid());
    // The pollers started before the daemon dropped its capabilities (just
    // before its ready line) end at their next poll.
    daemon.wait_for_log("ready").expect("ready");
    let (before, _) = wait_for("one poller", || {
        let threads = pollers();
        Ok((threads.len() == 1).then_some(threads))
    })
    .expect("one poller for the one group with a source");

    daemon
        .write_config(&bed.config(&format!("{linux}\nflowlet_gap_us = 30000")))
        .expect("write");
    let log = daemon.wait_for_log("config reloaded").expect("reloaded");
    let change = format!("flowlet_gap_us {} -> 30000", config::FLOWLET_GAP_DEFAULT_US);
    assert!(log.contains(&change), "{log}");
    assert_eq!(pollers(), before);

    daemon.skip_log().expect("log");
    daemon
        .write_config(&bed.config("mode = \"flowlet\"\nflowlet_gap_us = 30000"))
        .expect("write");
    daemon.wait_for_log("config reloaded").expect("reloaded");
    wait_for("the poller stopped", || {
        Ok(pollers().is_empty().then_some(()))
    })
    .expect("no poller without a source");
    daemon.stop().expect("stop");
}

/// The thread ids of process `pid`'s telemetry pollers.
fn telemetry_threads(pid: u32) -> Vec<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("tasks");
    tasks
        .flatten()
        .filter(|task| {
            std::fs::read_to_string(task.path().join("comm"))
                .is_ok_and(|name| name.starts_with("telemetry-"))
        })
        .filter_map(|task| task.file_name().to_str()?.parse().ok())
        .collect()
}
