//! `configs/fabriclb.service` run as systemd would run it (there is no
//! systemd here): its ExecStart's flags, under exactly its capability
//! bounding set, ambient set and no_new_privs; reloaded as its ExecReload
//! does; its metrics endpoint on 127.0.0.1 only.

use std::collections::BTreeSet;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
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
    assert_eq!(flags, ["--metrics-listen", "127.0.0.1:9464"]);
    let wrapper = bed.scratch("fabriclb-under-the-unit");
    let script = format!(
        // As systemd does at boot: bpffs at /sys/fs/bpf, where the daemon
        // pins (in `ip netns exec`'s own mount namespace, /sys is fresh).
        "#!/bin/sh\nmount -t bpf bpf /sys/fs/bpf || exit 1\nexec setpriv {} -- {fabriclb} \"$@\"\n",
        setpriv_options().join(" ")
    );
    std::fs::write(&wrapper, script).expect("wrapper");
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).expect("chmod");

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

    // ExecReload's SIGHUP: a mode change taken, then undone and drained.
    assert_eq!(service("ExecReload"), "/bin/kill -HUP $MAINPID");
    daemon
        .reconfigure(&bed.config("mode = \"flowlet\""))
        .expect("SIGHUP");
    let log = daemon.wait_for_log("config reloaded").expect("reloaded");
    assert!(log.contains("SIGHUP: reloading"), "{log}");
    assert!(log.contains("mode ecmp -> flowlet"), "{log}");
    daemon.reconfigure(&bed.config("")).expect("SIGHUP");
    let log = daemon
        .wait_for_log("drained: flows left their flowlets for ecmp")
        .expect("drained");
    assert!(log.contains("mode flowlet -> ecmp"), "{log}");
    daemon.stop().expect("stop");
}
