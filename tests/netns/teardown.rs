//! The testbed itself: what it builds, and that nothing stays behind.

use fabriclb::testbed::{self, Shape, Testbed};

use crate::bed;

/// Building, dropping, keeping and removing a testbed leave no namespace
/// behind, also when the code using it panics; spine links get their TBF,
/// each at its own rate.
#[test]
fn testbed_teardown_leaves_nothing_behind() {
    let name = bed::name("t");
    let shape = Shape {
        hosts: 2,
        spines: 2,
        spine_rates_mbit: vec![100, 50],
        ..Shape::default()
    };
    let none = Vec::<String>::new();

    let bed = Testbed::up(&name, shape.clone()).expect("testbed");
    // leaf, far leaf, 2 senders, 2 receivers, 2 spines.
    assert_eq!(testbed::namespaces(&name).expect("list").len(), 8);
    for (spine, rate) in [("s1", "100Mbit"), ("s2", "50Mbit")] {
        let qdisc = std::process::Command::new("tc")
            .args(["-n", &bed.ns(spine), "qdisc", "show", "dev", "fleaf"])
            .output()
            .expect("tc");
        let qdisc = String::from_utf8_lossy(&qdisc.stdout);
        assert!(
            qdisc.contains("tbf") && qdisc.contains(rate),
            "{spine}: {qdisc}"
        );
    }
    drop(bed);
    assert_eq!(testbed::namespaces(&name).expect("list"), none);

    // Only the deliberate panic may be caught here: a failed build would
    // panic with another message.
    let panicked = std::panic::catch_unwind(|| {
        let _bed = Testbed::up(&name, shape.clone()).expect("testbed");
        std::panic::panic_any("on purpose");
    })
    .expect_err("the closure panics");
    assert_eq!(panicked.downcast_ref::<&str>(), Some(&"on purpose"));
    assert_eq!(testbed::namespaces(&name).expect("list"), none);

    Testbed::up(&name, shape).expect("testbed").keep();
    assert_eq!(testbed::namespaces(&name).expect("list").len(), 8);
    assert_eq!(testbed::remove_namespaces(&name).expect("down"), 8);
    assert_eq!(testbed::namespaces(&name).expect("list"), none);
}

/// A scenario stopped by Ctrl-C while its daemons run leaves nothing: no
/// namespace, no bpffs mount (each would keep its daemon's pinned program
/// and maps in the kernel), no scratch directory, no Redis server, no
/// exporter's log. The signal ends the process with `exit`, which runs no
/// drop, so all of it is removed by the signal's watcher.
#[test]
fn a_scenario_stopped_by_ctrl_c_leaves_no_mount_directory_or_server() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;

    let _turn = bed::Turn::alone();
    let name = bed::name("0");
    let mut demo = std::process::Command::new(bed::fabriclb())
        .args([
            "testbed",
            "demo",
            "--scenario",
            "fabric-slow-link",
            "--name",
            &name,
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("fabriclb testbed demo");
    let pid = demo.id();
    let workdir = std::env::temp_dir().join(format!("fabriclb-scenario-{pid}"));
    let redis_prefix = format!("fabriclb-cdb-{pid}-");
    // Entries of the temp directory whose names `matches` takes.
    let in_temp = |matches: &dyn Fn(&str) -> bool| {
        (std::fs::read_dir(std::env::temp_dir()).expect("temp dir"))
            .filter_map(Result::ok)
            .filter(|e| matches(&e.file_name().to_string_lossy()))
            .count()
    };
    // The spines' node_exporters log to files of their own.
    let exporter_log = format!("-node-exporter-{pid}-");
    let exporter_logs = || in_temp(&|f| f.starts_with(&name) && f.contains(&exporter_log));
    let mounts = || {
        let text = std::fs::read_to_string("/proc/self/mounts").expect("mounts");
        (text.lines())
            .filter(|l| l.contains(&workdir.display().to_string()))
            .count()
    };
    let redis_dirs = || in_temp(&|f| f.starts_with(&redis_prefix));
    // The spines' Redis servers, the scenario's children (a server names
    // itself by its address in its command line).
    let redis_servers = || -> Vec<i32> {
        (std::fs::read_dir("/proc").expect("/proc"))
            .filter_map(Result::ok)
            .filter_map(|e| std::fs::read_to_string(e.path().join("status")).ok())
            .filter(|status| {
                status.lines().any(|l| l == "Name:\tredis-server")
                    && status.lines().any(|l| l == format!("PPid:\t{pid}"))
            })
            .filter_map(|status| {
                let line = status.lines().find(|l| l.starts_with("Pid:"))?;
                line.split_whitespace().nth(1)?.parse().ok()
            })
            .collect()
    };
    // Every leaf's daemon running on its bpffs, the spines' Redis and
    // exporters up (started before the daemons).
    let (servers, _) = bed::wait_for("the scenario's daemons and Redis servers", || {
        let servers = redis_servers();
        let up = mounts() >= 4 && redis_dirs() == 4 && servers.len() == 4;
        Ok((up && exporter_logs() == 4).then_some(servers))
    })
    .expect("started");
    kill(Pid::from_raw(pid as i32), Signal::SIGINT).expect("SIGINT");
    let status = demo.wait().expect("wait");
    assert_eq!(status.code(), Some(130), "{status:?}");
    assert_eq!(
        testbed::namespaces(&name).expect("list"),
        Vec::<String>::new()
    );
    assert_eq!(mounts(), 0, "bpffs mounts left under {}", workdir.display());
    assert!(!workdir.exists(), "{} left", workdir.display());
    assert_eq!(redis_dirs(), 0, "Redis scratch directories left");
    assert_eq!(exporter_logs(), 0, "node_exporter logs left");
    bed::wait_for("the Redis servers gone", || {
        let alive = (servers.iter()).filter(|&&p| kill(Pid::from_raw(p), None).is_ok());
        Ok((alive.count() == 0).then_some(()))
    })
    .expect("no Redis server left");
}
