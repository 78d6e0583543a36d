//! What the running daemon holds: only the capabilities reloads use, and
//! its ports, against a second daemon.

use std::path::Path;
use std::process::Command;

use fabriclb::testbed::bpffs::Bpffs;

use crate::bed::{Bed, wait_for};

/// CAP_NET_ADMIN (12), CAP_NET_RAW (13) and CAP_BPF (39), as
/// `/proc/PID/status` writes a set.
const KEPT: &str = "0000008000003000";
const NONE: &str = "0000000000000000";

/// The pid of the `fabriclb` whose command line names `config`.
fn pid_running(config: &Path) -> u32 {
    let config = config.to_string_lossy();
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .find_map(|entry| {
            let pid = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let args: Vec<_> = cmdline.split(|&b| b == 0).collect();
            let is_daemon = args.first()?.ends_with(b"fabriclb")
                && args.iter().any(|a| *a == config.as_bytes());
            is_daemon.then_some(pid)
        })
        .expect("the daemon's process")
}

/// Each thread of process `pid`: its name and `/proc/.../status`.
fn task_statuses(pid: u32) -> anyhow::Result<Vec<(String, String)>> {
    let mut tasks = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let path = task?.path();
        // A thread that ended since the listing has no status to read.
        let (Ok(comm), Ok(status)) = (
            std::fs::read_to_string(path.join("comm")),
            std::fs::read_to_string(path.join("status")),
        ) else {
            continue;
        };
        tasks.push((comm.trim_end().to_owned(), status));
    }
    Ok(tasks)
}

/// `field`'s value in a `/proc/.../status` text.
fn status_field<'a>(status: &'a str, field: &str) -> &'a str {
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(":\t"))
        .unwrap_or_else(|| panic!("no {field} in {status}"))
}

/// After start-up every thread of the daemon (a telemetry poller's too)
/// holds CAP_BPF, CAP_NET_ADMIN and CAP_NET_RAW and nothing else, in every set, bounding included, with
/// no_new_privs; a reload still attaches the program to a new port. A
/// second daemon on the same ports is refused, naming the first one's
/// program and pid, and does not fall back to generic mode, which cannot
/// help.
#[test]
fn a_started_daemon_keeps_only_what_reloads_use_and_holds_its_ports() {
    let bed = Bed::up("z", 2);
    let config = |interfaces: &str| {
        bed.config("mode = \"flowlet\"\ntelemetry = \"linux\"")
            .replace("interfaces = [\"h1\", \"h2\"]", interfaces)
    };
    let daemon = bed
        .daemon(&config("interfaces = [\"h1\"]"), &["--no-watch"])
        .expect("fabriclb");
    let log = daemon.log().expect("log");
    assert!(
        log.contains(
            "capabilities dropped to what reloads use kept=CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF"
        ),
        "{log}"
    );
    let pid = pid_running(daemon.config_file());
    // Pollers started before the drop are replaced by ones started after.
    let (tasks, _) = wait_for("every thread to hold only the kept set", || {
        let tasks = task_statuses(pid)?;
        let dropped = tasks
            .iter()
            .all(|(_, status)| status_field(status, "CapEff") == KEPT);
        Ok(dropped.then_some(tasks))
    })
    .expect("capabilities dropped");
    assert!(
        tasks.iter().any(|(comm, _)| comm.starts_with("telemetry-")),
        "no poller thread"
    );
    for (comm, status) in &tasks {
        for (field, wanted) in [
            ("CapEff", KEPT),
            ("CapPrm", KEPT),
            ("CapBnd", KEPT),
            ("CapInh", NONE),
            ("CapAmb", NONE),
            ("NoNewPrivs", "1"),
        ] {
            assert_eq!(status_field(status, field), wanted, "{field} of {comm}");
        }
    }

    daemon
        .reconfigure(&config("interfaces = [\"h1\", \"h2\"]"))
        .expect("reconfigure");
    let log = daemon.wait_for_log("config reloaded").expect("reloaded");
    assert!(log.contains("switch.interfaces: \"h2\" added"), "{log}");
    assert!(!log.contains("not attached"), "{log}");
    assert_eq!(
        bed.xdp_links("leaf").expect("ip link"),
        [
            ("h1".to_owned(), "xdp".to_owned()),
            ("h2".to_owned(), "xdp".to_owned())
        ]
    );

    let h1 = bed
        .ip("leaf", &["-d", "link", "show", "h1"])
        .expect("ip link");
    let prog_id = h1
        .split_once("prog/xdp id ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .expect("the program's id");
    // An instance of its own: refused at the port, not at the first's lock.
    let bpffs = Bpffs::mount("privileges-second").expect("bpffs");
    let second = Command::new("ip")
        .args(["netns", "exec", &bed.testbed.ns("leaf")])
        .arg(env!("CARGO_BIN_EXE_fabriclb"))
        .args(["run", "--config"])
        .arg(daemon.config_file())
        .args(bpffs.args("second"))
        .arg("--run-dir")
        .arg(bed.scratch("second-run"))
        .output()
        .expect("a second fabriclb run");
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("falling back"), "{stderr}");
    let last = stderr.lines().last().expect("an error");
    let prefix = format!(
        "fabriclb: attaching to h1: another XDP program is attached there: program id \
         {prog_id} \"fabriclb\" in driver mode, held by pid {pid} (fabriclb) through bpf link "
    );
    assert!(
        last.starts_with(&prefix) && last.ends_with("; stop that process to remove it"),
        "{last}"
    );
    // Its start failed after pinning a new instance: the pins went with it.
    let pins = bpffs.path().join("fabriclb/second");
    assert!(!pins.exists(), "{} left behind: {stderr}", pins.display());
    daemon.stop().expect("stop");
}
