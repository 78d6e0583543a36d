//! Path quality from telemetry: one poller thread per group with a
//! source, its readings turned into bands (`lb_common::select::quality`)
//! and the bands into the data plane's path quality.
//!
//! A poller blocks on its source (a socket, an HTTP scrape), never the
//! event loop: it sends what it read over a bounded channel and drops a
//! batch rather than wait, so a slow source cannot stall reloads or link
//! handling. A path with no good reading for `stale_after_ms` falls back
//! to the default quality; each path logs when it starts failing and when
//! it recovers, not on every poll.

mod pollers;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use lb_common::route::{quality_index, quality_path};
use lb_common::select::flowlet::PATH_QUALITY_DEFAULT;
use lb_common::select::quality::rate::{CounterRate, Poll};
use lb_common::select::quality::{Measures, PathQuality, Profile, row_reference};
use tokio::sync::mpsc;
use tracing::{info, warn};

use crate::config::Config;
use crate::dataplane::tables::Tables;
use crate::telemetry::{Reading, TelemetryError};
use pollers::{Pollers, Spec};

/// Batches a poller may have in flight before it drops the newest.
const CHANNEL_DEPTH: usize = 64;

/// What one poll of one group's source read.
pub(super) struct Batch {
    /// The poller that sent it; batches of one since replaced are
    /// ignored.
    poller: u64,
    at: Instant,
    readings: Vec<Result<Reading, TelemetryError>>,
}

/// One path's telemetry state.
#[derive(Clone, Debug)]
pub(super) struct PathState {
    pub(super) source: &'static str,
    pub(super) quality: PathQuality,
    pub(super) queued_bytes: u64,
    pub(super) last_good: Option<Instant>,
    /// The transmit counter's changes, for the rate.
    tx: CounterRate,
    pub(super) errors: u64,
    /// Whether its reads are failing (logged once per spell).
    failing: bool,
    pub(super) stale: bool,
}

impl PathState {
    fn new(source: &'static str) -> Self {
        Self {
            source,
            quality: PathQuality::default(),
            queued_bytes: 0,
            last_good: None,
            tx: CounterRate::default(),
            errors: 0,
            failing: false,
            stale: true,
        }
    }

    /// Takes a good reading of a poll that ended at `poll_end`, on a
    /// clock of microseconds since `started`; `shared`: of a destination's
    /// row, a queue other leaves fill too.
    fn take(
        &mut self,
        reading: Reading,
        poll_end: Instant,
        started: Instant,
        judge: &Judge,
        shared: bool,
    ) {
        self.last_good = Some(poll_end);
        let read_at = reading.read_at.unwrap_or(poll_end);
        let at_us = read_at.saturating_duration_since(started).as_micros() as u64;
        self.stale = false;
        self.queued_bytes = reading.queued_bytes;
        let polled = reading
            .tx_bytes
            .map(|tx| self.tx.poll(at_us, tx, judge.poll_interval_us));
        let load = match polled {
            None => None,
            // A path's first reading (at start, or after it went stale)
            // only primes its transmit counter: with no rate yet its queue
            // could not be told from an endless one, and a band 7 that
            // takes seven samples to recover from would herd every new
            // flowlet onto the paths that happened to read empty.
            Some(Poll::Primed) => return,
            // No write since the counter last moved: no rate, but the queue
            // is still the best reading there is. Skipping such readings
            // held a path that went idle at its last band until the counter
            // read as idle (three periods), and 8 equal paths steered
            // ended 1.73x the mean with one at a sixth of its share.
            Some(Poll::NoWrite) => None,
            Some(Poll::Rate(rate)) => Some(rate),
        };
        self.quality.sample(
            &judge.profile,
            Measures {
                at_us,
                load,
                queued: reading.queued_bytes,
                speed: reading.speed_bytes_per_s,
                shared,
            },
        );
    }
}

/// What a path's state is judged by.
#[derive(Clone, Copy, Debug)]
struct Judge {
    profile: Profile,
    /// A path with no good reading for this long is stale.
    stale_after: Duration,
    /// How often the sources are polled: the least time a transmit counter
    /// must stand still to read as idle.
    poll_interval_us: u64,
}

impl Judge {
    fn of(config: &Config) -> Self {
        Self {
            profile: config.ars_profile.quality,
            stale_after: Duration::from_millis(config.telemetry.stale_after_ms.into()),
            poll_interval_us: config.ars_profile.sampling_interval_us.into(),
        }
    }
}

/// The pollers of one config and every path's state, by next-hop id.
pub(super) struct Telemetry {
    pollers: Pollers,
    batches: mpsc::Receiver<Batch>,
    judge: Judge,
    pub(super) paths: HashMap<u32, PathState>,
    started: Instant,
}

impl Telemetry {
    /// Starts a poller per group of `config` that has a source; `tables`
    /// gives the groups' next-hop ids.
    pub(super) fn start(config: &Config, tables: &Tables) -> Self {
        let (sender, batches) = mpsc::channel(CHANNEL_DEPTH);
        let mut telemetry = Self {
            pollers: Pollers::new(sender),
            batches,
            judge: Judge::of(config),
            paths: HashMap::new(),
            started: Instant::now(),
        };
        telemetry.follow(config, tables);
        telemetry
    }

    /// Moves to a new config: a group's poller stays when the config
    /// gives it what it runs with, others start anew. Paths keep their
    /// state while they keep their next-hop id and source.
    pub(super) fn follow(&mut self, config: &Config, tables: &Tables) {
        self.move_to(config, tables, false);
    }

    /// [`Self::follow`], every poller started anew.
    pub(super) fn restart(&mut self, config: &Config, tables: &Tables) {
        self.move_to(config, tables, true);
    }

    fn move_to(&mut self, config: &Config, tables: &Tables, all: bool) {
        self.judge = Judge::of(config);
        self.pollers.follow(Spec::of(config, tables), all);
        let mut old = std::mem::take(&mut self.paths);
        self.paths = (self.pollers.paths())
            .map(|(id, source)| {
                let kept = old.remove(&id).filter(|o| o.source == source);
                (id, kept.unwrap_or_else(|| PathState::new(source)))
            })
            .collect();
    }

    /// The next batch; pends forever when no group has a source.
    pub(super) async fn next(&mut self) -> Batch {
        loop {
            // The channel never closes: `self.pollers` holds a sender.
            if let Some(batch) = self.batches.recv().await {
                return batch;
            }
        }
    }

    /// Takes `batch` into the paths' state. Returns the qualities that
    /// now differ from `tables`', as (next-hop id, quality).
    pub(super) fn apply(&mut self, batch: Batch, tables: &Tables) -> Vec<(u32, u32)> {
        let Some(spec) = self.pollers.current(batch.poller) else {
            return Vec::new();
        };
        let Some(name) = tables.groups.get(spec.group).map(|g| &g.name) else {
            return Vec::new();
        };
        for (&index, reading) in spec.paths.iter().zip(batch.readings) {
            let Some(path) = self.paths.get_mut(&index) else {
                continue;
            };
            let label = || path_label(tables, spec.group, index);
            match reading {
                Ok(reading) => {
                    if std::mem::take(&mut path.failing) {
                        info!(group = %name, next_hop = %label(), "telemetry recovered");
                    }
                    let shared = quality_path(index).0 != 0;
                    path.take(reading, batch.at, self.started, &self.judge, shared);
                }
                Err(e) => {
                    path.errors += 1;
                    // Once per spell of failures, whatever each says (a
                    // dead exporter answers "reset", then "refused").
                    if !path.failing {
                        warn!(group = %name, next_hop = %label(), "telemetry: {e}");
                        path.failing = true;
                    }
                }
            }
        }
        self.expire(batch.at, tables)
    }

    /// Falls back to the default quality for paths with no good reading
    /// for `stale_after`. Returns the qualities that now differ from
    /// `tables`'.
    pub(super) fn expire(&mut self, now: Instant, tables: &Tables) -> Vec<(u32, u32)> {
        for (&index, path) in &mut self.paths {
            let since = path.last_good.unwrap_or(self.started);
            if !path.stale && now.saturating_duration_since(since) > self.judge.stale_after {
                warn!(
                    next_hop = %index_label(tables, index),
                    source = path.source,
                    "telemetry stale for {:?}: default quality until it answers",
                    self.judge.stale_after
                );
                path.stale = true;
                path.quality = PathQuality::default();
                path.tx = CounterRate::default();
            }
        }
        self.changes(tables)
    }

    /// Each path ([`quality_index`]) whose quality in `tables` differs
    /// from what its telemetry says (the default for those without). A
    /// path's quality is scaled against the fast paths of its row
    /// ([`row_reference`]): the group's next hops, or the group's next
    /// hops toward one destination.
    pub(super) fn changes(&self, tables: &Tables) -> Vec<(u32, u32)> {
        let mut changes = Vec::new();
        for group in &tables.groups {
            for class in group.class_ids() {
                let row = || group.members.iter().map(|&id| quality_index(class, id));
                let mut capacities: Vec<u64> = row()
                    .filter_map(|index| self.paths.get(&index)?.quality.capacity())
                    .collect();
                let fastest = row_reference(&mut capacities);
                for index in row() {
                    let quality = self
                        .paths
                        .get(&index)
                        .map_or(PATH_QUALITY_DEFAULT, |p| p.quality.scaled_quality(fastest));
                    if tables.quality.get(index as usize) != Some(&quality) {
                        changes.push((index, quality));
                    }
                }
            }
        }
        changes
    }

    /// Seconds since path `index`'s last good reading (since start if
    /// none).
    pub(super) fn age(&self, index: u32, now: Instant) -> Option<f64> {
        let path = self.paths.get(&index)?;
        let since = path.last_good.unwrap_or(self.started);
        Some(now.saturating_duration_since(since).as_secs_f64())
    }
}

/// Path `index` of group `group`: its next hop as configured, and the
/// destination toward which it is rated if any (`s1 198.18.1.2 toward
/// leaf3`).
fn path_label(tables: &Tables, group: usize, index: u32) -> String {
    let group = &tables.groups[group];
    let (class, id) = quality_path(index);
    let next_hop = (group.members.iter().position(|&m| m == id))
        .map_or_else(|| id.to_string(), |slot| group.specs[slot].to_string());
    match group.classes.iter().find(|c| c.id == class) {
        Some(destination) => format!("{next_hop} toward {}", destination.name),
        None => next_hop,
    }
}

fn index_label(tables: &Tables, index: u32) -> String {
    let (_, id) = quality_path(index);
    tables
        .groups
        .iter()
        .enumerate()
        .find(|(_, g)| g.members.contains(&id))
        .map_or_else(|| index.to_string(), |(i, _)| path_label(tables, i, index))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ArsProfile;

    fn judge() -> Judge {
        Judge {
            profile: ArsProfile::default().quality,
            stale_after: Duration::from_millis(100),
            poll_interval_us: 10_000,
        }
    }

    fn reading(queued_bytes: u64, tx: u64) -> Reading {
        Reading {
            queued_bytes,
            tx_bytes: Some(tx),
            speed_bytes_per_s: None,
            read_at: None,
        }
    }

    fn micros(us: u64) -> Duration {
        Duration::from_micros(us)
    }

    /// `reading` of a poll that ended `at_us` after `start`.
    fn take(path: &mut PathState, start: Instant, reading: Reading, at_us: u64) {
        path.take(reading, start + micros(at_us), start, &judge(), false);
    }

    /// A switch's counters written every 20 ms, read every 10: a read that
    /// finds the previous write gives no rate, but its queue is sampled;
    /// the counter's move is rated over the time since it last moved.
    #[test]
    fn a_reading_of_the_same_write_gives_no_rate() {
        let start = Instant::now();
        let mut path = PathState::new("counters-db");
        take(&mut path, start, reading(0, 1_000), 0);
        assert_eq!(path.quality.sampled_at_us, None, "primed only");
        take(&mut path, start, reading(5_000, 3_000), 20_000);
        assert_eq!(path.quality.past_load, Some(100_000));
        take(&mut path, start, reading(0, 3_000), 30_000);
        assert_eq!(path.quality.sampled_at_us, Some(30_000), "queue sampled");
        assert_eq!(path.quality.queued, 0);
        assert_eq!(path.quality.past_load, Some(100_000), "no rate");
        take(&mut path, start, reading(6_000, 7_000), 40_000);
        // 4000 B over the 20 ms since the last change: 200 kB/s, which the
        // past load (and its peak) follows a quarter of the way.
        assert_eq!(path.quality.past_load, Some(125_000));
        assert_eq!(path.quality.peak_rate, 125_000);
        assert_eq!(path.quality.sampled_at_us, Some(40_000));
    }

    /// Polls that end 10 ms apart while the switch answered 4 ms into the
    /// first and 1 ms into the second: 9 kB sent over the 7 ms between
    /// the reads, not over the 10 ms between the polls' ends.
    #[test]
    fn a_counter_is_rated_over_when_the_switch_read_it() {
        let start = Instant::now();
        let mut path = PathState::new("remote");
        let read = |tx, at_us| Reading {
            read_at: Some(start + micros(at_us)),
            ..reading(0, tx)
        };
        take(&mut path, start, read(1_000, 4_000), 10_000);
        take(&mut path, start, read(10_000, 11_000), 20_000);
        assert_eq!(path.quality.past_load, Some(9_000 * 1_000_000 / 7_000));
        assert_eq!(path.quality.sampled_at_us, Some(11_000));
        assert_eq!(
            path.last_good,
            Some(start + micros(20_000)),
            "the poll's end"
        );
    }
}
