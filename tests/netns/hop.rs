//! The leaf's hop as the benchmark measures it: the live-frames generator
//! through fabriclb, through the kernel's multipath route and into a leaf
//! that drops, every spine's port toward the leaf counting what reaches
//! it.

use fabriclb::config::Mode;
use fabriclb::testbed::{self, Hop, HopReport, HopRun};

use crate::bed::{Bed, fabriclb};

/// 64 QPs, each its own UDP source port: whole QPs on each spine, and so
/// many that no spine is left out by chance, whatever the kernel's
/// multipath hash key this boot (4 * (3/4)^64, about 4e-8).
const QPS: u32 = 64;
/// Frames per QP.
const PER_QP: u32 = 300;

fn hop(bed: &Bed, hop: Hop) -> HopReport {
    let run = HopRun {
        packets: QPS * PER_QP,
        hop,
        qps: QPS,
        payload: 256,
    };
    let report = testbed::run_hop(&bed.testbed, fabriclb(), bed.workdir(), &run).expect("hop run");
    eprintln!("{hop:?}: {report:?}");
    report
}

/// Every frame goes to a spine, each QP whole, every spine some.
fn assert_spread(report: &HopReport) {
    assert_eq!(report.spines.len(), 4);
    for packets in &report.spines {
        assert!(
            *packets > 0 && packets % u64::from(PER_QP) == 0,
            "{:?}",
            report.spines
        );
    }
}

/// Every frame the live-frames generator sent went through fabriclb on
/// the leaf and reached the spine the leaf counted it to.
#[test]
fn live_frames_cross_fabriclb_to_every_spine() {
    let bed = Bed::up("A", 2);
    let report = hop(&bed, Hop::Fabriclb(Mode::Ecmp));
    let leaf = report.leaf.as_ref().expect("fabriclb's counters");
    assert_eq!(report.sent, u64::from(QPS * PER_QP));
    assert_eq!(
        leaf.forwarded, report.sent,
        "the leaf forwarded every frame"
    );
    assert_eq!(report.dropped_at_leaf, 0);
    assert_eq!(report.arrived(), report.sent, "every frame reached a spine");
    let by_leaf: Vec<u64> = leaf.spines.iter().map(|s| s.packets).collect();
    assert_eq!(
        report.spines, by_leaf,
        "each spine got what the leaf sent it"
    );
    assert_spread(&report);
}

/// The kernel baseline's path: live frames go up the leaf's stack (GRO on
/// its veth) and its five-tuple multipath route forwards every one to the
/// spines; and the dropping leaf takes every frame itself.
#[test]
fn live_frames_cross_the_kernel_route_and_stop_at_a_dropping_leaf() {
    let bed = Bed::up("B", 2);
    let kernel = hop(&bed, Hop::Kernel);
    assert_eq!(kernel.sent, u64::from(QPS * PER_QP));
    assert!(kernel.leaf.is_none());
    assert_eq!(kernel.dropped_at_leaf, 0);
    assert_eq!(kernel.arrived(), kernel.sent, "every frame reached a spine");
    assert_spread(&kernel);
    let dropped = hop(&bed, Hop::Drop);
    assert_eq!(dropped.dropped_at_leaf, dropped.sent);
    assert_eq!(dropped.spines, [0; 4]);
}

/// The bench's other two modes: per-packet sprays every WRITE ONLY frame
/// over the spines in equal shares; flowlet keeps them all on flowlets.
/// Every frame forwarded and arrived in both.
#[test]
fn live_frames_cross_fabriclb_in_per_packet_and_flowlet_modes() {
    let bed = Bed::up("C", 2);
    let sprayed = hop(&bed, Hop::Fabriclb(Mode::PerPacket));
    let leaf = sprayed.leaf.as_ref().expect("fabriclb's counters");
    assert_eq!(leaf.mode, "per-packet");
    assert_eq!(
        (leaf.forwarded, leaf.sprayed, leaf.pinned),
        (sprayed.sent, sprayed.sent, 0)
    );
    assert_eq!(sprayed.arrived(), sprayed.sent);
    // The spray sequence deals the four spines in turn on each CPU.
    let share = sprayed.sent / 4;
    for packets in &sprayed.spines {
        assert!(
            packets.abs_diff(share) <= share / 50,
            "{:?}",
            sprayed.spines
        );
    }

    let flowlets = hop(&bed, Hop::Fabriclb(Mode::Flowlet));
    let leaf = flowlets.leaf.as_ref().expect("fabriclb's counters");
    assert_eq!(leaf.mode, "flowlet");
    assert_eq!(
        (leaf.forwarded, leaf.sprayed, leaf.pinned),
        (flowlets.sent, 0, flowlets.sent)
    );
    assert!(leaf.new_flowlets > 0);
    assert_eq!(flowlets.arrived(), flowlets.sent);
}
