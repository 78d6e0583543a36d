//! The spines' shaped queues during a run: what each TBF dropped, sent and
//! the most it held, sampled every [`POLL`] over netlink from inside each
//! spine's namespace, through the product's [`StatsSocket`] (the one the
//! `linux` telemetry source reads). A `tc` process per sample would cost a
//! core at this rate on a small machine and disturb the traffic it
//! measures.

use std::fs::File;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use nix::sched::{CloneFlags, setns};

use super::Testbed;
use super::fabric::Fabric;
use super::topology::SHAPED_DEVICE;
use crate::netlink::StatsSocket;

/// How often each spine's queue is sampled.
pub const POLL: Duration = Duration::from_millis(10);

/// One shaped spine port's queue over a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpineQueue {
    /// 1-based spine index.
    pub spine: usize,
    /// On a fabric, the 1-based leaf the port leads to; 0 on the
    /// single-leaf testbed, whose spines have one shaped port.
    pub leaf: usize,
    /// Packets the TBF dropped since the watch began.
    pub drops: u64,
    /// The largest backlog sampled, in bytes.
    pub max_backlog_bytes: u64,
    /// The latest backlog sampled, in bytes.
    pub backlog_bytes: u64,
    /// Bytes the TBF sent since the watch began.
    pub sent_bytes: u64,
}

/// `[spine][leaf]`: `field` of each port of a fabric of `spines` and
/// `leaves` among `ports` (0 for a port not among them).
pub fn per_port(
    ports: &[SpineQueue],
    spines: usize,
    leaves: usize,
    field: fn(&SpineQueue) -> u64,
) -> Vec<Vec<u64>> {
    (1..=spines)
        .map(|j| {
            (1..=leaves)
                .map(|k| {
                    (ports.iter())
                        .find(|q| q.spine == j && q.leaf == k)
                        .map_or(0, field)
                })
                .collect()
        })
        .collect()
}

/// A shaped port to watch: the spine's namespace and the port's device.
struct Port {
    queue: SpineQueue,
    ns: String,
    device: String,
}

/// Samples the queues of every shaped spine until stopped.
pub struct QueueWatch {
    stop: Arc<AtomicBool>,
    state: Arc<Mutex<Vec<SpineQueue>>>,
    threads: Vec<JoinHandle<Result<()>>>,
}

impl QueueWatch {
    /// Starts one sampling thread per shaped spine of `bed`, and returns
    /// once each has taken its first sample (the baseline its drops count
    /// from).
    pub fn start(bed: &Testbed) -> Result<Self> {
        let ports = (1..=bed.shape().spines)
            .filter(|&j| bed.shape().spine_rate_mbit(j).is_some())
            .map(|spine| Port {
                queue: SpineQueue {
                    spine,
                    ..SpineQueue::default()
                },
                ns: bed.ns(&format!("s{spine}")),
                device: SHAPED_DEVICE.to_owned(),
            });
        Self::start_on(ports.collect())
    }

    /// [`Self::start`] for every shaped spine port of `fabric`.
    pub fn start_fabric(fabric: &Fabric) -> Result<Self> {
        let shape = fabric.shape();
        let ports = (1..=shape.spines)
            .flat_map(|spine| (1..=shape.leaves).map(move |leaf| (spine, leaf)))
            .filter(|&(spine, leaf)| shape.rates.rate(spine, leaf).is_some())
            .map(|(spine, leaf)| Port {
                queue: SpineQueue {
                    spine,
                    leaf,
                    ..SpineQueue::default()
                },
                ns: fabric.ns(&format!("s{spine}")),
                device: format!("l{leaf}"),
            });
        Self::start_on(ports.collect())
    }

    /// A thread per port, each in its spine's namespace.
    fn start_on(ports: Vec<Port>) -> Result<Self> {
        let state = Arc::new(Mutex::new(
            ports.iter().map(|p| p.queue).collect::<Vec<_>>(),
        ));
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        let mut ready = Vec::new();
        for (slot, port) in ports.into_iter().enumerate() {
            let Port { ns, device, .. } = port;
            let netns =
                File::open(format!("/run/netns/{ns}")).with_context(|| format!("opening {ns}"))?;
            let (state, stop) = (state.clone(), stop.clone());
            let (tx, rx) = std::sync::mpsc::channel();
            ready.push(rx);
            threads.push(std::thread::spawn(move || {
                setns(&netns, CloneFlags::CLONE_NEWNET).context("setns")?;
                sample(slot, &device, &state, &stop, move || {
                    let _ = tx.send(());
                })
                .with_context(|| format!("sampling {ns}'s {device} queue"))
            }));
        }
        let mut watch = Self {
            stop,
            state,
            threads,
        };
        for rx in ready {
            if rx.recv().is_err() {
                // The thread ended before its first sample: its error says why.
                watch.stop.store(true, Ordering::Relaxed);
                return Err(watch.join().err().unwrap_or_else(|| anyhow!("no sample")));
            }
        }
        Ok(watch)
    }

    /// The queues as sampled so far.
    pub fn current(&self) -> Vec<SpineQueue> {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Stops sampling; the queues over the whole watch.
    pub fn stop(mut self) -> Result<Vec<SpineQueue>> {
        self.stop.store(true, Ordering::Relaxed);
        self.join()?;
        Ok(self.current())
    }

    fn join(&mut self) -> Result<()> {
        for thread in self.threads.drain(..) {
            thread
                .join()
                .map_err(|_| anyhow!("queue sampling thread panicked"))??;
        }
        Ok(())
    }
}

impl Drop for QueueWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.join();
    }
}

/// Samples the TBF of this namespace's `device` into `state[slot]` until
/// `stop`, calling `started` after the first sample.
fn sample(
    slot: usize,
    device: &str,
    state: &Mutex<Vec<SpineQueue>>,
    stop: &AtomicBool,
    started: impl FnOnce(),
) -> Result<()> {
    let mut socket = StatsSocket::open()?;
    let index = socket.ifindex(device)?;
    let mut read = || -> Result<(u64, u64, u64)> {
        socket
            .qdiscs()?
            .into_iter()
            .find(|q| q.ifindex == index && q.kind == "tbf")
            .map(|q| (q.drops, q.backlog_bytes, q.sent_bytes))
            .with_context(|| format!("no TBF on {device}"))
    };
    let (first_drops, _, first_bytes) = read()?;
    started();
    loop {
        let done = stop.load(Ordering::Relaxed);
        let (drops, backlog, bytes) = read()?;
        {
            let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
            let queue = &mut state[slot];
            queue.drops = drops.saturating_sub(first_drops);
            queue.max_backlog_bytes = queue.max_backlog_bytes.max(backlog);
            queue.backlog_bytes = backlog;
            queue.sent_bytes = bytes.saturating_sub(first_bytes);
        }
        if done {
            return Ok(());
        }
        std::thread::sleep(POLL);
    }
}
