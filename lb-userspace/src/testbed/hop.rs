//! The leaf's forwarding hop on its own: the live-frames generator on h1
//! sends a collective's RoCEv2 flows into the leaf, which drops them in XDP
//! (the generator alone), forwards them with fabriclb, or forwards them
//! with the kernel's multipath route; every spine's port toward the leaf
//! counts and drops what reaches it (`fabriclb_gen_drop`), so nothing past
//! the hop is in the figure. A veth runs what it receives on the sending
//! CPU, so the hop's cost per packet is the difference of 1/rate against
//! the dropping leaf.

use std::net::Ipv4Addr;
use std::ops::RangeInclusive;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::netns::{in_netns, pin_to_cpu};
use super::udp::RECEIVE_GRACE;
use super::{Daemon, LeafCounters, LinkDrops, Testbed, receiver_addr};
use crate::config::Mode;
use crate::traffic::{self, Exchange, Pattern, live};

/// What the leaf does with them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hop {
    /// `fabriclb_gen_drop` on the leaf's port from h1.
    Drop,
    /// fabriclb with the testbed's spine group in this mode. The
    /// generator's WRITE ONLY frames keep to flowlets in flowlet mode and
    /// are sprayed in per-packet mode.
    Fabriclb(Mode),
    /// The leaf kernel's five-tuple multipath route over the spines.
    Kernel,
}

#[derive(Clone, Copy, Debug)]
pub struct HopRun {
    /// Frames the generator sends, in one test run.
    pub packets: u32,
    pub hop: Hop,
    /// h1's connection to r2 has this many QPs, each with a UDP source port
    /// of its own, so that the kernel's five-tuple hash spreads them too.
    pub qps: u32,
    /// RDMA payload per packet: every packet a WRITE ONLY of this size.
    pub payload: u32,
}

/// Frames h1's kernel may send in a run, beside the generator's: an ARP
/// or neighbour-discovery exchange or two. One dropped by h1's full port
/// made a bench run's hop look as if it forwarded a frame more than
/// reached it.
pub const KERNEL_FRAMES_MAX: u64 = 16;

#[derive(Clone, Debug)]
pub struct HopReport {
    pub sent: u64,
    pub frame_bytes: usize,
    /// The generator's test run, wall time.
    pub elapsed: Duration,
    /// Taken by the dropping leaf.
    pub dropped_at_leaf: u64,
    /// Taken at each spine's port toward the leaf, by spine.
    pub spines: Vec<u64>,
    /// fabriclb's counters, when it forwarded.
    pub leaf: Option<LeafCounters>,
    /// What the testbed's links dropped during the run: a veth whose
    /// peer's ring is full drops, a busy neighbour on the core enough.
    pub drops: LinkDrops,
}

impl HopReport {
    /// Packets per second the generator sent.
    pub fn pps(&self) -> f64 {
        self.sent as f64 / self.elapsed.as_secs_f64()
    }

    /// Packets that reached the end of the run: the dropping leaf or a
    /// spine.
    pub fn arrived(&self) -> u64 {
        self.dropped_at_leaf + self.spines.iter().sum::<u64>()
    }

    /// The generator's frames that reached the hop: all but what h1's port
    /// dropped, and of those drops up to [`KERNEL_FRAMES_MAX`] may have
    /// been h1's kernel's own (ARP, neighbour discovery), which its port
    /// drops as readily while the generator floods it. The hop forwards
    /// only the generator's frames, so a hop that lost none forwarded a
    /// count in this range.
    pub fn reached(&self) -> RangeInclusive<u64> {
        let least = self.sent - self.drops.lost_in("h1");
        least..=(least + KERNEL_FRAMES_MAX).min(self.sent)
    }

    /// What the links dropped toward spine `j` (1-based): on the leaf's
    /// port to it.
    pub fn lost_toward(&self, j: usize) -> u64 {
        self.drops.lost_in(&format!("leaf/s{j}"))
    }
}

/// The live-frames generator on h1's `eth0` (called in h1's namespace),
/// loaded with a ring's flows toward the first two receivers: `qps` QPs a
/// connection, each its own UDP source port, frames of `payload` bytes.
pub fn h1_generator(qps: u32, payload: u32) -> Result<live::LiveGenerator> {
    let exchange = Exchange {
        pattern: Pattern::Ring,
        qps_per_connection: qps,
        message_bytes: payload,
        mtu: payload,
        messages: 0,
        source_port_per_qp: true,
        small_messages: 0,
    };
    let workload = exchange.for_rank(vec![receiver_addr(1), receiver_addr(2)], 0);
    let sender = traffic::resolve_sender("eth0", Ipv4Addr::new(198, 18, 101, 254))?;
    let ifindex = nix::net::if_::if_nametoindex("eth0").context("eth0's ifindex")?;
    live::LiveGenerator::new(workload, sender, ifindex)
}

/// Runs `run` on `bed` (h1 sends; r2 is the destination). fabriclb runs
/// from `fabriclb`, its files in `workdir`.
pub fn run_hop(bed: &Testbed, fabriclb: &Path, workdir: &Path, run: &HopRun) -> Result<HopReport> {
    let spines = (1..=bed.shape().spines)
        .map(|j| {
            in_netns(&bed.ns(&format!("s{j}")), || {
                live::DropCounter::attach("leaf")
            })?
        })
        .collect::<Result<Vec<_>>>()?;
    let leaf_drop = match run.hop {
        Hop::Drop => Some(in_netns(&bed.ns("leaf"), || {
            live::DropCounter::attach("h1")
        })??),
        Hop::Fabriclb(_) | Hop::Kernel => None,
    };
    let daemon = match run.hop {
        Hop::Fabriclb(mode) => Some(Daemon::start(
            bed,
            fabriclb,
            workdir,
            &bed.leaf_config(&format!("mode = \"{mode}\"")),
            &[],
        )?),
        Hop::Drop | Hop::Kernel => None,
    };
    let (packets, qps, payload) = (run.packets, run.qps, run.payload);
    let drops_before = LinkDrops::read(bed)?;
    let (sent, frame_bytes, elapsed) = in_netns(&bed.ns("h1"), move || -> Result<_> {
        // One CPU for the whole run: veths process on the sender's.
        pin_to_cpu(1)?;
        let report = h1_generator(qps, payload)?.send(packets)?;
        Ok((report.packets, report.frame_bytes, report.elapsed))
    })??;
    let mut report = HopReport {
        sent,
        frame_bytes,
        elapsed,
        dropped_at_leaf: 0,
        spines: Vec::new(),
        leaf: None,
        drops: LinkDrops::default(),
    };
    // What is still in a veth's ring when the sender returns arrives soon
    // after; a hop that lost packets never gets there and the caller sees
    // it in the counts.
    let deadline = Instant::now() + RECEIVE_GRACE;
    loop {
        report.dropped_at_leaf = leaf_drop.as_ref().map_or(Ok(0), |d| d.packets())?;
        report.spines = spines.iter().map(|s| s.packets()).collect::<Result<_>>()?;
        if report.arrived() >= report.sent || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    report.drops = LinkDrops::read(bed)?.since(&drops_before);
    if let Some(daemon) = daemon {
        report.leaf = Some(LeafCounters::from_metrics(bed, &daemon.stop()?)?);
    }
    Ok(report)
}
