//! Collective traffic through the testbed: the generators on the sender
//! hosts at once, a sink on every receiver, fabriclb (or the kernel) on
//! the leaf.

use std::net::Ipv4Addr;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::netns::{in_netns, pin_to_cpu};
use super::queues::{QueueWatch, SpineQueue};
use super::sink::{Sink, SinkTotals};
use super::udp::RECEIVE_GRACE;
use super::{Daemon, EventWatch, LeafCounters, LinkDrops, Testbed, receiver_addr};
use crate::daemon::flow_events::WatchEvent;
use crate::traffic;

/// Group keys for hashing on the five-tuple alone (no BTH destination QP).
pub const FIVE_TUPLE: &str =
    r#"hash_fields = ["src_ip", "dst_ip", "ip_protocol", "l4_src_port", "l4_dst_port"]"#;

/// A collective workload for every sender host.
#[derive(Clone, Debug)]
pub struct Collective {
    pub exchange: traffic::Exchange,
    pub pace: traffic::Pace,
    /// Hosts 1..=senders send; all receive.
    pub senders: usize,
    pub leaf: Leaf,
}

/// What forwards at the leaf.
#[derive(Clone, Debug)]
pub enum Leaf {
    /// fabriclb, its group configured by the TOML keys `group` (see
    /// [`Testbed::leaf_config`]).
    Fabriclb { group: String },
    /// fabriclb started, restarted and stopped by the caller, not the run.
    Started,
    /// No fabriclb: the leaf kernel's own routes (static multipath, or
    /// BGP's with `--routing bgp`).
    Kernel,
}

#[derive(Debug)]
pub struct CollectiveReport {
    pub sent_packets: u64,
    pub sent_bytes: u64,
    pub received: SinkTotals,
    /// What the testbed's links dropped during the run.
    pub drops: LinkDrops,
    pub leaf: LeafCounters,
    pub elapsed: Duration,
    /// Each shaped spine's queue: its drops are packets the fabric lost,
    /// not the testbed.
    pub spine_queues: Vec<SpineQueue>,
    /// CLOCK_MONOTONIC nanoseconds when the first sender began.
    pub started_ns: u64,
    /// What `fabriclb watch` showed of the leaf's flow events, from
    /// before the first packet to the daemon's end.
    pub flow_events: Vec<WatchEvent>,
}

impl CollectiveReport {
    /// Packets the shaped spines dropped.
    pub fn spine_drops(&self) -> u64 {
        self.spine_queues.iter().map(|q| q.drops).sum()
    }

    /// From the first packet sent to the last one received (the sink's
    /// XDP timestamp on the same clock); zero when nothing arrived.
    pub fn completion(&self) -> Duration {
        Duration::from_nanos(self.received.last_ns.saturating_sub(self.started_ns))
    }
}

/// Runs `collective` with every host as a rank: the chosen leaf, a sink on
/// every receiver, the generators on the senders at once.
pub fn run_collective(
    bed: &Testbed,
    fabriclb: &Path,
    workdir: &Path,
    collective: &Collective,
) -> Result<CollectiveReport> {
    run_collective_with(bed, fabriclb, workdir, collective, &[], |_| Ok(()))
        .map(|(report, ())| report)
}

/// [`run_collective`] with `fabriclb run`'s extra arguments `args`, calling
/// `during` with the leaf's daemon (if any) while the senders send.
pub fn run_collective_with<T>(
    bed: &Testbed,
    fabriclb: &Path,
    workdir: &Path,
    collective: &Collective,
    args: &[&str],
    during: impl FnOnce(Option<&Daemon>) -> Result<T>,
) -> Result<(CollectiveReport, T)> {
    let hosts = bed.shape().hosts;
    let daemon = match &collective.leaf {
        Leaf::Fabriclb { group } => Some(Daemon::start(
            bed,
            fabriclb,
            workdir,
            &bed.leaf_config(group),
            args,
        )?),
        Leaf::Started | Leaf::Kernel => None,
    };
    let watch = (daemon.as_ref())
        .map(|daemon| EventWatch::start(fabriclb, daemon, &[]))
        .transpose()?;
    let sinks = (1..=hosts)
        .map(|i| in_netns(&bed.ns(&format!("r{i}")), || Sink::attach("eth0"))?)
        .collect::<Result<Vec<_>>>()?;
    let drops_before = LinkDrops::read(bed)?;
    let queues = QueueWatch::start(bed)?;
    let ranks: Vec<Ipv4Addr> = (1..=hosts).map(receiver_addr).collect();
    let senders: Vec<_> = (1..=collective.senders.min(hosts))
        .map(|i| {
            let workload = collective.exchange.for_rank(ranks.clone(), i - 1);
            let (ns, pace) = (bed.ns(&format!("h{i}")), collective.pace);
            let gateway = Ipv4Addr::new(198, 18, 100 + i as u8, 254);
            std::thread::spawn(move || {
                in_netns(&ns, move || -> Result<traffic::SendReport> {
                    // A veth hop runs on the sending CPU; a sender that
                    // migrated mid-run would leave packets in two CPUs'
                    // backlogs and reorder its own QPs, which is the
                    // testbed's doing, not the fabric's.
                    pin_to_cpu(i)?;
                    let sender = traffic::resolve_sender("eth0", gateway)?;
                    traffic::send("eth0", traffic::Generator::new(workload, sender), pace)
                })?
            })
        })
        .collect();
    let during = during(daemon.as_ref());
    let sent = Sent::join(senders)?;
    let mut report = CollectiveReport {
        sent_packets: sent.packets,
        sent_bytes: sent.bytes,
        received: SinkTotals::default(),
        drops: LinkDrops::default(),
        leaf: LeafCounters::default(),
        elapsed: sent.elapsed,
        spine_queues: Vec::new(),
        started_ns: sent.started_ns,
        flow_events: Vec::new(),
    };
    until_accounted(sent.packets, || {
        report.received = received(&sinks)?;
        report.drops = LinkDrops::read(bed)?.since(&drops_before);
        report.spine_queues = queues.current();
        Ok(report.received.packets + report.drops.lost() + report.spine_drops())
    })?;
    report.spine_queues = queues.stop()?;
    if let Some(daemon) = daemon {
        report.leaf = LeafCounters::from_metrics(bed, &daemon.stop()?)?;
    }
    report.flow_events = watch.map(EventWatch::stop).unwrap_or_default();
    Ok((report, during?))
}

/// What every sender of a run sent.
pub(super) struct Sent {
    pub(super) packets: u64,
    pub(super) bytes: u64,
    /// The longest sender's first to last packet.
    pub(super) elapsed: Duration,
    /// CLOCK_MONOTONIC nanoseconds when the first sender began.
    pub(super) started_ns: u64,
}

impl Sent {
    /// Waits for every sender thread and sums what they sent.
    pub(super) fn join(
        senders: Vec<std::thread::JoinHandle<Result<traffic::SendReport>>>,
    ) -> Result<Self> {
        let mut all = Self {
            packets: 0,
            bytes: 0,
            elapsed: Duration::ZERO,
            started_ns: u64::MAX,
        };
        for sender in senders {
            let sent = sender
                .join()
                .map_err(|_| anyhow::anyhow!("sender thread panicked"))??;
            all.packets += sent.packets;
            all.bytes += sent.bytes;
            all.elapsed = all.elapsed.max(sent.elapsed);
            all.started_ns = all.started_ns.min(sent.started_ns);
        }
        Ok(all)
    }
}

/// Lets the queues (TBF) drain before counting: calls `accounted`, which
/// reads the run's counters and returns the packets received or counted
/// lost, until they make up `sent` or [`RECEIVE_GRACE`] passed.
pub(super) fn until_accounted(sent: u64, mut accounted: impl FnMut() -> Result<u64>) -> Result<()> {
    let deadline = Instant::now() + RECEIVE_GRACE;
    while accounted()? < sent && Instant::now() <= deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// What every sink received so far.
pub(super) fn received(sinks: &[Sink]) -> Result<SinkTotals> {
    sinks.iter().try_fold(SinkTotals::default(), |acc, s| {
        anyhow::Ok(acc + s.totals()?)
    })
}
