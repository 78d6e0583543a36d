//! `configs/fabriclb.service` run as systemd would run it (there is no
//! systemd here): its ExecStart's flags, under exactly its capability
//! bounding set, ambient set and no_new_privs, telling a socket of the
//! test's own what it tells systemd's; reloaded as its ExecReload does;
//! its metrics endpoint on 127.0.0.1 only; its logs sent to a journal
//! socket of the test's own as they would be to journald.

use std::collections::BTreeSet;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::Command;

use fabriclb::testbed::{PATIENCE, in_netns};

use crate::bed::Bed;

const UNIT: &str = include_str!("../../configs/fabriclb.service");
const INSTALLED: &str = "/usr/local/bin/fabriclb";

/// `key`'s value in the unit's `[Service]` section.
fn service(key: &str) -> &'static str {
    let mut in_service = false;
    for line in UNIT.lines().map(str::trim) {
        if line.starts_with('[') {
            in_service = line == "[Service]";
        } else if let Some((k, v)) = line.split_once('=').filter(|_| in_service) {
            if k == key {
                return v;
            }
        }
    }
    panic!("no {key}= in [Service]")
}

/// `setpriv`'s options for the unit's capability settings. Root gets its
/// permitted and effective sets from the bounding set at exec, as under
/// systemd.
fn setpriv_options() -> Vec<String> {
    let caps = |names: &str| -> Vec<String> {
        names
            .split_whitespace()
            .map(|c| c.strip_prefix("CAP_").expect("a CAP_ name").to_lowercase())
            .collect()
    };
    let bounding = caps(service("CapabilityBoundingSet"));
    assert_eq!(
        service("AmbientCapabilities"),
        "",
        "root needs no ambient set"
    );
    assert_eq!(service("NoNewPrivileges"), "yes");
    let plus: Vec<String> = bounding.iter().map(|c| format!("+{c}")).collect();
    vec![
        format!("--bounding-set=-all,{}", plus.join(",")),
        "--inh-caps=-all".into(),
        "--no-new-privs".into(),
    ]
}

/// The capabilities a process under [`setpriv_options`] holds, as
/// `/proc/self/status` writes them.
fn capabilities_under_the_unit() -> Vec<String> {
    let out = Command::new("setpriv")
        .args(setpriv_options())
        .args([
            "--",
            "grep",
            "-E",
            "^(CapEff|CapBnd|NoNewPrivs)",
            "/proc/self/status",
        ])
        .output()
        .expect("setpriv");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// One HTTP/1.1 request to `addr` from inside `ns`: status line and body.
fn get(ns: &str, addr: SocketAddr, path: &str) -> std::io::Result<(String, String)> {
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    in_netns(ns, move || {
        let mut stream = TcpStream::connect_timeout(&addr, PATIENCE)?;
        stream.set_read_timeout(Some(PATIENCE))?;
        stream.write_all(request.as_bytes())?;
        let mut response = String::new();
        stream.read_to_string(&mut response)?;
        let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
        let status = head.lines().next().unwrap_or_default().to_owned();
        Ok((status, body.to_owned()))
    })
    .expect("thread in the leaf's namespace")
}

/// A exposition's families and series (comments, and samples without
/// their values): what two snapshots of an idle data plane share.
fn series(text: &str) -> BTreeSet<&str> {
    text.lines()
        .map(|line| match line.starts_with('#') {
            true => line,
            false => line.rsplit_once(' ').map_or(line, |(series, _)| series),
        })
        .collect()
}

#[test]
fn the_service_unit_starts_with_its_capabilities_serves_metrics_on_localhost_and_reloads() {
    let bed = Bed::up("1", 2);
    let fabriclb = env!("CARGO_BIN_EXE_fabriclb");

    // systemd's own reading of the unit, with the binary where it expects one.
    let copy = bed.scratch("fabriclb.service");
    std::fs::write(&copy, UNIT.replace(INSTALLED, fabriclb)).expect("unit copy");
    let verify = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&copy)
        .output()
        .expect("systemd-analyze");
    let complaints = String::from_utf8_lossy(&verify.stderr);
    assert!(
        verify.status.success() && complaints.is_empty(),
        "{complaints}"
    );

    // Only what start-up uses, in every set a root process gets it in.
    let cap_bpf_net_admin_perfmon_raw_setpcap = "000000c000003100";
    assert_eq!(
        capabilities_under_the_unit(),
        [
            format!("CapEff:\t{cap_bpf_net_admin_perfmon_raw_setpcap}"),
            format!("CapBnd:\t{cap_bpf_net_admin_perfmon_raw_setpcap}"),
            "NoNewPrivs:\t1".into(),
        ]
    );

    // ExecStart's flags after its config, which the test writes elsewhere.
    let exec: Vec<&str> = service("ExecStart").split_whitespace().collect();
    let (command, flags) = exec.split_at(4);
    assert_eq!(
        command,
        [INSTALLED, "run", "--config", "/etc/fabriclb/fabriclb.toml"]
    );
    assert_eq!(flags, ["--no-watch", "--metrics-listen", "127.0.0.1:9464"]);
    assert_eq!(service("Type"), "notify");
    let notify = NotifySocket::bind(&bed.scratch("notify.sock"));
    let wrapper = unit_wrapper(
        &bed,
        &format!("export NOTIFY_SOCKET={}", notify.path.display()),
    );
    let daemon = bed
        .daemon_through(&wrapper, &bed.config(""), flags)
        .expect("fabriclb run under the unit's capabilities");
    let log = daemon.log().expect("log");
    for said in [
        "metrics served over HTTP at /metrics addr=127.0.0.1:9464",
        "capabilities dropped to what reloads use kept=CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF",
        "ready",
    ] {
        assert!(log.contains(said), "{said}: {log}");
    }
    // What runs, in the line that says it is up.
    let ready = format!("ready version=\"{}\"", fabriclb::VERSION);
    assert!(log.contains(&ready), "{ready}: {log}");
    assert!(
        fabriclb::VERSION.contains(" (commit "),
        "{}",
        fabriclb::VERSION
    );
    assert!(!log.contains("WARN"), "{log}");
    assert_eq!(
        bed.xdp_links("leaf").expect("ip link"),
        [
            ("h1".to_owned(), "xdp".to_owned()),
            ("h2".to_owned(), "xdp".to_owned())
        ]
    );

    // The endpoint: the textfile's families and series, on 127.0.0.1.
    let leaf = bed.testbed.ns("leaf");
    let local: SocketAddr = "127.0.0.1:9464".parse().expect("address");
    let (status, body) = get(&leaf, local, "/metrics").expect("GET /metrics");
    assert_eq!(status, "HTTP/1.1 200 OK");
    let file = daemon.metrics().expect("metrics file");
    assert_eq!(series(&body), series(&file));
    assert!(
        body.contains("fabriclb_packets_total{reason=\"forwarded\"}"),
        "{body}"
    );
    let (status, _) = get(&leaf, local, "/").expect("GET /");
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    // Not on the leaf's other addresses.
    let addresses = bed.ip("leaf", &["-o", "addr", "show"]).expect("ip addr");
    let others: Vec<IpAddr> = addresses
        .lines()
        .filter_map(|line| {
            line.split_whitespace()
                .nth(3)?
                .split('/')
                .next()?
                .parse()
                .ok()
        })
        .filter(|ip: &IpAddr| {
            !ip.is_loopback() && !matches!(ip, IpAddr::V6(v6) if v6.segments()[0] == 0xfe80)
        })
        .collect();
    assert!(!others.is_empty(), "{addresses}");
    for ip in others {
        let refused = get(&leaf, SocketAddr::new(ip, 9464), "/metrics").map(|(status, _)| status);
        assert_eq!(
            refused.map_err(|e| e.kind()),
            Err(ErrorKind::ConnectionRefused),
            "{ip}"
        );
    }

    // READY once attached, with what is in force.
    let config = daemon.config_file().display().to_string();
    let in_force = format!("STATUS=forwarding: {config} in force, 1 groups, 1 routes (0 learned)");
    assert_eq!(notify.next(), ["READY=1".to_owned(), in_force.clone()]);

    // ExecReload: `fabriclb reload`, answered by the daemon over its
    // control socket. --no-watch: the file written goes live only then.
    assert_eq!(service("ExecReload"), format!("{INSTALLED} reload"));
    let reload = || {
        Command::new(fabriclb)
            .args(daemon.reload_args())
            .output()
            .expect("fabriclb reload")
    };
    daemon
        .write_config(&bed.config("mode = \"flowlet\""))
        .expect("config");
    let taken = reload();
    assert!(taken.status.success(), "{taken:?}");
    assert_eq!(
        String::from_utf8_lossy(&taken.stdout),
        format!("{config} reloaded: 1 changes\n")
    );
    let log = daemon.wait_for_log("config reloaded").expect("reloaded");
    assert!(log.contains("fabriclb reload: reloading"), "{log}");
    assert!(log.contains("mode ecmp -> flowlet"), "{log}");
    assert_reloaded(&notify, &in_force);

    // Refused: 78 and the daemon's reason, the running config kept.
    daemon
        .write_config(&bed.config("mode = \"sprinkle\""))
        .expect("config");
    let refused = reload();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(78), "{stderr}");
    let why = format!(
        "{config}:7:8: unsupported group mode \"sprinkle\" (supported modes: \"ecmp\", \
         \"flowlet\", \"per-packet\")"
    );
    assert_eq!(
        stderr.trim_end(),
        format!("fabriclb: the daemon refused the config and keeps the running one: {why}")
    );
    assert_reloaded(
        &notify,
        &format!("STATUS=reload refused, the running config stays: {why}"),
    );
    assert!(
        bed.ip("leaf", &["link", "show", "h1"])
            .expect("ip")
            .contains("xdp"),
        "still attached"
    );

    // A SIGHUP still reloads: the mode change undone, and drained.
    daemon.reconfigure(&bed.config("")).expect("SIGHUP");
    let log = daemon
        .wait_for_log("drained: flows left their flowlets for ecmp")
        .expect("drained");
    assert!(log.contains("SIGHUP: reloading"), "{log}");
    assert!(log.contains("mode flowlet -> ecmp"), "{log}");
    assert_reloaded(&notify, &in_force);
    let socket = Path::new(&daemon.reload_args()[4]).join("default.sock");
    assert!(socket.exists(), "{}", socket.display());
    daemon.stop().expect("stop");
    assert!(
        !socket.exists(),
        "the control socket is removed on the way out"
    );
}

/// What follows a reload on the notify socket: RELOADING with the
/// monotonic clock, then READY with `status`.
fn assert_reloaded(notify: &NotifySocket, status: &str) {
    let reloading = notify.next();
    assert_eq!(reloading[0], "RELOADING=1", "{reloading:?}");
    let usec: u64 = (reloading[1].strip_prefix("MONOTONIC_USEC="))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{reloading:?}"));
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).expect("clock");
    let now_usec = now.tv_sec() as u64 * 1_000_000 + now.tv_nsec() as u64 / 1000;
    assert!(
        usec <= now_usec && now_usec - usec < 60_000_000,
        "{usec} {now_usec}"
    );
    assert_eq!(notify.next(), ["READY=1".to_owned(), status.to_owned()]);
}

/// A socket of the test's own where the daemon sends what it would send
/// systemd's `NOTIFY_SOCKET`.
struct NotifySocket {
    path: PathBuf,
    socket: UnixDatagram,
}

impl NotifySocket {
    fn bind(path: &Path) -> Self {
        let socket = UnixDatagram::bind(path).expect("notify socket");
        socket.set_read_timeout(Some(PATIENCE)).expect("timeout");
        Self {
            path: path.to_owned(),
            socket,
        }
    }

    /// The next message's lines.
    fn next(&self) -> Vec<String> {
        let mut buf = [0; 4096];
        let n = self.socket.recv(&mut buf).expect("a notify message");
        String::from_utf8_lossy(&buf[..n])
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

/// A script that runs `fabriclb` with its arguments as the unit does,
/// after the shell lines `setup`. As systemd does at boot, bpffs at
/// /sys/fs/bpf, where the daemon pins (in `ip netns exec`'s own mount
/// namespace, /sys is fresh).
fn unit_wrapper(bed: &Bed, setup: &str) -> PathBuf {
    let wrapper = bed.scratch("fabriclb-under-the-unit");
    let script = format!(
        "#!/bin/sh\nset -e\nmount -t bpf bpf /sys/fs/bpf\n{setup}\n\
         exec setpriv {} -- {} \"$@\"\n",
        setpriv_options().join(" "),
        env!("CARGO_BIN_EXE_fabriclb")
    );
    std::fs::write(&wrapper, script).expect("wrapper");
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    wrapper
}

/// Under systemd, stderr is the journal's stream and `JOURNAL_STREAM`
/// names it: the daemon then sends its entries to journald's socket (a
/// socket of the test's own here, where `ip netns exec`'s mount namespace
/// has journald's path), each with the priority of its level and the
/// fields it logs (`F_NAME`), and writes nothing to stderr.
#[test]
fn under_systemd_the_log_goes_to_the_journal_with_priorities() {
    let bed = Bed::up("jr", 2);
    let journal_path = bed.scratch("journal.sock");
    let journal = UnixDatagram::bind(&journal_path).expect("journal socket");
    journal.set_read_timeout(Some(PATIENCE)).expect("timeout");
    let wrapper = unit_wrapper(
        &bed,
        &format!(
            "mount -t tmpfs tmpfs /run\nmkdir -p /run/systemd/journal\n\
             ln -s {} /run/systemd/journal/socket\n\
             export JOURNAL_STREAM=$(stat -L -c %d:%i /proc/self/fd/2)",
            journal_path.display()
        ),
    );
    let daemon = bed
        .daemon_through(&wrapper, &bed.config(""), &["--no-watch"])
        .expect("fabriclb run");
    daemon
        .write_config(&bed.config("mode = \"sprinkle\""))
        .expect("config");
    let refused = Command::new(env!("CARGO_BIN_EXE_fabriclb"))
        .args(daemon.reload_args())
        .output()
        .expect("fabriclb reload");
    assert_eq!(refused.status.code(), Some(78), "{refused:?}");

    let mut entries = Vec::new();
    let wanted = |entries: &[Vec<(String, String)>], priority: &str, message: &str| {
        entries.iter().any(|e| {
            field(e, "PRIORITY") == Some(priority)
                && field(e, "MESSAGE").is_some_and(|m| m.starts_with(message))
        })
    };
    while !wanted(&entries, "3", "new config refused, the running one stays: ") {
        let mut buf = vec![0; 64 * 1024];
        let n = journal.recv(&mut buf).expect("a journal entry");
        entries.push(journal_fields(&buf[..n]));
    }
    // tracing-journald's levels: ERROR 3 (err), WARN 4, INFO 5 (notice),
    // DEBUG 6, TRACE 7.
    assert!(wanted(&entries, "5", "ready"), "{entries:?}");
    let ready = (entries.iter())
        .find(|e| field(e, "MESSAGE") == Some("ready"))
        .expect("ready");
    assert_eq!(field(ready, "SYSLOG_IDENTIFIER"), Some("fabriclb"));
    assert_eq!(
        field(ready, "F_VERSION"),
        Some(fabriclb::VERSION),
        "{ready:?}"
    );
    assert_eq!(daemon.log().expect("stderr"), "", "nothing on stderr");
    daemon.stop().expect("stop");
}

/// The value of `key` in a journal entry.
fn field<'a>(entry: &'a [(String, String)], key: &str) -> Option<&'a str> {
    (entry.iter())
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// A datagram of journald's native protocol: `KEY=value` lines, or a key
/// line, a little-endian 64-bit length and that many bytes for a value
/// with a newline in it.
fn journal_fields(mut data: &[u8]) -> Vec<(String, String)> {
    let mut fields = Vec::new();
    while let Some(end) = data.iter().position(|&b| b == b'\n') {
        let line = String::from_utf8_lossy(&data[..end]).into_owned();
        data = &data[end + 1..];
        if let Some((key, value)) = line.split_once('=') {
            fields.push((key.to_owned(), value.to_owned()));
        } else {
            let len = u64::from_le_bytes(data[..8].try_into().expect("a length")) as usize;
            let value = String::from_utf8_lossy(&data[8..8 + len]).into_owned();
            fields.push((line, value));
            data = &data[8 + len + 1..];
        }
    }
    fields
}
