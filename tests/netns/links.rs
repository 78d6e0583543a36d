//! The kernel's links as the daemon sees them: a spine link going down and
//! up under traffic.

use fabriclb::testbed::{LeafCounters, UdpLoad};

use crate::bed::Bed;
use crate::failover::{every_spine_carrying, s2, s2_back_in_use, s2_out_and_idle};

/// Spine 2's link at the leaf goes down with `ip link set s2 down` while
/// UDP flows cross the leaf: the daemon marks the next hop
/// unusable, nothing more goes to it, its flows go on over the other
/// spines, and the refreshes say once, not every time, that its neighbour
/// cannot be solicited; back up, its MAC is solicited again and it
/// carries traffic.
#[test]
fn a_spine_link_down_moves_its_flows_away_and_up_brings_them_back() {
    let bed = Bed::up("l", 1);
    let daemon = bed
        .daemon(&bed.config(""), &["--refresh-interval-ms", "100"])
        .expect("fabriclb");
    let load = UdpLoad::start(&bed.testbed, 64).expect("traffic");
    let before = every_spine_carrying(&bed, &daemon);
    daemon.skip_log().expect("log");
    bed.ip("leaf", &["link", "set", "s2", "down"])
        .expect("down");
    let log = daemon
        .wait_for_log("next hop changed next_hop=s2 198.18.2.2 usable=false")
        .expect("the daemon noticed");
    eprintln!("noticed:\n{log}");
    // Rendered from the tables after they were written to the maps.
    let down = s2_out_and_idle(&bed, &daemon);
    // Refreshes go on finding s2's neighbour unresolvable: that is said
    // once, not once per refresh (at least five of them here).
    for _ in 0..5 {
        bed.fresh_counters(&daemon).expect("a metrics snapshot");
    }
    let log = daemon.log().expect("log");
    let repeats = log
        .lines()
        .filter(|l| l.contains("cannot solicit") && l.contains("s2 198.18.2.2"))
        .count();
    assert_eq!(repeats, 1, "{log}");

    daemon.skip_log().expect("log");
    bed.ip("leaf", &["link", "set", "s2", "up"]).expect("up");
    daemon
        .wait_for_log("next hop changed next_hop=s2 198.18.2.2 usable=true")
        .expect("the daemon noticed s2 back");
    s2_back_in_use(&bed, &daemon);

    let report = load.stop(&bed.testbed).expect("traffic");
    let last =
        LeafCounters::from_metrics(&bed.testbed, &daemon.stop().expect("stop")).expect("metrics");
    eprintln!("{report:?}; s2 {:?}", s2(&last));
    // What XDP sent to s2 between the link going down and the daemon
    // noticing is lost: at most what s2 counted from the last snapshot
    // before the link went down to the first after the daemon noticed.
    let window = s2(&down).packets - s2(&before).packets;
    assert!(
        report.received <= report.sent
            && report.received + report.drops.lost() + window >= report.sent,
        "lost more than the down window ({window}) and the links' drops: {report:?}"
    );
}
