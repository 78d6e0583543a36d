//! Collectives across a fabric's racks: every host a rank, fabriclb on
//! every leaf, a sink on every host, the spines' shaped ports watched.
//!
//! Ranks are dealt to the leaves in turn (rank r on leaf r mod L), so
//! that every step of a ring crosses racks, as a collective placed
//! rack-aware sends its heavy steps between racks.

use std::net::Ipv4Addr;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};

use super::{Fabric, Sampling, host_addr, link_addr};
use crate::testbed::collective::{Sent, received, until_accounted};
use crate::testbed::netns::{in_netns, pin_to_cpu};
use crate::testbed::queues::{QueueWatch, SpineQueue};
use crate::testbed::sink::{Sink, SinkTotals};
use crate::testbed::{Collective, Daemon, Leaf, LeafCounters, LinkDrops};
use crate::traffic;

/// What a collective across the fabric did.
#[derive(Debug)]
pub struct FabricReport {
    pub sent_packets: u64,
    pub sent_bytes: u64,
    pub received: SinkTotals,
    /// What the fabric's links dropped (the testbed's losses).
    pub drops: LinkDrops,
    /// By leaf (leaf 1 first): its fabriclb's spine group, where it ran.
    pub leaves: Vec<LeafCounters>,
    /// Every shaped spine port: what it sent toward its leaf and dropped.
    pub spine_ports: Vec<SpineQueue>,
    /// CLOCK_MONOTONIC nanoseconds when the first sender began.
    pub started_ns: u64,
    pub elapsed: Duration,
}

impl FabricReport {
    /// Packets the spines' shaped ports dropped: the fabric's losses.
    pub fn spine_drops(&self) -> u64 {
        self.spine_ports.iter().map(|q| q.drops).sum()
    }

    /// From the first packet sent to the last one received.
    pub fn completion(&self) -> Duration {
        Duration::from_nanos(self.received.last_ns.saturating_sub(self.started_ns))
    }

    /// Bytes spine `spine`'s port toward leaf `leaf` sent.
    pub fn port_bytes(&self, spine: usize, leaf: usize) -> u64 {
        (self.spine_ports.iter())
            .find(|q| q.spine == spine && q.leaf == leaf)
            .map_or(0, |q| q.sent_bytes)
    }
}

/// The leaf and host (both 1-based) of rank `rank` among `leaves`.
pub fn rank_place(leaves: usize, rank: usize) -> (usize, usize) {
    (rank % leaves + 1, rank / leaves + 1)
}

/// Every rank's receive address, by rank.
pub fn rank_addrs(leaves: usize, hosts: usize) -> Vec<Ipv4Addr> {
    (0..leaves * hosts)
        .map(|rank| {
            let (leaf, host) = rank_place(leaves, rank);
            host_addr(leaf, host)
        })
        .collect()
}

/// The labels leaf `leaf`'s metrics give its spines.
pub fn spine_labels(fabric: &Fabric, leaf: usize) -> Vec<String> {
    (1..=fabric.shape().spines)
        .map(|j| format!("s{j} {}", link_addr(leaf, j, true)))
        .collect()
}

/// Runs `collective` with every host of `fabric` as a rank: its `leaf`
/// says what forwards at every leaf (fabriclb with the group keys, each
/// leaf's config from [`Fabric::leaf_config`], or the kernel); `args` are
/// `fabriclb run`'s extra arguments.
pub fn run_fabric_collective(
    fabric: &Fabric,
    fabriclb: &Path,
    workdir: &Path,
    collective: &Collective,
    args: &[&str],
) -> Result<FabricReport> {
    let groups = match &collective.leaf {
        Leaf::Fabriclb { group } => vec![group.clone(); fabric.shape().leaves],
        Leaf::Started | Leaf::Kernel => Vec::new(),
    };
    let run = FabricRun {
        collective,
        groups: &groups,
        args,
        sampling: Sampling::FABRIC,
    };
    run_fabric_collective_with(fabric, fabriclb, workdir, &run, |_| Ok(()))
        .map(|(report, ())| report)
}

/// A collective on a fabric whose leaves run different groups.
pub struct FabricRun<'a> {
    /// Its `leaf` is not read: `groups` says what forwards.
    pub collective: &'a Collective,
    /// Leaf K's group keys at `K - 1`; empty: the kernel forwards.
    pub groups: &'a [String],
    /// `fabriclb run`'s extra arguments.
    pub args: &'a [&'a str],
    /// How the steering leaves read the spines.
    pub sampling: Sampling,
}

/// [`run_fabric_collective`] with a group per leaf, doing `during` (given
/// the spines' queues as they are sampled) while the senders send.
pub fn run_fabric_collective_with<T>(
    fabric: &Fabric,
    fabriclb: &Path,
    workdir: &Path,
    run: &FabricRun,
    during: impl FnOnce(&QueueWatch) -> Result<T>,
) -> Result<(FabricReport, T)> {
    let FabricRun {
        collective,
        groups,
        args,
        sampling,
    } = *run;
    let shape = fabric.shape();
    let daemons = (1..)
        .zip(groups)
        .map(|(k, group)| {
            let role = format!("l{k}");
            let config = fabric.leaf_config(k, group, sampling);
            Daemon::start_in(&fabric.ns(&role), &role, fabriclb, workdir, &config, args)
                .with_context(|| format!("fabriclb on leaf {k}"))
        })
        .collect::<Result<Vec<_>>>()?;
    let ranks = rank_addrs(shape.leaves, shape.hosts);
    let sinks = (0..ranks.len())
        .map(|rank| {
            let (leaf, host) = rank_place(shape.leaves, rank);
            in_netns(&fabric.ns(&format!("l{leaf}h{host}")), || {
                Sink::attach("eth0")
            })?
        })
        .collect::<Result<Vec<_>>>()?;
    let drops_before = LinkDrops::read_fabric(fabric)?;
    let queues = QueueWatch::start_fabric(fabric)?;
    let senders: Vec<_> = (0..collective.senders.min(ranks.len()))
        .map(|rank| {
            let (leaf, host) = rank_place(shape.leaves, rank);
            let workload = collective.exchange.for_rank(ranks.clone(), rank);
            let ns = fabric.ns(&format!("l{leaf}h{host}"));
            let pace = collective.pace;
            let own = host_addr(leaf, host).octets();
            let gateway = Ipv4Addr::new(own[0], own[1], own[2], 254);
            std::thread::spawn(move || {
                in_netns(&ns, move || -> Result<traffic::SendReport> {
                    // As on the single-leaf testbed: a sender that
                    // migrated would reorder its own QPs.
                    pin_to_cpu(rank)?;
                    let sender = traffic::resolve_sender("eth0", gateway)?;
                    traffic::send("eth0", traffic::Generator::new(workload, sender), pace)
                })?
            })
        })
        .collect();
    let during = during(&queues);
    let sent = Sent::join(senders)?;
    let mut report = FabricReport {
        sent_packets: sent.packets,
        sent_bytes: sent.bytes,
        received: SinkTotals::default(),
        drops: LinkDrops::default(),
        leaves: Vec::new(),
        spine_ports: Vec::new(),
        started_ns: sent.started_ns,
        elapsed: sent.elapsed,
    };
    until_accounted(sent.packets, || {
        report.received = received(&sinks)?;
        report.drops = LinkDrops::read_fabric(fabric)?.since(&drops_before);
        report.spine_ports = queues.current();
        Ok(report.received.packets + report.drops.lost() + report.spine_drops())
    })?;
    report.spine_ports = queues.stop()?;
    for (k, daemon) in (1..).zip(daemons) {
        let text = daemon.stop()?;
        let counters = LeafCounters::parse(fabric.spine_group(), &spine_labels(fabric, k), &text)
            .with_context(|| format!("leaf {k}'s metrics"))?;
        report.leaves.push(counters);
    }
    Ok((report, during?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_are_dealt_to_the_leaves_in_turn() {
        let places: Vec<_> = (0..6).map(|r| rank_place(3, r)).collect();
        assert_eq!(places, [(1, 1), (2, 1), (3, 1), (1, 2), (2, 2), (3, 2)]);
        // A ring's every step crosses racks.
        let ring = traffic::Pattern::Ring;
        for rank in 0..6 {
            let next = ring.peers(6, rank)[0];
            assert_ne!(rank_place(3, rank).0, rank_place(3, next).0);
        }
        assert_eq!(rank_addrs(3, 2)[4], host_addr(2, 2));
    }
}
