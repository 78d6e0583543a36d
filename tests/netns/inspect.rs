//! `fabriclb status` and `explain` on the leaf of a real fabric: the maps
//! the daemon pinned, read in the leaf's namespace while it runs and after
//! a kill -9, and held against the daemon's own last metrics.

use std::process::Command;

use fabriclb::testbed::bpffs::Bpffs;
use fabriclb::testbed::{UdpLoad, in_netns, receiver_addr};

use crate::bed::{Bed, wait_for};

/// `fabriclb ARGS` in the leaf's namespace, reading the pins under `bpffs`.
pub fn in_leaf(bed: &Bed, bpffs: &Bpffs, args: &[&str]) -> String {
    let mut command = Command::new("ip");
    command
        .args(["netns", "exec", &bed.testbed.ns("leaf")])
        .arg(env!("CARGO_BIN_EXE_fabriclb"));
    run(command, bpffs, args)
}

/// `fabriclb ARGS` in this test's own namespace, not the daemon's.
fn from_here(bpffs: &Bpffs, args: &[&str]) -> String {
    run(Command::new(env!("CARGO_BIN_EXE_fabriclb")), bpffs, args)
}

fn run(mut command: Command, bpffs: &Bpffs, args: &[&str]) -> String {
    let out = command
        .arg(args[0])
        .arg("--bpffs")
        .arg(bpffs.path())
        .args(["--instance", "leaf"])
        .args(&args[1..])
        .output()
        .expect("fabriclb");
    assert!(
        out.status.success(),
        "fabriclb {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn status_and_explain_read_the_daemons_pins_while_it_runs_and_after_kill_9() {
    let bed = Bed::up("9", 1);
    let config_text = bed.config("");
    let bpffs = Bpffs::mount("netns-inspect").expect("bpffs");
    let pins = bpffs.path().to_str().expect("path").to_owned();
    let daemon = bed
        .daemon(&config_text, &["--bpffs", &pins, "--instance", "leaf"])
        .expect("fabriclb");
    let load = UdpLoad::start(&bed.testbed, 32).expect("traffic");
    wait_for("every spine carrying flows", || {
        let c = bed.counters(&daemon)?;
        Ok(c.spines.iter().all(|s| s.packets > 0).then_some(()))
    })
    .expect("traffic over every spine");
    let report = load.stop(&bed.testbed).expect("traffic");
    eprintln!("{report:?}");
    // Traffic over: the snapshot written after this holds the final counts.
    let last = bed.fresh_counters(&daemon).expect("metrics");
    let file = ConfigFile::write(&bpffs, "netns-inspect", &config_text);
    let config = file.0.clone();

    let running = in_leaf(&bed, &bpffs, &["status", "--json", "--config", &config]);
    // From another namespace the maps' ifindexes are named as the daemon
    // names them: status reads its namespace's interfaces.
    let elsewhere = from_here(&bpffs, &["status", "--json", "--config", &config]);
    assert_eq!(
        without_multicast(&elsewhere),
        without_multicast(&running),
        "status from this namespace"
    );
    // A packet of the load's kind to the receiver, explained from either
    // namespace alike: --ingress and the ports named as the daemon's.
    let packet = format!("udp 198.18.101.1:40000 -> {}:9000", receiver_addr(1));
    let explain = ["explain", "--config", &config, "--ingress", "h1", &packet];
    assert_eq!(from_here(&bpffs, &explain), in_leaf(&bed, &bpffs, &explain));
    // Killed, the daemon leaves the pins and the counters in them.
    daemon.kill().expect("kill -9");
    let json = in_leaf(&bed, &bpffs, &["status", "--json", "--config", &config]);
    assert_eq!(
        without_multicast(&json),
        without_multicast(&running),
        "status changed when the daemon died"
    );
    let status: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(status["verdicts"][0]["reason"], "forwarded");
    assert_eq!(status["verdicts"][0]["packets"], last.forwarded, "{json}");
    let group = &status["groups"][0];
    assert_eq!(group["name"], "spines", "{json}");
    assert_eq!(group["mode"], "ecmp");
    for (j, spine) in last.spines.iter().enumerate() {
        let nh = &group["next_hops"][j];
        let name = format!("s{} 198.18.{}.2", j + 1, j + 1);
        assert_eq!(nh["name"], name.as_str(), "{json}");
        assert_eq!(nh["interface"], format!("s{}", j + 1), "{json}");
        assert_eq!(nh["usable"], true, "{name}");
        assert_eq!(nh["packets"], spine.packets, "{name}: packets");
        assert_eq!(nh["bytes"], spine.bytes, "{name}: bytes");
    }

    // The group's hash picks a spine; the spine's own MAC is what the
    // next hop rewrites to.
    let text = in_leaf(&bed, &bpffs, &explain);
    eprintln!("{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "verdict: forwarded (XDP_REDIRECT): routed, rewritten, sent to the next hop"
    );
    assert_eq!(lines[2], "route: 198.19.0.0/16 -> group spines (id 0)");
    let next_hop = lines
        .iter()
        .find(|l| l.starts_with("next hop: "))
        .expect("a next hop line");
    let j: usize = next_hop["next hop: next hop ".len()..][..1]
        .parse()
        .expect("next hop id");
    let spine = format!("s{}", j + 1);
    let mac = bed
        .ip(&spine, &["-br", "link", "show", "leaf"])
        .expect("the spine's port")
        .split_whitespace()
        .nth(2)
        .expect("MAC")
        .to_owned();
    assert!(
        next_hop.starts_with(&format!(
            "next hop: next hop {j} ({spine} 198.18.{}.2): out {spine} (ifindex ",
            j + 1
        )),
        "{next_hop}"
    );
    assert!(
        next_hop.ends_with(&format!(" -> {mac}, untagged, usable")),
        "{next_hop}"
    );
    // The same as data, `--json` before the packet.
    let json_args = [
        "explain",
        "--json",
        "--config",
        &config,
        "--ingress",
        "h1",
        &packet,
    ];
    let explained = in_leaf(&bed, &bpffs, &json_args);
    let explained: serde_json::Value = serde_json::from_str(&explained).expect("JSON");
    let frames = explained["frames"].as_array().expect("frames");
    assert_eq!(frames.len(), 1, "{explained}");
    let spine_address = format!("198.18.{}.2", j + 1);
    assert_eq!(
        frames[0],
        serde_json::json!({
            "bytes": frames[0]["bytes"],
            "verdict": "forwarded",
            "action": "XDP_REDIRECT",
            "packet": {
                "protocol": "udp", "src": "198.18.101.1", "dst": receiver_addr(1).to_string(),
                "src_port": 40000, "dst_port": 9000, "qp": null, "opcode": null, "psn": null,
                "ttl": 64, "vlan_tags": 0, "fragment": false
            },
            "route": {"prefix": "198.19.0.0/16", "local": false, "to": "group spines (id 0)"},
            "group": {"id": 0, "name": "spines", "mode": "ecmp"},
            "hash": {"value": frames[0]["hash"]["value"], "bucket": frames[0]["hash"]["bucket"],
                     "ecmp_next_hop": j},
            "pinned": null,
            "choice": null,
            "next_hop": {
                "id": j, "name": format!("{spine} {spine_address}"), "interface": spine,
                "ifindex": frames[0]["next_hop"]["ifindex"], "src_mac": frames[0]["next_hop"]["src_mac"],
                "dst_mac": mac, "vlan": 0, "usable": true, "port_missing": false
            },
            "lines": lines,
        })
    );
    // After the packet, an option would be read as part of it: refused.
    let late = Command::new(env!("CARGO_BIN_EXE_fabriclb"))
        .args(["explain", "--bpffs"])
        .arg(bpffs.path())
        .args(["--instance", "leaf", &packet, "--json"])
        .output()
        .expect("fabriclb explain");
    assert_eq!(late.status.code(), Some(1), "{late:?}");
    assert_eq!(
        String::from_utf8_lossy(&late.stderr),
        "fabriclb: --json after the packet: options go before it \
         (fabriclb explain [OPTIONS] PACKET)\n"
    );

    // The packet itself, sent: it leaves by the spine explain named, and
    // by no other.
    let packets = |json: &str| -> Vec<u64> {
        let status: serde_json::Value = serde_json::from_str(json).expect("JSON");
        let hops = status["groups"][0]["next_hops"]
            .as_array()
            .expect("next hops");
        hops.iter()
            .map(|nh| nh["packets"].as_u64().expect("packets"))
            .collect()
    };
    let before = packets(&json);
    in_netns(&bed.testbed.ns("h1"), || {
        let socket = std::net::UdpSocket::bind("198.18.101.1:40000")?;
        socket.send_to(b"explained", (receiver_addr(1), 9000))
    })
    .expect("netns")
    .expect("the explained packet sent");
    let (after, _) = wait_for("the packet counted at a next hop", || {
        let now = packets(&in_leaf(
            &bed,
            &bpffs,
            &["status", "--json", "--config", &config],
        ));
        Ok((now.iter().sum::<u64>() > before.iter().sum::<u64>()).then_some(now))
    })
    .expect("the packet forwarded");
    let grew: Vec<usize> = (0..after.len())
        .filter(|&i| after[i] != before[i])
        .collect();
    assert_eq!(
        grew,
        [j],
        "explain said next hop {j}: {before:?} -> {after:?}"
    );
    assert_eq!(after[j], before[j] + 1);
}

/// The config the daemon runs, in a file beside the bpffs for status's
/// and explain's `--config`; removed on drop, also when an assertion
/// failed.
struct ConfigFile(String);

impl ConfigFile {
    fn write(bpffs: &Bpffs, name: &str, text: &str) -> Self {
        let path =
            (bpffs.path()).with_file_name(format!("fabriclb-{name}-{}.toml", std::process::id()));
        std::fs::write(&path, text).expect("config");
        Self(path.to_str().expect("path").to_owned())
    }
}

impl Drop for ConfigFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `status --json` without the count of multicast frames: the hosts'
/// kernels send IPv6 router solicitations and MLD reports when they like,
/// daemon or not, and the program counts them as `not_unicast`.
fn without_multicast(json: &str) -> serde_json::Value {
    let mut status: serde_json::Value = serde_json::from_str(json).expect("JSON");
    if let Some(verdicts) = status["verdicts"].as_array_mut() {
        verdicts.retain(|v| v["reason"] != "not_unicast");
    }
    status
}

/// `status` gives each next hop's quality toward each destination its
/// group rates it for, by the config's name: a fabric leaf's routes all
/// have a destination, and only these qualities steer them. Here every
/// spine toward `far` (the receivers' /16), at the default while no
/// exporter answers; the next hop's own quality stays beside it.
#[test]
fn status_gives_each_next_hops_quality_toward_each_destination() {
    let bed = Bed::up("I", 1);
    let config_text = bed.config(
        "mode = \"flowlet\"\ntelemetry = \"remote\"\ndestinations = [{ name = \"far\", \
         prefixes = [\"198.19.0.0/16\"], telemetry_device = \"leaf\" }]\n",
    );
    let bpffs = Bpffs::mount("netns-inspect-destinations").expect("bpffs");
    let pins = bpffs.path().to_str().expect("path").to_owned();
    let _daemon = bed
        .daemon(&config_text, &["--bpffs", &pins, "--instance", "leaf"])
        .expect("fabriclb");
    let file = ConfigFile::write(&bpffs, "netns-inspect-destinations", &config_text);
    let config = file.0.clone();
    let json = in_leaf(&bed, &bpffs, &["status", "--json", "--config", &config]);
    let status: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    let hops = status["groups"][0]["next_hops"]
        .as_array()
        .expect("next hops");
    assert_eq!(hops.len(), 4, "{json}");
    for nh in hops {
        assert_eq!(nh["quality"], 1024, "{json}");
        assert_eq!(
            nh["destinations"],
            serde_json::json!([{"class": 1, "destination": "far", "quality": 1024}]),
            "{json}"
        );
    }
    let text = in_leaf(&bed, &bpffs, &["status", "--config", &config]);
    let toward = text
        .lines()
        .filter(|l| l.trim() == "quality toward far 1024")
        .count();
    assert_eq!(toward, 4, "{text}");
}
