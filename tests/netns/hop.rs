//! The leaf's hop as the benchmark measures it: the live-frames generator
//! through fabriclb, through the kernel's multipath route and into a leaf
//! that drops, every spine's port toward the leaf counting what reaches
//! it.

use std::sync::mpsc;
use std::time::Duration;

use fabriclb::config::Mode;
use fabriclb::testbed::{self, Hop, HopReport, HopRun, in_netns};
use fabriclb::traffic::live;
use nix::sys::pthread::{pthread_kill, pthread_self};
use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};

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

/// What reached spine `j` (1-based) or was dropped on the way to it.
fn toward(report: &HopReport, j: usize) -> u64 {
    report.spines[j - 1] + report.lost_toward(j)
}

/// Every frame goes to a spine, each QP whole, every spine some; every
/// frame sent arrived or was dropped on a link, counted.
fn assert_spread(report: &HopReport) {
    assert_eq!(report.spines.len(), 4);
    for j in 1..=4 {
        let packets = toward(report, j);
        assert!(
            packets > 0 && packets.is_multiple_of(u64::from(PER_QP)),
            "spine {j}: {:?}, {}",
            report.spines,
            report.drops
        );
    }
    assert_accounted(report);
}

/// Every frame sent arrived at the end of the run or was dropped on one
/// of the testbed's links, as the links count it.
fn assert_accounted(report: &HopReport) {
    assert_eq!(
        report.arrived() + report.drops.lost(),
        report.sent,
        "{}",
        report.drops
    );
}

/// Every frame the live-frames generator sent went through fabriclb on
/// the leaf and reached the spine the leaf counted it to, but for what a
/// link dropped on the way, counted.
#[test]
fn live_frames_cross_fabriclb_to_every_spine() {
    let bed = Bed::up("A", 2);
    let report = hop(&bed, Hop::Fabriclb(Mode::Ecmp));
    let leaf = report.leaf.as_ref().expect("fabriclb's counters");
    assert_eq!(report.sent, u64::from(QPS * PER_QP));
    assert!(
        report.reached().contains(&leaf.forwarded),
        "the leaf forwarded every frame that reached it: {}, {}",
        leaf.forwarded,
        report.drops
    );
    assert_eq!(report.dropped_at_leaf, 0);
    let by_leaf: Vec<u64> = leaf.spines.iter().map(|s| s.packets).collect();
    let toward_spines: Vec<u64> = (1..=4).map(|j| toward(&report, j)).collect();
    assert_eq!(
        toward_spines, by_leaf,
        "each spine got what the leaf sent it, but for its link's drops: {}",
        report.drops
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
    assert_spread(&kernel);
    let dropped = hop(&bed, Hop::Drop);
    assert_eq!(dropped.spines, [0; 4]);
    assert_accounted(&dropped);
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
    assert!(sprayed.reached().contains(&leaf.forwarded), "{leaf:?}");
    assert_eq!((leaf.sprayed, leaf.pinned), (leaf.forwarded, 0));
    assert_accounted(&sprayed);
    // The spray sequence deals the four spines in turn on each CPU.
    let share = sprayed.sent / 4;
    for j in 1..=4 {
        assert!(
            toward(&sprayed, j).abs_diff(share) <= share / 50,
            "spine {j}: {:?}, {}",
            sprayed.spines,
            sprayed.drops
        );
    }

    let flowlets = hop(&bed, Hop::Fabriclb(Mode::Flowlet));
    let leaf = flowlets.leaf.as_ref().expect("fabriclb's counters");
    assert_eq!(leaf.mode, "flowlet");
    assert!(flowlets.reached().contains(&leaf.forwarded), "{leaf:?}");
    assert_eq!((leaf.sprayed, leaf.pinned), (0, leaf.forwarded));
    assert!(leaf.new_flowlets > 0);
    assert_accounted(&flowlets);
}

/// A signal pending for the sending thread ends the kernel's live-frames
/// run early (EINTR), after what it built went out; the generator sends
/// the rest in another run and its send comes back whole. Once in a CI
/// run the send failed that way (`Interrupted system call`).
#[test]
fn a_signal_mid_send_leaves_the_generators_send_whole() {
    let bed = Bed::up("sig", 2);
    let at_leaf = bed.testbed.ns("leaf");
    let counter = in_netns(&at_leaf, || live::DropCounter::attach("h1"))
        .expect("the leaf's namespace")
        .expect("a drop counter on the leaf's port from h1");
    extern "C" fn nothing(_: nix::libc::c_int) {}
    // SIGUSR1 would end the process; handled by nothing, it only
    // interrupts what the thread it is sent to waits in.
    let action = SigAction::new(
        SigHandler::Handler(nothing),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    // SAFETY: the handler does nothing, which is async-signal-safe.
    unsafe { sigaction(Signal::SIGUSR1, &action) }.expect("a SIGUSR1 handler");
    let packets = 400_000;
    let (sender_thread, thread) = mpsc::channel();
    // The sending thread stays until the signals are sent: a thread that
    // ended leaves its id to the next one started, another test's.
    let (signalled, signals_done) = mpsc::channel::<()>();
    let sending = std::thread::spawn({
        let h1 = bed.testbed.ns("h1");
        move || {
            in_netns(&h1, move || -> anyhow::Result<live::LiveReport> {
                let mut generator = testbed::h1_generator(4, 256)?;
                sender_thread.send(pthread_self())?;
                let report = generator.send(packets);
                signals_done.recv()?;
                report
            })
        }
    });
    let thread = thread.recv().expect("the sending thread");
    // A few signals over the run (400,000 frames take 100 ms and more),
    // fewer than the generator takes before it gives up.
    for pause_ms in [5, 10, 10, 10] {
        std::thread::sleep(Duration::from_millis(pause_ms));
        pthread_kill(thread, Signal::SIGUSR1).expect("a signal to the sender");
    }
    signalled.send(()).expect("the sending thread waits");
    let report = (sending.join().expect("the sending thread ended"))
        .expect("the namespace")
        .expect("the send");
    eprintln!("{report:?}");
    assert_eq!(report.packets, u64::from(packets));
    assert!(report.interrupted >= 1, "{report:?}");
    assert_eq!(
        counter.packets().expect("the leaf's count"),
        u64::from(packets)
    );
}
