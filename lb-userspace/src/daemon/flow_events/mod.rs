//! Flow events (`lb_common::abi::events`): the data plane's ring read as
//! it fills, each event named by the tables, counted, logged at `[events]
//! log`'s level and handed to `fabriclb watch` clients through the
//! control socket. The daemon's own events (a next hop leaving or coming
//! back, a drain ending) join the same stream.

mod event;

use std::collections::BTreeMap;
use std::sync::Arc;

use aya::maps::{MapData, RingBuf};
use lb_common::abi::events::{EVENT_MOVE, EventConfig, FlowEvent, PathSeen};
use lb_common::limits::NO_NEXTHOP;
use lb_common::route::quality_index;
use lb_common::select::flowlet::{MODE_ECMP, flowlet_rules};
use lb_common::select::overrides::override_index;
use nix::time::{ClockId, clock_gettime};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::sync::broadcast;
use tracing::{debug, error, info, warn};

pub use event::*;

use crate::config::{EventLog, Events};
use crate::dataplane::Dataplane;
use crate::dataplane::tables::Tables;

/// How many lines a `watch` client may fall behind before it is told it
/// lost some.
pub const WATCH_BACKLOG: usize = 4096;

/// The stream `fabriclb watch` clients subscribe to: one JSON line an
/// event.
pub type Watchers = broadcast::Sender<Arc<str>>;

/// Every event's (group, event, cause) counted since the daemon started.
pub type Counts = BTreeMap<(String, String, String), u64>;

pub struct FlowEvents {
    /// `None` when the ring could not be read (said once at start).
    ring: Option<AsyncFd<RingBuf<MapData>>>,
    watchers: Watchers,
    counts: Counts,
    log: EventLog,
    /// What the data plane was last told; `None` before, or after a
    /// failed write, so that the next configure writes it again.
    configured: Option<EventConfig>,
}

impl FlowEvents {
    /// Takes the data plane's ring and tells it what `events` asks.
    pub fn start(dp: &mut Dataplane, events: &Events, watchers: Watchers) -> Self {
        let ring = dp
            .take_flow_events()
            .map_err(anyhow::Error::from)
            .and_then(|ring| {
                // SAFETY: the ring owns its map's descriptor and keeps it, the
                // same one, open until it is dropped with the `AsyncFd`.
                unsafe { AsyncFd::register_with_interest(ring, Interest::READABLE) }
                    .map_err(|e| e.into_parts().1.into())
            });
        let ring = match ring {
            Ok(ring) => Some(ring),
            Err(e) => {
                warn!("flow events cannot be read, so `fabriclb watch` shows none: {e:#}");
                None
            }
        };
        let mut flow_events = Self {
            ring,
            watchers,
            counts: Counts::new(),
            log: events.log,
            configured: None,
        };
        flow_events.configure(dp, events);
        flow_events
    }

    /// What each CPU may send, and the level events are logged at, from
    /// the config in force.
    pub fn configure(&mut self, dp: &mut Dataplane, events: &Events) {
        self.log = events.log;
        let wanted = EventConfig::new(events.rate, events.sample);
        if self.configured == Some(wanted) {
            return;
        }
        match dp.configure_events(wanted) {
            Ok(()) => self.configured = Some(wanted),
            Err(e) => {
                self.configured = None;
                warn!("flow events: {e}; the data plane keeps its former budget");
            }
        }
    }

    /// The events the data plane sent since the last call, once there
    /// are some; never without a ring.
    pub async fn next(&mut self) -> Vec<FlowEvent> {
        let Some(ring) = self.ring.as_mut() else {
            return std::future::pending().await;
        };
        loop {
            let mut guard = match ring.readable_mut().await {
                Ok(guard) => guard,
                Err(e) => {
                    error!("flow events: waiting on the ring: {e}; no more are read");
                    self.ring = None;
                    return std::future::pending().await;
                }
            };
            let mut events = Vec::new();
            let ring = guard.get_inner_mut();
            while let Some(item) = ring.next() {
                if item.len() >= size_of::<FlowEvent>() {
                    // SAFETY: the program writes whole `FlowEvent`s, plain
                    // integers; the ring's bytes need not be aligned.
                    events.push(unsafe { std::ptr::read_unaligned(item.as_ptr().cast()) });
                }
            }
            guard.clear_ready();
            if !events.is_empty() {
                return events;
            }
        }
    }

    /// Counts `event`, logs it at the configured level and hands it to
    /// the watchers.
    pub fn publish(&mut self, event: WatchEvent) {
        let key = (
            event.group.clone(),
            event.event.clone(),
            event.cause.clone(),
        );
        *self.counts.entry(key).or_default() += 1;
        match self.log {
            EventLog::Off => {}
            EventLog::Error => error!("flow event: {event}"),
            EventLog::Warn => warn!("flow event: {event}"),
            EventLog::Info => info!("flow event: {event}"),
            EventLog::Debug => debug!("flow event: {event}"),
        }
        if self.watchers.receiver_count() == 0 {
            return;
        }
        match serde_json::to_string(&WatchLine::Event(Box::new(event))) {
            Ok(line) => {
                // No watcher left since the count: nobody to tell.
                let _ = self.watchers.send(line.into());
            }
            Err(e) => debug!("flow event as JSON: {e}"),
        }
    }

    pub fn counts(&self) -> &Counts {
        &self.counts
    }
}

/// The wall clock's lead over `CLOCK_MONOTONIC`, the data plane's, in ns.
pub fn wall_clock_offset() -> i128 {
    clock_ns(ClockId::CLOCK_REALTIME) - clock_ns(ClockId::CLOCK_MONOTONIC)
}

/// The wall-clock time now, ns since the epoch.
pub fn now_unix_ns() -> u64 {
    clock_ns(ClockId::CLOCK_REALTIME).max(0) as u64
}

fn clock_ns(clock: ClockId) -> i128 {
    clock_gettime(clock)
        .map(|t| i128::from(t.tv_sec()) * 1_000_000_000 + i128::from(t.tv_nsec()))
        .unwrap_or(0)
}

/// The data plane's `raw` event in the config's names, `offset` the wall
/// clock's lead ([`wall_clock_offset`]); `band` the telemetry band of a
/// quality index, where it has one. `None` for a group the tables no
/// longer hold (a reload between the event and its reading).
pub fn describe(
    raw: &FlowEvent,
    tables: &Tables,
    band: impl Fn(u32) -> Option<u32>,
    offset: i128,
) -> Option<WatchEvent> {
    let group = tables.groups.iter().find(|g| g.id == raw.group)?;
    // Loads are what a choice weighs: an ECMP group's are not kept.
    let weighs_load = flowlet_rules(group.entry.mode, group.entry.draining) != MODE_ECMP;
    let end = |seen: &PathSeen| {
        let slot = group.members.iter().position(|&id| id == seen.nh_id)?;
        Some(PathEnd {
            quality: Some(seen.quality),
            band: band(quality_index(raw.class, seen.nh_id)),
            load_bytes: weighs_load.then_some(seen.load),
            ..PathEnd::of(&group.specs[slot])
        })
    };
    let destination = (raw.class != 0)
        .then(|| group.classes.iter().find(|c| c.id == raw.class))
        .flatten()
        .map(|c| c.name.clone());
    let override_name = (raw.override_index != NO_NEXTHOP)
        .then(|| {
            (0u32..).zip(&group.overrides).find_map(|(i, (name, _))| {
                (override_index(group.id, group.entry.override_half, i) == raw.override_index)
                    .then(|| name.clone())
            })
        })
        .flatten();
    Some(WatchEvent {
        time_unix_ns: (i128::from(raw.time_ns) + offset).max(0) as u64,
        event: kind_name(raw.kind).into(),
        cause: cause_name(raw.cause).into(),
        reason: None,
        group: group.name.clone(),
        destination,
        flow: Some(Flow::of(&raw.flow)),
        from: end(&raw.from),
        to: end(&raw.to),
        gap_us: (raw.kind == EVENT_MOVE).then_some(raw.gap_ns / 1000),
        override_name,
        cpu: Some(raw.cpu),
    })
}

#[cfg(test)]
mod tests;
