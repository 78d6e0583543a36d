//! `link-down`: four equal spines under a steady ring all-reduce; one
//! spine's end of its link goes down mid-run (the leaf's port loses its
//! carrier) and comes back later. The leaf's daemon refreshes links only
//! every ten minutes, so only its link and neighbour events can explain
//! what it does. Measured at the leaf's data plane, every millisecond:
//! when the dead next hop's packet counter stopped, and, from the group's
//! bucket table and the collective's flows hashed as the data plane hashes
//! them, which flows moved when the link went and when it came back.

use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use lb_common::limits::BUCKETS_PER_GROUP;
use lb_common::packet::parse::FlowFields;
use lb_common::select::hash::{HashFields, flow_hash};
use serde::{Deserialize, Serialize};

use super::Scenario;
use super::slow_spine::{EVEN_RATES_MBIT, RANKS, ring};
use rtnetlink::LinkUnspec;

use crate::testbed::netns::rtnetlink_in;
use crate::testbed::{Collective, LeafMaps, PATIENCE, Queues, Testbed, host_addr, receiver_addr};
use crate::traffic::{Generator, Sender};

/// Messages per connection at full length: about 2.3 s of sending.
pub const MESSAGES: u32 = 400;
/// Offered load, as a share of the four spines: 80% of the three left.
const LOAD: f64 = 0.6;
/// The spine whose link goes down, and when, from the senders' start.
const SPINE: usize = 2;
const DOWN_AFTER: Duration = Duration::from_millis(500);
const UP_AFTER: Duration = Duration::from_millis(1100);
/// Samples taken this often, from this long before the change to this
/// long after it.
const SAMPLE_EVERY: Duration = Duration::from_millis(1);
const BEFORE: Duration = Duration::from_millis(100);
const AFTER: Duration = Duration::from_millis(300);

/// A spine's link down and up again while the collective runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkFlap {
    /// 1-based spine.
    pub spine: usize,
    /// How long after the senders start its link goes down, and comes up.
    pub down_after: Duration,
    pub up_after: Duration,
}

/// The flap measured: what the leaf did, and each spine's traffic
/// around it.
#[derive(Clone, Debug, PartialEq)]
pub struct Flapped {
    pub failover: Failover,
    pub timeline: Timeline,
}

/// Each spine's packets through the leaf per window, from before the
/// link went down to after it came back: the failover's picture.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    pub window_ms: f64,
    /// Each window's start, ms from the link going down.
    pub at_ms: Vec<f64>,
    /// When the link came back, ms from it going down.
    pub up_ms: f64,
    /// Per spine, `s1` first, its packets in each window.
    pub spine_packets: Vec<Vec<u64>>,
}

/// Windows of the [`Timeline`].
const WINDOW: Duration = Duration::from_millis(10);

impl Timeline {
    /// From `samples` of every spine's packet counter, `down` and `up`
    /// when the link went and came back.
    pub fn of(samples: &[(Instant, Vec<u64>)], down: Instant, up: Instant) -> Self {
        let (Some((first, _)), Some((last, _))) = (samples.first(), samples.last()) else {
            return Self::default();
        };
        let spines = samples[0].1.len();
        // Each counter as of `t`: the last sample taken by then.
        let value = |t: Instant, j: usize| {
            let taken = samples.partition_point(|(at, _)| *at <= t);
            samples[taken.saturating_sub(1)].1[j]
        };
        let ms = |t: Instant| {
            let signed = t.saturating_duration_since(down).as_secs_f64()
                - down.saturating_duration_since(t).as_secs_f64();
            signed * 1e3
        };
        let starts: Vec<Instant> = std::iter::successors(Some(*first), |t| Some(*t + WINDOW))
            .take_while(|t| *t + WINDOW <= *last)
            .collect();
        Self {
            window_ms: WINDOW.as_secs_f64() * 1e3,
            at_ms: starts.iter().map(|&t| ms(t)).collect(),
            up_ms: ms(up),
            spine_packets: (0..spines)
                .map(|j| {
                    (starts.iter())
                        .map(|&t| value(t + WINDOW, j).saturating_sub(value(t, j)))
                        .collect()
                })
                .collect(),
        }
    }
}

/// What the leaf did about the flap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Failover {
    /// From the carrier change (the netlink request sent) to the last
    /// millisecond sample in which the dead next hop's packet counter
    /// grew; `None` (null) when it never grew after the change: nothing
    /// was measured, which is not a failover of 0 ms.
    pub failover_ms: Option<f64>,
    /// From the request that set the link up again to the first sample in
    /// which the next hop's packet counter grew again; `None` when it did
    /// not within the watch.
    #[serde(default)]
    pub rejoin_ms: Option<f64>,
    /// Packets sent and never received, whatever dropped them.
    pub lost: u64,
    /// The collective's flows (connection and QP).
    pub total_flows: u64,
    /// Flows whose bucket was on the dead next hop before the change.
    pub dead_link_flows: u64,
    /// Flows whose next hop changed when the link went down.
    pub moved_flows: u64,
    /// Flows whose next hop changed when the link came back.
    pub rejoin_moved_flows: u64,
    /// Flows on another next hop after the return than before the change.
    pub displaced_flows: u64,
}

/// The scenario with `messages` per connection.
pub fn link_down(messages: u32) -> Scenario {
    let flap = LinkFlap {
        spine: SPINE,
        down_after: DOWN_AFTER,
        up_after: UP_AFTER,
    };
    let scenario = ring(
        RANKS,
        "link-down",
        &EVEN_RATES_MBIT,
        LOAD,
        Queues::Lossy,
        messages,
    );
    Scenario {
        workload: format!(
            "{}; spine {SPINE}'s link down {} ms into the run, up at {} ms",
            scenario.workload,
            DOWN_AFTER.as_millis(),
            UP_AFTER.as_millis()
        ),
        flap: Some(flap),
        ..scenario
    }
}

/// Waits for `flap`'s times (counted from `started`), applies them to
/// `bed`, and measures the leaf's failover for `collective`'s flows,
/// with every spine's packets sampled throughout. The leaf's spine group
/// is group 0 and its next hops the spines in order (ids 0..), as a
/// fresh daemon numbers them.
pub fn measure(
    bed: &Testbed,
    collective: &Collective,
    flap: &LinkFlap,
    started: Instant,
) -> Result<Flapped> {
    let dead = flap.spine as u32 - 1;
    std::thread::sleep(
        (started + flap.down_after - BEFORE).saturating_duration_since(Instant::now()),
    );
    let maps = LeafMaps::open(bed)?;
    let flows = FlowBuckets::new(bed, collective, &maps, 0)?;
    let next_hops = || flows.next_hops(&maps);
    let before = next_hops()?;
    let share = |table: &[u32]| table.iter().filter(|&&hop| hop == dead).count();
    let share_before = share(&maps.buckets(0)?);

    let mut samples = Vec::new();
    let spines = bed.shape().spines as u32;
    let counters = || {
        (0..spines)
            .map(|j| maps.packets(j))
            .collect::<Result<Vec<u64>>>()
    };
    sample_until(&counters, Instant::now() + BEFORE, &mut samples)?;
    let changed = set_link(bed, flap.spine, false)?;
    sample_until(&counters, changed + AFTER, &mut samples)?;
    let down = next_hops()?;

    sample_until(&counters, started + flap.up_after, &mut samples)?;
    let dead_samples: Vec<(Instant, u64)> = (samples.iter())
        .map(|(t, all)| (*t, all[dead as usize]))
        .collect();
    let back = set_link(bed, flap.spine, true)?;
    // The daemon writes the table bucket by bucket: read the flows once
    // the next hop has its whole share back, not at its first bucket.
    while share(&maps.buckets(0)?) < share_before {
        ensure!(
            back.elapsed() < PATIENCE,
            "spine {}'s next hop not back after {PATIENCE:?}",
            flap.spine
        );
        sample_until(&counters, Instant::now() + SAMPLE_EVERY, &mut samples)?;
    }
    let up = next_hops()?;
    // On until the next hop carries again, however long its return took.
    sample_until(&counters, Instant::now() + AFTER, &mut samples)?;
    let dead_after: Vec<(Instant, u64)> = (samples.iter())
        .map(|(t, all)| (*t, all[dead as usize]))
        .collect();
    let count = |f: &dyn Fn(usize) -> bool| (0..flows.len()).filter(|&i| f(i)).count() as u64;
    let failover = Failover {
        failover_ms: last_growth(&dead_samples, changed),
        rejoin_ms: first_growth(&dead_after, back),
        lost: 0,
        total_flows: flows.len() as u64,
        dead_link_flows: count(&|i| before[i] == dead),
        moved_flows: count(&|i| down[i] != before[i]),
        rejoin_moved_flows: count(&|i| up[i] != down[i]),
        displaced_flows: count(&|i| up[i] != before[i]),
    };
    Ok(Flapped {
        failover,
        timeline: Timeline::of(&samples, changed, back),
    })
}

/// Samples `counter` every [`SAMPLE_EVERY`] into `samples` until `until`.
pub(super) fn sample_until<T>(
    counter: &dyn Fn() -> Result<T>,
    until: Instant,
    samples: &mut Vec<(Instant, T)>,
) -> Result<()> {
    while Instant::now() < until {
        samples.push((Instant::now(), counter()?));
        std::thread::sleep(SAMPLE_EVERY);
    }
    Ok(())
}

/// The most the counter grew by within any `window` of `samples`: what
/// the path carried in its busiest stretch that long. Collectives send in
/// rounds, so this is the loss a reaction within `window` may cost, where
/// the mean rate over `window` would be less than one round.
pub(super) fn busiest(samples: &[(Instant, u64)], window: Duration) -> u64 {
    let mut most = 0;
    for (i, &(start, first)) in samples.iter().enumerate() {
        let within = samples[i..]
            .iter()
            .take_while(|(t, _)| *t - start <= window);
        if let Some(&(_, last)) = within.last() {
            most = most.max(last.saturating_sub(first));
        }
    }
    most
}

/// Milliseconds from `changed` to the last sample whose counter grew over
/// the one before it; `None` when none after `changed` did.
pub(super) fn last_growth(samples: &[(Instant, u64)], changed: Instant) -> Option<f64> {
    samples
        .windows(2)
        .rfind(|w| w[1].0 >= changed && w[1].1 > w[0].1)
        .map(|w| (w[1].0 - changed).as_secs_f64() * 1e3)
}

/// Milliseconds from `since` to the first sample whose counter grew over
/// the one before it; `None` when none after `since` did.
fn first_growth(samples: &[(Instant, u64)], since: Instant) -> Option<f64> {
    samples
        .windows(2)
        .find(|w| w[0].0 >= since && w[1].1 > w[0].1)
        .map(|w| (w[1].0 - since).as_secs_f64() * 1e3)
}

/// Sets spine `spine`'s end of its link to the leaf up or down; returns
/// when the request went out. Over a netlink socket opened beforehand, not
/// `ip`, whose start on a loaded machine would count as failover time.
pub(super) fn set_link(bed: &Testbed, spine: usize, up: bool) -> Result<Instant> {
    rtnetlink_in(&bed.ns(&format!("s{spine}")), move |handle| async move {
        let link = LinkUnspec::new_with_name("leaf");
        let message = if up { link.up() } else { link.down() }.build();
        let at = Instant::now();
        handle.link().set(message).execute().await?;
        Ok(at)
    })
}

/// Where the leaf's group sends each flow of a collective: the bucket
/// each flow's headers hash to, read in the group's bucket table.
pub(super) struct FlowBuckets {
    group: u32,
    buckets: Vec<usize>,
}

impl FlowBuckets {
    /// `collective`'s flows on `bed` in group `group` of the leaf's maps.
    pub(super) fn new(
        bed: &Testbed,
        collective: &Collective,
        maps: &LeafMaps,
        group: u32,
    ) -> Result<Self> {
        let entry = maps.group(group)?;
        let buckets = flows(bed, collective)
            .iter()
            .map(|f| {
                let hash = flow_hash(entry.hash_seed, f, HashFields(entry.hash_fields));
                (hash & (BUCKETS_PER_GROUP - 1)) as usize
            })
            .collect();
        Ok(Self { group, buckets })
    }

    pub(super) fn len(&self) -> usize {
        self.buckets.len()
    }

    /// Each flow's next-hop id now.
    pub(super) fn next_hops(&self, maps: &LeafMaps) -> Result<Vec<u32>> {
        let table = maps.buckets(self.group)?;
        Ok(self.buckets.iter().map(|&b| table[b]).collect())
    }
}

/// The header fields of every flow of `collective` on `bed`, as the
/// leaf's program parses them.
fn flows(bed: &Testbed, collective: &Collective) -> Vec<FlowFields> {
    let hosts = bed.shape().hosts;
    let ranks: Vec<_> = (1..=hosts).map(receiver_addr).collect();
    (1..=collective.senders.min(hosts))
        .flat_map(|i| {
            // MACs are no part of a flow.
            let sender = Sender {
                ip: host_addr(i),
                mac: [0; 6],
                gateway_mac: [0; 6],
            };
            Generator::new(collective.exchange.for_rank(ranks.clone(), i - 1), sender).flows()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_busiest_window_is_the_most_a_counter_grew_within_it() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let samples = [
            (at(0), 0),
            (at(4), 32),
            (at(9), 32),
            (at(12), 64),
            (at(30), 70),
        ];
        let ten = Duration::from_millis(10);
        // 0-9 ms: 32; 4-12 ms: 32; 9-12: 32; 12-30 is wider than 10 ms.
        assert_eq!(busiest(&samples, ten), 32);
        assert_eq!(busiest(&samples, Duration::from_millis(12)), 64);
        assert_eq!(busiest(&samples[..1], ten), 0);
        assert_eq!(busiest(&[], ten), 0);
    }

    /// Windows of 10 ms from the first sample, each spine's packets in
    /// each, times from the link going down.
    #[test]
    fn a_timeline_counts_each_spines_packets_per_window() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let samples = [
            (at(0), vec![0, 0]),
            (at(5), vec![5, 10]),
            (at(10), vec![10, 20]),
            (at(15), vec![10, 30]),
            (at(20), vec![10, 40]),
            (at(27), vec![12, 41]),
        ];
        let timeline = Timeline::of(&samples, at(12), at(25));
        assert_eq!(timeline.window_ms, 10.0);
        assert_eq!(timeline.at_ms, [-12.0, -2.0]);
        assert_eq!(timeline.up_ms, 13.0);
        assert_eq!(timeline.spine_packets, [vec![10, 0], vec![20, 20]]);
        assert_eq!(Timeline::of(&[], at(0), at(1)), Timeline::default());
    }

    #[test]
    fn failover_ends_at_the_last_sample_the_counter_grew_in() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let changed = at(10);
        let samples = [
            (at(0), 0),
            (at(5), 10),
            (at(11), 20),
            (at(17), 25),
            (at(18), 25),
            (at(30), 25),
        ];
        assert_eq!(last_growth(&samples, changed), Some(7.0));
        // The first growth from the change on: the sample at 11 ms over
        // the one at 5 ms was taken before it, so 17 - 10.
        assert_eq!(first_growth(&samples, changed), Some(7.0));
        assert_eq!(first_growth(&samples, at(17)), None);
        // Nothing after the change: nothing measured.
        assert_eq!(last_growth(&samples[..2], changed), None);
        let flat = [(at(0), 3), (at(11), 3), (at(20), 3)];
        assert_eq!(last_growth(&flat, changed), None);
    }

    #[test]
    fn every_qp_of_the_ring_is_a_flow() {
        let collective = link_down(1).collective;
        let ranks: Vec<_> = (1..=4).map(receiver_addr).collect();
        let sender = Sender {
            ip: host_addr(1),
            mac: [0; 6],
            gateway_mac: [0; 6],
        };
        let flows = Generator::new(collective.exchange.for_rank(ranks, 0), sender).flows();
        // One connection (to the next rank) of 16 QPs, each its own port.
        assert_eq!(flows.len(), 16);
        let ports: std::collections::BTreeSet<u16> = flows.iter().map(|f| f.src_port).collect();
        assert_eq!(ports.len(), 16);
        assert!(
            flows
                .iter()
                .all(|f| f.dst[..4] == receiver_addr(2).octets())
        );
    }
}
