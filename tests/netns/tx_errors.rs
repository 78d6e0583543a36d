//! Frames the leaf's program redirected that the kernel failed to send:
//! counted per egress interface, so that what was sent is what arrived
//! plus what was counted as lost.

use std::time::Duration;

use fabriclb::testbed::{LeafCounters, UdpLoad, read_metric};
use nix::sys::signal::Signal;

use crate::bed::{Bed, wait_for};

/// Spine 2's link at the leaf goes down under UDP flows while the daemon
/// is stopped and cannot notice: the program goes on choosing s2 and the
/// kernel refuses each redirect (`xdp_redirect_err`).
#[test]
fn redirects_to_a_leaf_port_down_are_counted_and_the_run_reconciles() {
    link_down_under_traffic("d", "leaf", "s2", "refused");
}

/// The same with spine 2's end of the link down: the leaf's port stays up
/// and takes the redirects, and the veth's transmit drops them for want of
/// a peer to hand them to (`xdp_devmap_xmit`).
#[test]
fn frames_a_leaf_port_cannot_hand_to_its_peer_are_counted_and_the_run_reconciles() {
    link_down_under_traffic("j", "s2", "leaf", "dropped");
}

/// Sets `device` of `role`'s namespace down once UDP flows cross every
/// spine, with the daemon stopped (SIGSTOP) for half a second around it,
/// which its link events would otherwise take s2 out within; then checks that the leaf counts s2's losses under `cause`, no
/// other interface's, and that every datagram sent arrived, was dropped by
/// a testbed link on the way or was counted by the leaf.
fn link_down_under_traffic(tag: &str, role: &str, device: &str, cause: &str) {
    let bed = Bed::up(tag, 1);
    let daemon = bed
        .daemon(&bed.config(""), &["--refresh-interval-ms", "60000"])
        .expect("fabriclb");
    let counters = || bed.counters(&daemon);
    let load = UdpLoad::start(&bed.testbed, 64).expect("traffic");
    wait_for("every spine carrying flows", || {
        let c = counters()?;
        Ok(c.spines.iter().all(|s| s.packets > 0).then_some(()))
    })
    .expect("traffic over every spine");
    daemon.signal(Signal::SIGSTOP).expect("stop the daemon");
    bed.ip(role, &["link", "set", device, "down"])
        .expect("down");
    // Not a measurement: how long the fault goes unnoticed (a quarter of
    // 32k datagrams/s goes to s2 meanwhile).
    std::thread::sleep(Duration::from_millis(500));
    daemon.signal(Signal::SIGCONT).expect("resume the daemon");
    let (down, _) = wait_for("s2 out and its transmit errors counted", || {
        let c = counters()?;
        Ok((!c.spines[1].usable && c.spines[1].tx_errors > 100).then_some(c))
    })
    .expect("s2's losses counted");
    eprintln!("after the daemon resumed: {down:?}");
    let report = load.stop(&bed.testbed).expect("traffic");
    let text = daemon.stop().expect("stop");
    let last = LeafCounters::from_metrics(&bed.testbed, &text).expect("metrics");
    eprintln!("{report:?}\nleaf {last:?}");

    let s2 = |cause: &str| {
        let labels = format!("interface=\"s2\",cause=\"{cause}\"");
        read_metric(&text, "fabriclb_egress_tx_errors_total", &labels).expect("s2's count")
    };
    assert_eq!(
        s2(cause),
        last.spines[1].tx_errors,
        "all of s2's under {cause}"
    );
    for (i, spine) in last.spines.iter().enumerate().filter(|(i, _)| *i != 1) {
        assert_eq!(spine.tx_errors, 0, "spine {} lost frames: {last:?}", i + 1);
    }
    assert_eq!(
        report.sent,
        report.received + report.drops.lost_on_the_way() + last.tx_errors,
        "sent = received + the links' drops on the way + the leaf's transmit errors: \
         {report:?}, leaf {last:?}"
    );
}
