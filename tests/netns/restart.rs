//! Hitless restart and upgrade: a daemon killed with SIGKILL, or stopped
//! and started onto a new map layout, under traffic that only the program
//! forwards (the leaf's kernel route to the receivers removed); and
//! `fabriclb stop`, which leaves the program forwarding or, with
//! `--detach`, removes the instance for good. Each test pins into a bpffs
//! of its own.

use std::process::Command;
use std::time::Duration;

use fabriclb::dataplane::pins::PinDir;
use fabriclb::testbed::bpffs::Bpffs;
use fabriclb::testbed::scenario::restart::{self, Timing, pinned_map_id, program_on};
use lb_common::abi as names;

use crate::bed::{Bed, fabriclb, wait_for};

/// The short scenario: flowlet mode, so the flowlet table holds state the
/// restart must keep; SIGKILL, 1 s without a daemon, run again; stop, run
/// with another `flowlet_table_size`. Nothing is lost but what the
/// testbed's links drop, nothing reordered, and the counters of the last
/// daemon count every packet of the run: they were carried over both
/// restarts.
#[test]
fn a_killed_daemon_is_taken_over_and_upgraded_without_loss() {
    let scenario = restart::scenario(4);
    let bed = Bed::shaped("5", scenario.shape.clone());
    let timing = Timing {
        settle: Duration::from_millis(500),
        down: Duration::from_secs(1),
        between: Duration::from_millis(500),
    };
    let group = "mode = \"flowlet\"\nflowlet_gap_us = 25000";
    let report = bed.restart(&scenario, group, timing).expect("restart run");
    eprintln!("{report:#?}");
    assert_eq!(report.mode, "flowlet");
    assert_eq!(report.sent, 2 * 4 * 4_000);
    assert_eq!(
        report.received,
        report.sent - report.link_lost,
        "lost beyond the testbed's links: {report:?}"
    );
    assert_eq!(
        report.forwarded,
        report.sent - report.lost_before_leaf,
        "the counters did not count the whole run: {report:?}"
    );
    assert!(
        report.reordered_in_message <= report.link_lost,
        "{report:?}"
    );
    assert!(report.out_of_order <= report.link_lost, "{report:?}");

    let [killed, upgrade] = &report.steps[..] else {
        panic!("two restarts: {report:?}");
    };
    assert_eq!(killed.what, "kill -9, then run again");
    assert_ne!(killed.program_before, killed.program_after);
    assert!(
        killed.flowlets_kept && killed.counters_kept && killed.buckets_kept,
        "{killed:?}"
    );
    assert_eq!(upgrade.what, "stop, then run a new map layout");
    assert_ne!(upgrade.program_before, upgrade.program_after);
    assert!(
        !upgrade.flowlets_kept && upgrade.counters_kept && upgrade.buckets_kept,
        "{upgrade:?}"
    );
}

fn stop(bpffs: &Bpffs, instance: &str, detach: bool) -> (Option<i32>, String, String) {
    let mut command = Command::new(fabriclb());
    command.arg("stop").args(bpffs.args(instance));
    if detach {
        command.arg("--detach");
    }
    let out = command.output().expect("fabriclb stop");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A second daemon on a running instance is refused, naming the first;
/// SIGTERM leaves the program on the interface and its pins in place;
/// `stop` stops a running daemon and leaves the program (and says when
/// none was running); a daemon whose
/// config dropped the interface takes the program off it; `stop
/// --detach` removes every pin, and the program goes from the interface.
#[test]
fn stop_leaves_the_program_and_stop_detach_removes_the_instance() {
    let bed = Bed::up("6", 1);
    let bpffs = Bpffs::at(&bed.workdir().join("bpffs")).expect("bpffs");
    let pins = PinDir::new(bpffs.path(), "t6");
    let args = bpffs.args("t6");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let config = bed.config("");
    let daemon = bed.daemon(&config, &args).expect("daemon");
    assert!(pins.link("h1").exists() && pins.map(names::ROUTES_V4).exists());

    let second = Command::new("ip")
        .args(["netns", "exec", &bed.testbed.ns("leaf")])
        .arg(fabriclb())
        .args(["run", "--config"])
        .arg(daemon.config_file())
        .args(&args)
        .output()
        .expect("a second fabriclb run");
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(1), "{stderr}");
    let holder = fabriclb::dataplane::holder(pins.dir()).expect("the daemon holds the lock");
    assert_eq!(
        stderr.lines().last(),
        Some(
            format!(
                "fabriclb: another fabriclb (pid {holder}) runs instance {}",
                pins.dir().display()
            )
            .as_str()
        )
    );

    daemon.stop().expect("SIGTERM");
    let program = program_on(&bed.testbed, "h1").expect("still attached after SIGTERM");
    let routes = pinned_map_id(&pins, names::ROUTES_V4).expect("maps still pinned");

    // Taken over, in the mode the link was made in, then stopped by
    // `fabriclb stop`.
    let generic = config.replacen("[switch]\n", "[switch]\nxdp_mode = \"generic\"\n", 1);
    let daemon = bed.daemon(&generic, &args).expect("daemon again");
    let took = daemon
        .wait_for_log("took over the pinned link")
        .expect("took over");
    assert!(took.contains("interface=\"h1\" mode=\"driver\""), "{took}");
    let warned = daemon
        .wait_for_log("xdp_mode generic applies once the program is attached anew")
        .expect("told about the mode");
    assert!(
        warned.ends_with("fabriclb stop --detach, then run interface=\"h1\" mode=\"driver\"\n"),
        "{warned}"
    );
    assert_eq!(
        bed.xdp_links("leaf").ok(),
        Some(vec![("h1".into(), "xdp".into())])
    );
    assert_eq!(pinned_map_id(&pins, names::ROUTES_V4).ok(), Some(routes));
    assert_ne!(program_on(&bed.testbed, "h1").ok(), Some(program));
    let pid = fabriclb::dataplane::holder(pins.dir()).expect("the daemon holds the lock");
    let (code, stdout, stderr) = stop(&bpffs, "t6", false);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        stdout,
        format!(
            "stopped fabriclb (pid {pid})\nthe program keeps forwarding from {}\n",
            pins.dir().display()
        )
    );
    program_on(&bed.testbed, "h1").expect("still attached after stop");
    // Again, with no daemon left: it says so and stops nothing.
    let (code, stdout, stderr) = stop(&bpffs, "t6", false);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        stdout,
        format!(
            "no fabriclb daemon was running for {dir}\nthe program keeps forwarding from {dir}\n",
            dir = pins.dir().display()
        )
    );
    // Nor is there one to reload: said, and a failure (1), not a refusal.
    let run_dir = bed.workdir().join("no-daemon");
    let reload = Command::new(fabriclb())
        .args(["reload", "--instance", "t6", "--run-dir"])
        .arg(&run_dir)
        .output()
        .expect("fabriclb reload");
    assert_eq!(reload.status.code(), Some(1), "{reload:?}");
    assert_eq!(
        String::from_utf8_lossy(&reload.stderr),
        format!(
            "fabriclb: no fabriclb daemon answers at {}/t6.sock (is `fabriclb run --instance t6` \
             running, with this --run-dir?)\n",
            run_dir.display()
        )
    );

    // A daemon whose config no longer has h1 takes the program off it.
    let moved = config.replace("interfaces = [\"h1\"]", "interfaces = [\"nosuch0\"]");
    assert_ne!(moved, config);
    let daemon = bed.daemon(&moved, &args).expect("daemon without h1");
    let line = daemon
        .wait_for_log("detached: no longer an ingress interface")
        .expect("h1 detached");
    assert!(line.ends_with("interface=\"h1\"\n"), "{line}");
    assert!(!pins.link("h1").exists());
    wait_for("XDP off h1", || {
        Ok(bed.xdp_links("leaf")?.is_empty().then_some(()))
    })
    .expect("detached");
    daemon.stop().expect("SIGTERM");
    let _daemon = bed.daemon(&config, &args).expect("daemon on h1 again");
    program_on(&bed.testbed, "h1").expect("attached again");

    let pinned = std::fs::read_dir(pins.dir()).expect("pins").count();
    let pid = fabriclb::dataplane::holder(pins.dir()).expect("the daemon holds the lock");
    let (code, stdout, stderr) = stop(&bpffs, "t6", true);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        stdout,
        format!(
            "stopped fabriclb (pid {pid})\nremoved {} ({pinned} pins): the program is detached\n",
            pins.dir().display()
        )
    );
    assert!(!pins.dir().exists());
    // The kernel frees the link once its last reference goes, a moment
    // after the pin.
    wait_for("XDP off the leaf", || {
        Ok(bed.xdp_links("leaf")?.is_empty().then_some(()))
    })
    .expect("detached");
    let (code, _, stderr) = stop(&bpffs, "t6", true);
    assert_eq!(code, Some(1));
    assert_eq!(
        stderr,
        format!("fabriclb: no instance pinned at {}\n", pins.dir().display())
    );
}

/// Without CAP_SYS_ADMIN a `--bpffs` that is not a bpffs cannot be
/// mounted: `run` refuses in one line saying what to do, before touching
/// any interface.
#[test]
fn a_root_that_is_no_bpffs_and_cannot_be_mounted_is_refused() {
    let dir = std::env::temp_dir().join(format!("fl{}-nobpffs", std::process::id()));
    let config = crate::startup::config_without_interfaces(&dir);
    let out = Command::new("capsh")
        .args(["--drop=cap_sys_admin", "--", "-c"])
        .arg(format!(
            "exec {} run --config {} --bpffs {}",
            fabriclb().display(),
            config.display(),
            dir.display()
        ))
        .output()
        .expect("capsh");
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let dir = dir.display();
    assert_eq!(
        stderr.lines().last(),
        Some(
            format!(
                "fabriclb: {dir} is not a bpffs and mounting one there failed (EPERM: \
                 Operation not permitted); mount one (mount -t bpf bpf {dir}) or pass --bpffs DIR"
            )
            .as_str()
        )
    );
}
