//! A scenario's results as `--json` writes them: one object per mode with
//! the fields scripts read.

use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;

use super::link_down::Timeline;
use super::simulated::Simulated;
use super::{Drains, Failover, Mode, Reaction};
use crate::daemon::flow_events::{FLOWLET_MOVE, PathEnd, WatchEvent};
use crate::testbed::CollectiveReport;
use crate::testbed::CrossReport;
use crate::testbed::drops::unaccounted;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub scenario: String,
    pub modes: Vec<ModeReport>,
}

/// One mode's run. `dropped` is what the spines' queues dropped: the
/// fabric's losses. `link_lost` is what the testbed's own links dropped of
/// the traffic (a loaded machine's), `tx_errors` what the leaf redirected
/// and its kernel failed to send, so `received = sent - dropped -
/// link_lost - tx_errors - unaccounted`, and `unaccounted` is 0 when every
/// loss was counted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModeReport {
    pub mode: String,
    pub telemetry: bool,
    /// How new flowlets picked a next hop (`least-cost`, `two-choices`).
    #[serde(default)]
    pub choice: String,
    pub sent: u64,
    pub received: u64,
    pub dropped: u64,
    pub link_lost: u64,
    #[serde(default)]
    pub tx_errors: u64,
    #[serde(default)]
    pub unaccounted: i64,
    /// First packet sent to last packet received.
    pub completion_ms: f64,
    /// What a split in proportion to capacity would take: every byte sent
    /// over the sum of the spines' rates, or the senders' own paced
    /// sending time if that is longer (a fabric cannot deliver faster
    /// than it is offered).
    pub ideal_ms: f64,
    /// The longest sender's first to last packet.
    pub sending_ms: f64,
    /// MIDDLE/LAST packets that did not follow their message's previous one.
    pub in_message_reorders: u64,
    /// Each spine's fraction of the bytes the leaf forwarded.
    pub spine_share: Vec<f64>,
    /// The busiest spine's bytes over the mean: among equal spines, how
    /// uneven the choice left them (1.0 is even).
    #[serde(default)]
    pub spine_mmr: f64,
    /// Each spine's largest sampled queue, bytes.
    pub max_queue_bytes: Vec<u64>,
    /// What each spine's queue dropped, packets.
    pub spine_dropped: Vec<u64>,
    pub flowlet_moves: u64,
    /// How the leaf reacted to the scenario's rate change, if it has one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub reaction: Option<Reaction>,
    /// The cross traffic's datagrams, if the scenario has some; `dropped`
    /// counts only the collective's packets.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cross: Option<CrossReport>,
    /// What the leaf did about the scenario's event, if it has one, its
    /// fields beside the others.
    #[serde(flatten, skip_serializing_if = "Option::is_none", default)]
    pub event: Option<Event>,
    /// What `fabriclb watch` showed of the leaf's flow events.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub flow_events: Option<WatchedEvents>,
    /// Each spine's packets per window around a link's flap, if the
    /// scenario has one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub timeline: Option<Timeline>,
    /// What `fabriclb simulate` predicted for the row, where it models it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub simulated: Option<Simulated>,
}

/// What `fabriclb watch` showed during a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WatchedEvents {
    pub total: u64,
    /// By `event/cause`: `flowlet_move/choice` and so on.
    pub by_cause: BTreeMap<String, u64>,
    /// Flowlet moves off each spine (`s1` first).
    pub moves_off_spine: Vec<u64>,
    /// The move off the slowest spine by the choice to the path rated
    /// most above it, as `watch` prints it.
    pub example: Option<String>,
}

/// How much better the path a move took was rated than the one it left.
fn quality_gap(event: &WatchEvent) -> i64 {
    let quality = |end: &Option<PathEnd>| end.as_ref().and_then(|p| p.quality).map(i64::from);
    quality(&event.to)
        .zip(quality(&event.from))
        .map_or(0, |(to, from)| to - from)
}

impl WatchedEvents {
    /// `events` on a leaf of `spines` spines (its next hops `s1`, `s2`,
    /// ...), `slowest` (1-based) the one the example moves off.
    pub fn of(events: &[WatchEvent], spines: usize, slowest: Option<usize>) -> Self {
        let mut watched = Self {
            total: events.len() as u64,
            moves_off_spine: vec![0; spines],
            ..Self::default()
        };
        let spine = |event: &WatchEvent| {
            let from = event.from.as_ref()?;
            from.interface.strip_prefix('s')?.parse::<usize>().ok()
        };
        let mut best_gap = 0;
        for event in events {
            *(watched.by_cause)
                .entry(format!("{}/{}", event.event, event.cause))
                .or_default() += 1;
            if event.event != FLOWLET_MOVE {
                continue;
            }
            let Some(j) = spine(event) else { continue };
            if let Some(count) = watched.moves_off_spine.get_mut(j.wrapping_sub(1)) {
                *count += 1;
            }
            let gap = quality_gap(event);
            if event.cause == "choice" && Some(j) == slowest && gap > best_gap {
                best_gap = gap;
                watched.example = Some(event.to_string());
            }
        }
        watched
    }
}

/// What the leaf did about a scenario's event. One field of the report
/// for both, flattened: two flattened fields that share keys (`lost`,
/// `total_flows`) would not read back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Event {
    /// A spine's link down and up: `failover_ms`, `lost`, `moved_flows`,
    /// `total_flows`...
    Failover(Failover),
    /// A spine drained by BGP: `lost`, `total_flows` and `drains`.
    Drains(Drains),
}

impl ModeReport {
    /// `mode`'s row from its run on a fabric of `capacity_mbit`.
    pub fn new(
        mode: &Mode,
        run: &CollectiveReport,
        capacity_mbit: u64,
        reaction: Option<Reaction>,
    ) -> Self {
        let sending_ms = run.elapsed.as_secs_f64() * 1e3;
        let mut max_queue_bytes = vec![0; run.leaf.spines.len()];
        let mut spine_dropped = vec![0; run.leaf.spines.len()];
        for q in &run.spine_queues {
            if let Some(slot) = max_queue_bytes.get_mut(q.spine - 1) {
                *slot = q.max_backlog_bytes;
            }
            if let Some(slot) = spine_dropped.get_mut(q.spine - 1) {
                *slot = q.drops;
            }
        }
        let (dropped, link_lost) = (run.spine_drops(), run.drops.lost_on_the_way());
        Self {
            mode: mode.name.to_owned(),
            telemetry: mode.telemetry,
            choice: mode.choice.to_string(),
            sent: run.sent_packets,
            received: run.received.packets,
            dropped,
            link_lost,
            tx_errors: run.leaf.tx_errors,
            unaccounted: unaccounted(
                run.sent_packets,
                run.received.packets,
                dropped + link_lost + run.leaf.tx_errors,
            ),
            completion_ms: run.completion().as_secs_f64() * 1e3,
            // bits / (Mbit/s * 1e6) s = bits / (Mbit/s * 1e3) ms.
            ideal_ms: (run.sent_bytes as f64 * 8.0 / (capacity_mbit as f64 * 1e3)).max(sending_ms),
            sending_ms,
            in_message_reorders: run.received.message_out_of_order,
            spine_share: run.leaf.byte_shares(),
            spine_mmr: run.leaf.byte_mmr().unwrap_or(0.0),
            max_queue_bytes,
            spine_dropped,
            flowlet_moves: run.leaf.flowlet_moves,
            reaction,
            cross: None,
            event: None,
            flow_events: None,
            timeline: None,
            simulated: None,
        }
    }

    /// With cross traffic, the spine's queue drops both kinds: `dropped`
    /// becomes the collective's own share of what the queues counted, less
    /// the cross traffic's losses, which the far leaf counts (every
    /// datagram it did not receive); `spine_dropped` stays the queues'
    /// count of both, and `unaccounted` what neither count explains.
    pub fn with_cross(mut self, report: Option<CrossReport>) -> Self {
        if let Some(report) = report {
            let queues: u64 = self.spine_dropped.iter().sum();
            self.dropped = queues.saturating_sub(report.lost);
            self.unaccounted = unaccounted(
                self.sent,
                self.received,
                self.dropped + self.link_lost + self.tx_errors,
            );
            self.cross = Some(report);
        }
        self
    }

    /// With the BGP drains measured during `run`, if any; `lost` is every
    /// packet sent and not received.
    pub fn with_drains(mut self, drains: Option<Drains>, run: &CollectiveReport) -> Self {
        if let Some(d) = drains {
            self.event = Some(Event::Drains(Drains {
                lost: run.sent_packets.saturating_sub(run.received.packets),
                ..d
            }));
        }
        self
    }

    /// With each spine's packets around a flap.
    pub fn with_timeline(mut self, timeline: Option<Timeline>) -> Self {
        self.timeline = timeline;
        self
    }

    /// With what `fabriclb simulate` predicted for the row.
    pub fn with_simulated(mut self, simulated: Option<Simulated>) -> Self {
        self.simulated = simulated;
        self
    }

    /// With what `fabriclb watch` showed during the run.
    pub fn with_flow_events(mut self, watched: Option<WatchedEvents>) -> Self {
        self.flow_events = watched;
        self
    }

    pub fn failover(&self) -> Option<Failover> {
        match &self.event {
            Some(Event::Failover(f)) => Some(*f),
            _ => None,
        }
    }

    pub fn drains(&self) -> Option<&Drains> {
        match &self.event {
            Some(Event::Drains(d)) => Some(d),
            _ => None,
        }
    }

    /// With the failover measured during `run`, if any; its `lost` is
    /// every packet sent and not received.
    pub fn with_failover(mut self, failover: Option<Failover>, run: &CollectiveReport) -> Self {
        if let Some(f) = failover {
            self.event = Some(Event::Failover(Failover {
                lost: run.sent_packets.saturating_sub(run.received.packets),
                ..f
            }));
        }
        self
    }
}

impl Report {
    pub fn to_json(&self) -> String {
        // Plain numbers, strings and vectors: serialising cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    pub fn from_json(text: &str) -> serde_json::Result<Self> {
        serde_json::from_str(text)
    }

    pub fn write(&self, path: &Path) -> Result<()> {
        std::fs::write(path, self.to_json() + "\n")
            .with_context(|| format!("writing {}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::testbed::{SpineCount, SpineQueue, sink::SinkTotals};

    /// 81.25 MB over 650 Mbit/s is one second, longer than the 0.8 s of
    /// sending; drops are the queues', not the links'; the leaf's transmit
    /// errors explain the rest; each spine's queue lands in its own slot.
    #[test]
    fn a_row_from_a_run() {
        let spine = |bytes| SpineCount {
            bytes,
            ..SpineCount::default()
        };
        let run = CollectiveReport {
            sent_packets: 100,
            sent_bytes: 81_250_000,
            received: SinkTotals {
                packets: 90,
                message_out_of_order: 2,
                last_ns: 3_500_000_000,
                ..SinkTotals::default()
            },
            drops: Default::default(),
            leaf: crate::testbed::LeafCounters {
                spines: vec![spine(30), spine(30), spine(30), spine(10)],
                flowlet_moves: 4,
                tx_errors: 3,
                ..Default::default()
            },
            elapsed: Duration::from_millis(800),
            spine_queues: vec![
                SpineQueue {
                    spine: 4,
                    drops: 7,
                    max_backlog_bytes: 9000,
                    ..SpineQueue::default()
                },
                SpineQueue {
                    spine: 1,
                    drops: 0,
                    max_backlog_bytes: 1000,
                    ..SpineQueue::default()
                },
            ],
            started_ns: 1_000_000_000,
            flow_events: Vec::new(),
        };
        let mode = &super::super::modes()[1];
        let row = ModeReport::new(mode, &run, 650, None);
        assert_eq!(row.mode, "flowlet");
        assert!(!row.telemetry);
        assert_eq!((row.sent, row.received, row.dropped), (100, 90, 7));
        assert_eq!((row.link_lost, row.tx_errors, row.unaccounted), (0, 3, 0));
        assert_eq!(row.completion_ms, 2500.0);
        assert!((row.ideal_ms - 1000.0).abs() < 1e-9, "{}", row.ideal_ms);
        assert_eq!(row.sending_ms, 800.0);
        let paced = CollectiveReport {
            elapsed: Duration::from_millis(1250),
            ..run
        };
        assert_eq!(
            ModeReport::new(mode, &paced, 650, None).ideal_ms,
            1250.0,
            "sending took longer than the capacity needs"
        );
        assert_eq!(row.spine_share, [0.3, 0.3, 0.3, 0.1]);
        assert_eq!(row.max_queue_bytes, [1000, 0, 0, 9000]);
        assert_eq!(row.spine_dropped, [0, 0, 0, 7]);
        assert_eq!((row.flowlet_moves, row.in_message_reorders), (4, 2));
    }

    /// Floats a run really produced come back from the JSON as written
    /// (serde_json's default parser was off by an ulp on some of them).
    #[test]
    fn floats_survive_the_json() {
        let values: [f64; 5] = [
            525.8587190000001,
            498.44879199999997,
            0.2833333333333333,
            0.27708333333333335,
            0.22083333333333333,
        ];
        for value in values {
            let text = serde_json::to_string(&value).unwrap_or_default();
            let back: f64 = serde_json::from_str(&text).unwrap_or(f64::NAN);
            assert_eq!(back.to_bits(), value.to_bits(), "{text}");
        }
    }
}
