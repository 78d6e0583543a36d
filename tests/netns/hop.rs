//! The leaf's hop as the benchmark measures it: the live-frames generator
//! through fabriclb, the TX ring through the kernel's multipath route,
//! every spine's port toward the leaf counting what reaches it.

use fabriclb::testbed::{self, Hop, HopReport, HopRun, HopSource};

use crate::bed::{Bed, fabriclb};

fn hop(bed: &Bed, source: HopSource, hop: Hop) -> HopReport {
    let run = HopRun {
        source,
        hop,
        qps: 16,
        payload: 256,
    };
    let report = testbed::run_hop(&bed.testbed, fabriclb(), bed.workdir(), &run).expect("hop run");
    eprintln!("{report:#?}\n{:.0} pps", report.pps());
    report
}

/// Every frame the live-frames generator sent went through fabriclb on
/// the leaf and reached a spine; the 16 QPs spread over all four.
#[test]
fn live_frames_cross_fabriclb_to_every_spine() {
    let bed = Bed::up("A", 2);
    let sent = 20_000;
    let report = hop(&bed, HopSource::Live { packets: sent }, Hop::Fabriclb);
    let leaf = report.leaf.as_ref().expect("fabriclb's counters");
    assert_eq!(report.sent, u64::from(sent));
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
    // A QP never splits: 16 QPs of 1250 frames each, whole QPs per spine.
    for packets in &report.spines {
        assert!(*packets > 0 && packets % 1250 == 0, "{:?}", report.spines);
    }
}

/// The kernel baseline's path: TX-ring frames through the leaf kernel's
/// five-tuple multipath route, all of them at the spines, spread over
/// them by the QPs' source ports; and the same generator into the
/// dropping leaf, which takes every frame.
#[test]
fn tx_ring_frames_cross_the_kernel_route_and_stop_at_a_dropping_leaf() {
    let bed = Bed::up("B", 2);
    let sent = 16 * 200;
    let kernel = hop(&bed, HopSource::TxRing { packets: sent }, Hop::Kernel);
    assert_eq!(kernel.sent, u64::from(sent));
    assert!(kernel.leaf.is_none());
    assert_eq!(kernel.arrived(), kernel.sent, "every frame reached a spine");
    assert_eq!(kernel.spines.len(), 4);
    for packets in &kernel.spines {
        assert!(*packets > 0 && packets % 200 == 0, "{:?}", kernel.spines);
    }
    let dropped = hop(&bed, HopSource::TxRing { packets: sent }, Hop::Drop);
    assert_eq!(dropped.dropped_at_leaf, u64::from(sent));
    assert_eq!(dropped.spines, [0; 4]);
}
