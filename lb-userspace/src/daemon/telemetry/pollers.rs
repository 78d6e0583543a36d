//! The pollers: a thread per group with a source, each kept for as long
//! as what it polls stays the same.
//!
//! A route change or reload that touches one group restarts that group's
//! poller alone. The replacement waits for the poller it replaces to end
//! (a stop wakes it from its sleep) before it polls: threads that overlap
//! make glibc hand out new malloc arenas, and a daemon whose pollers
//! churned grew its memory with every BGP change.

use std::sync::mpsc as stop_channel;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use lb_common::route::quality_index;
use tokio::sync::mpsc;
use tracing::warn;

use super::Batch;
use crate::config::{Config, Destination, Group, GroupTelemetry, NextHopSpec};
use crate::dataplane::tables::{GroupTable, Tables};
use crate::telemetry::Source;
use crate::telemetry::counters_db::{Address, Switches};
use crate::telemetry::linux::Linux;
use crate::telemetry::remote::{Remote, Target};
use crate::telemetry::template::TargetTemplate;

/// Everything one group's poller runs with: a config that gives it the
/// same keeps it running, sockets and connections included.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Spec {
    /// The group's index in the config (and in the tables).
    pub(super) group: usize,
    name: String,
    source: GroupTelemetry,
    /// The group's next hops' interfaces, in member order.
    interfaces: Vec<String>,
    /// What each reading rates, in the order readings come: the
    /// [`quality_index`] of a next hop (class 0) or of a next hop toward
    /// one of the group's destinations.
    pub(super) paths: Vec<u32>,
    interval: Duration,
    timeout: Duration,
    /// For a `counters-db` source: where the database is.
    counters_db: Option<Address>,
}

impl Spec {
    /// A spec per group of `config` with a source.
    pub(super) fn of(config: &Config, tables: &Tables) -> Vec<Spec> {
        let interval = Duration::from_micros(config.ars_profile.sampling_interval_us.into());
        let timeout = Duration::from_millis(config.telemetry.timeout_ms.into());
        (config.groups.iter().zip(&tables.groups).enumerate())
            .filter_map(|(index, (group, table))| {
                let (source, paths) = with_destinations(group, table)?;
                let counters_db = matches!(source, GroupTelemetry::CountersDb { .. })
                    .then(|| config.telemetry.counters_db.clone())
                    .flatten();
                Some(Spec {
                    group: index,
                    name: group.name.clone(),
                    source,
                    interfaces: group
                        .next_hops
                        .iter()
                        .map(|n| n.interface.clone())
                        .collect(),
                    paths,
                    interval,
                    timeout,
                    counters_db,
                })
            })
            .collect()
    }

    /// The source this spec polls; `None` for `counters-db` without an
    /// address, which validation refuses, and for the templates of a group
    /// that learns its next hops, whose learned groups poll instead.
    fn source(&self) -> Option<Box<dyn Source>> {
        Some(match &self.source {
            GroupTelemetry::RemoteTemplate { .. } | GroupTelemetry::CountersDbTemplate { .. } => {
                return None;
            }
            GroupTelemetry::Linux => Box::new(Linux::new(self.interfaces.clone())),
            GroupTelemetry::CountersDb { ports, switches } => {
                let paths = (switches.iter().zip(ports))
                    .map(|(switch, port)| {
                        Some((
                            switch.clone().or_else(|| self.counters_db.clone())?,
                            port.clone(),
                        ))
                    })
                    .collect::<Option<Vec<_>>>()?;
                Box::new(Switches::new(paths, self.timeout))
            }
            GroupTelemetry::Remote { targets } => {
                Box::new(Remote::new(targets.clone(), self.timeout))
            }
        })
    }
}

/// Group `group`'s source with a path per next hop and destination after
/// the next hops' own, and what each reading rates. Paths on one switch
/// share its URL or connection, so one scrape or round trip per poll
/// reads every destination's queue there.
fn with_destinations(group: &Group, table: &GroupTable) -> Option<(GroupTelemetry, Vec<u32>)> {
    let source = group.telemetry.clone()?;
    let mut paths: Vec<u32> = table
        .members
        .iter()
        .map(|&id| quality_index(0, id))
        .collect();
    let device = |destination: &Destination, spec: &NextHopSpec| {
        TargetTemplate::device(
            &destination.telemetry_device,
            spec.addr.ip(),
            &spec.interface,
        )
    };
    let toward =
        (group.destinations.iter().zip(&table.classes)).flat_map(|(destination, class)| {
            (group.next_hops.iter().zip(&table.members).enumerate())
                .map(move |(slot, (spec, &id))| (destination, class.id, slot, spec, id))
        });
    let source = match source {
        GroupTelemetry::Remote { mut targets } => {
            for (destination, class, slot, spec, id) in toward {
                let url = targets[slot].url.clone();
                let device = device(destination, spec);
                targets.push(Target { url, device });
                paths.push(quality_index(class, id));
            }
            GroupTelemetry::Remote { targets }
        }
        GroupTelemetry::CountersDb {
            mut ports,
            mut switches,
        } => {
            for (destination, class, slot, spec, id) in toward {
                switches.push(switches[slot].clone());
                ports.push(device(destination, spec));
                paths.push(quality_index(class, id));
            }
            GroupTelemetry::CountersDb { ports, switches }
        }
        other => other,
    };
    Some((source, paths))
}

/// The running pollers, one per group with a source.
pub(super) struct Pollers {
    sender: mpsc::Sender<Batch>,
    running: Vec<Running>,
    /// The id the next poller started gets; batches carry it, so one from
    /// a poller since replaced is told apart.
    next_id: u64,
}

/// One poller thread and what it was started from.
struct Running {
    spec: Spec,
    id: u64,
    source: &'static str,
    /// Dropped to stop the poller: its sleep ends at once.
    _stop: stop_channel::Sender<()>,
    thread: Option<JoinHandle<()>>,
}

impl Pollers {
    pub(super) fn new(sender: mpsc::Sender<Batch>) -> Self {
        Self {
            sender,
            running: Vec::new(),
            next_id: 0,
        }
    }

    /// Runs a poller per spec: those running with the same spec stay, the
    /// others stop and new ones start. With `all`, every poller is started
    /// anew (to run with the thread's new capabilities).
    pub(super) fn follow(&mut self, specs: Vec<Spec>, all: bool) {
        let mut old = std::mem::take(&mut self.running);
        for spec in specs {
            let same = old.iter().position(|r| !all && r.spec == spec);
            if let Some(kept) = same {
                self.running.push(old.swap_remove(kept));
                continue;
            }
            let previous = old
                .iter()
                .position(|r| r.spec.name == spec.name)
                .map(|at| old.swap_remove(at));
            self.start(spec, previous);
        }
        // Groups gone: their pollers end when `old` drops their stops.
    }

    fn start(&mut self, spec: Spec, previous: Option<Running>) {
        let Some(source) = spec.source() else {
            return;
        };
        let (stop, stopped) = stop_channel::channel();
        // Wakes the previous poller now; its thread is joined by the new.
        let previous = previous.and_then(|mut p| p.thread.take());
        let id = self.next_id;
        self.next_id += 1;
        let source_name = source.name();
        let poller = Poller {
            source,
            id,
            interval: spec.interval,
            stopped,
            sender: self.sender.clone(),
        };
        let thread = std::thread::Builder::new()
            .name(format!("telemetry-{}", spec.name))
            .spawn(move || {
                if let Some(previous) = previous {
                    // A poller that panicked has nothing left to end.
                    let _ = previous.join();
                }
                poller.run()
            });
        match thread {
            Ok(thread) => self.running.push(Running {
                spec,
                id,
                source: source_name,
                _stop: stop,
                thread: Some(thread),
            }),
            Err(e) => warn!(group = %spec.name, "no telemetry poller: {e}"),
        }
    }

    /// The spec of the poller that sent batch `id`, if it still runs.
    pub(super) fn current(&self, id: u64) -> Option<&Spec> {
        self.running.iter().find(|r| r.id == id).map(|r| &r.spec)
    }

    /// Each running poller's paths ([`quality_index`]) with its source's
    /// name.
    pub(super) fn paths(&self) -> impl Iterator<Item = (u32, &'static str)> + '_ {
        self.running
            .iter()
            .flat_map(|r| r.spec.paths.iter().map(|&index| (index, r.source)))
    }
}

/// One group's source on a thread of its own.
struct Poller {
    source: Box<dyn Source>,
    id: u64,
    interval: Duration,
    /// Closed when the poller is to stop.
    stopped: stop_channel::Receiver<()>,
    sender: mpsc::Sender<Batch>,
}

impl Poller {
    fn run(mut self) {
        let mut next = Instant::now();
        loop {
            let readings = self.source.poll();
            let batch = Batch {
                poller: self.id,
                at: Instant::now(),
                readings,
            };
            // Full: the event loop is busy; this sample is dropped, the
            // next one is fresher anyway. Closed: the daemon is stopping.
            if let Err(mpsc::error::TrySendError::Closed(_)) = self.sender.try_send(batch) {
                return;
            }
            next += self.interval;
            let now = Instant::now();
            // A slow poll: start again from now rather than burst.
            next = next.max(now);
            match self.stopped.recv_timeout(next - now) {
                Err(stop_channel::RecvTimeoutError::Timeout) => {}
                _ => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, group: usize, members: &[u32], interval: Duration) -> Spec {
        Spec {
            group,
            name: name.to_string(),
            source: GroupTelemetry::Linux,
            interfaces: members
                .iter()
                .map(|m| format!("fabriclb-none{m}"))
                .collect(),
            paths: members.to_vec(),
            interval,
            timeout: Duration::from_millis(100),
            counters_db: None,
        }
    }

    fn threads(pollers: &Pollers) -> Vec<(String, std::thread::ThreadId)> {
        let thread = |r: &Running| r.thread.as_ref().expect("running").thread().id();
        let mut threads: Vec<_> = pollers
            .running
            .iter()
            .map(|r| (r.spec.name.clone(), thread(r)))
            .collect();
        threads.sort_by(|a, b| a.0.cmp(&b.0));
        threads
    }

    #[test]
    fn a_change_to_one_group_starts_that_groups_poller_alone() {
        let (sender, _batches) = mpsc::channel(CHANNEL);
        let mut pollers = Pollers::new(sender);
        let second = Duration::from_secs(1);
        pollers.follow(
            vec![spec("a", 0, &[0], second), spec("b", 1, &[1], second)],
            false,
        );
        let before = threads(&pollers);

        pollers.follow(
            vec![spec("a", 0, &[0], second), spec("b", 1, &[1, 2], second)],
            false,
        );
        let after = threads(&pollers);
        assert_eq!(after[0], before[0], "a's poller kept");
        assert_ne!(after[1].1, before[1].1, "b's poller started anew");
        let paths: Vec<_> = pollers.paths().collect();
        assert_eq!(paths.len(), 3, "{paths:?}");

        pollers.follow(
            vec![spec("a", 0, &[0], second), spec("b", 1, &[1, 2], second)],
            true,
        );
        let again = threads(&pollers);
        assert!(
            again.iter().zip(&after).all(|(a, b)| a.1 != b.1),
            "all anew"
        );

        pollers.follow(vec![spec("b", 0, &[1, 2], second)], false);
        assert_eq!(threads(&pollers).len(), 1);
    }

    /// A replaced poller sleeping out a long interval wakes and ends, and
    /// its successor polls after it, not an interval later; its batches
    /// are no longer current.
    #[test]
    fn a_replaced_poller_ends_at_once_and_its_successor_polls() {
        let (sender, mut batches) = mpsc::channel(CHANNEL);
        let mut pollers = Pollers::new(sender);
        let hour = Duration::from_secs(3600);
        pollers.follow(vec![spec("a", 0, &[0], hour)], false);
        let first = batches.blocking_recv().expect("a first batch");
        assert!(pollers.current(first.poller).is_some());

        pollers.follow(vec![spec("a", 0, &[0, 1], hour)], false);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        let second = runtime
            .block_on(async { tokio::time::timeout(Duration::from_secs(10), batches.recv()).await })
            .expect("the successor polled within 10 s, not an hour")
            .expect("a batch");
        assert_ne!(second.poller, first.poller);
        assert!(pollers.current(first.poller).is_none());
        let spec = pollers.current(second.poller).expect("current");
        assert_eq!(spec.paths, [0, 1]);
        assert_eq!(second.readings.len(), 2);
    }

    const CHANNEL: usize = 8;
}
