//! The shared DLB next-hop MAC on a running leaf: `switch.dlb_mac` goes on
//! every ingress port's unicast addresses (where `bridge fdb` lists it)
//! and frames a host sends to it are forwarded like frames to the port's
//! own MAC; taken out of the config, it comes off the port and frames to
//! it go to the kernel as another host's; `stop --detach` takes it off
//! with the instance.

use std::net::UdpSocket;
use std::process::Command;

use fabriclb::testbed::bpffs::Bpffs;
use fabriclb::testbed::{Daemon, in_netns, read_metric, receiver_addr};

use crate::bed::{Bed, wait_for};
use crate::inspect::in_leaf;

const DLB: &str = "00:cc:cc:cc:cc:cc";
/// The leaf's address on the h1 link: h1's gateway.
const GATEWAY: &str = "198.18.101.254";
const PACKETS: u64 = 200;

/// `bridge fdb show dev h1` in the leaf.
fn fdb(bed: &Bed) -> String {
    let out = Command::new("bridge")
        .args(["-n", &bed.testbed.ns("leaf"), "fdb", "show", "dev", "h1"])
        .output()
        .expect("bridge fdb");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The leaf's packet count for verdict `reason`.
fn verdicts(daemon: &Daemon, reason: &str) -> u64 {
    let text = daemon.metrics().expect("metrics");
    read_metric(
        &text,
        "fabriclb_packets_total",
        &format!("reason=\"{reason}\""),
    )
    .expect("metric")
}

/// Sends [`PACKETS`] datagrams from h1 to receiver 1 (through the leaf,
/// to whatever MAC h1 has for its gateway) and waits until the leaf
/// counted them under `reason`.
fn send_counted(bed: &Bed, daemon: &Daemon, reason: &str) {
    let before = verdicts(daemon, reason);
    let socket = in_netns(&bed.testbed.ns("h1"), || UdpSocket::bind("0.0.0.0:0"))
        .expect("netns")
        .expect("socket");
    for _ in 0..PACKETS {
        socket
            .send_to(b"to the dlb mac", (receiver_addr(1), 9))
            .expect("send");
    }
    wait_for(&format!("{PACKETS} more {reason}"), || {
        Ok((verdicts(daemon, reason) >= before + PACKETS).then_some(()))
    })
    .expect("counted");
}

#[test]
fn the_dlb_mac_is_accepted_on_the_ports_and_taken_off_again() {
    let bed = Bed::up("U", 1);
    let bpffs = Bpffs::mount("netns-dlb").expect("bpffs");
    let pins = bpffs.path().to_str().expect("path").to_owned();
    let args = ["--bpffs", &pins, "--instance", "leaf"];
    let plain = bed.config("");
    let with_dlb = plain.replacen("[switch]\n", &format!("[switch]\ndlb_mac = \"{DLB}\"\n"), 1);
    let daemon = bed.daemon(&with_dlb, &args).expect("daemon");
    daemon
        .wait_for_log("DLB MAC accepted on the port")
        .expect("added");
    assert!(
        fdb(&bed).contains(&format!("{DLB} self permanent")),
        "{}",
        fdb(&bed)
    );
    let status = in_leaf(&bed, &bpffs, &["status"]);
    let port = status
        .lines()
        .find(|l| l.starts_with("ingress ports: h1 (ifindex "))
        .unwrap_or_else(|| panic!("no ingress ports line:\n{status}"));
    assert!(port.ends_with(&format!(", dlb {DLB}")), "{port}");
    // h1 sends to the leaf by its DLB MAC, as to a DLB switch.
    bed.ip(
        "h1",
        &[
            "neigh",
            "replace",
            GATEWAY,
            "lladdr",
            DLB,
            "dev",
            "eth0",
            "nud",
            "permanent",
        ],
    )
    .expect("gateway's MAC");
    send_counted(&bed, &daemon, "forwarded");

    daemon.reconfigure(&plain).expect("reload");
    let changes = daemon.wait_for_log("config reloaded").expect("reloaded");
    assert!(
        changes.contains(&format!("config change: switch.dlb_mac {DLB} -> none")),
        "{changes}"
    );
    assert!(
        changes.contains("DLB MAC no longer accepted on the port"),
        "{changes}"
    );
    assert!(!fdb(&bed).contains(DLB), "{}", fdb(&bed));
    send_counted(&bed, &daemon, "other_host");

    daemon.reconfigure(&with_dlb).expect("reload");
    daemon
        .wait_for_log("DLB MAC accepted on the port")
        .expect("added again");
    send_counted(&bed, &daemon, "forwarded");
    daemon.stop().expect("SIGTERM");
    assert!(
        fdb(&bed).contains(DLB),
        "a stopped daemon leaves the program and its DLB MAC: {}",
        fdb(&bed)
    );

    let stdout = in_leaf(&bed, &bpffs, &["stop", "--detach"]);
    assert!(
        stdout.contains(&format!("DLB MAC {DLB} taken off ifindex")),
        "{stdout}"
    );
    assert!(!fdb(&bed).contains(DLB), "{}", fdb(&bed));
}
