//! What a SONiC spine offers the `counters-db` source, in the fabric's
//! spines: a Redis per spine, listening on the spine's management
//! address, and, standing in for syncd's flex counters, one thread per
//! spine that writes its ports' queue occupancy and sent bytes into
//! COUNTERS_DB every [`INTERVAL`]: one reader of the spine's queues per
//! period, however many leaves read them. Port `lK` (toward leaf K) is
//! `oid:0x1000000000K` with one unicast queue, `oid:0x1500000000K`, laid
//! out as SONiC's orchagent and syncd write them. The same thread writes
//! each port's TBF rate as its operational speed into STATE_DB, as
//! portsorch writes a port's: a spine slowed to a quarter is a port that
//! runs at a quarter of its speed (a lane down, say), and says so.

use std::fs::File;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use nix::sched::{CloneFlags, setns};

use super::{Fabric, Router, mgmt_addr};
use crate::config::BYTES_PER_SEC_PER_MBIT;
use crate::netlink::StatsSocket;
use crate::sonic::{COUNTERS_DB, STATE_DB};
use crate::testbed::redis::{RedisServer, Scratch};

/// How often each spine's counters are written: what the daemons poll at
/// most.
pub const INTERVAL: Duration = Duration::from_millis(10);
/// The port each spine's Redis listens on.
pub const PORT: u16 = 6379;

/// Every spine's Redis and counter writer; stopped on drop.
pub struct FlexCounters {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<Result<()>>>,
    servers: Vec<RedisServer>,
    _dirs: Vec<Scratch>,
}

/// Where spine `j`'s COUNTERS_DB answers the leaves.
pub fn address(j: usize) -> String {
    format!("redis://{}:{PORT}", mgmt_addr(Router::Spine(j)))
}

fn port_oid(leaf: usize) -> String {
    format!("oid:0x1000000000{leaf:x}")
}

fn queue_oid(leaf: usize) -> String {
    format!("oid:0x1500000000{leaf:x}")
}

impl FlexCounters {
    /// Starts a Redis and a writer on every spine of `fabric`; returns
    /// once every spine's counters are written once.
    pub fn start(fabric: &Fabric) -> Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut counters = Self {
            stop: stop.clone(),
            threads: Vec::new(),
            servers: Vec::new(),
            _dirs: Vec::new(),
        };
        let leaves = fabric.shape().leaves;
        let mut ready = Vec::new();
        for j in 1..=fabric.shape().spines {
            let ns = fabric.ns(&format!("s{j}"));
            let dir = Scratch::new(&format!("{}-s{j}", fabric.name()));
            let bind = mgmt_addr(Router::Spine(j)).to_string();
            let port = PORT.to_string();
            let server = RedisServer::start_in(
                Some(&ns),
                &dir,
                &["--bind", &bind, "--port", &port, "--protected-mode", "no"],
            );
            let mut db = server.conn(COUNTERS_DB);
            write_maps(&mut db, leaves)?;
            let mut state = server.conn(STATE_DB);
            let netns =
                File::open(format!("/run/netns/{ns}")).with_context(|| format!("opening {ns}"))?;
            let (tx, rx) = std::sync::mpsc::channel();
            ready.push(rx);
            let stop = stop.clone();
            counters.threads.push(std::thread::spawn(move || {
                setns(&netns, CloneFlags::CLONE_NEWNET).context("setns")?;
                write_counters(&mut db, &mut state, leaves, &stop, move || {
                    let _ = tx.send(());
                })
                .with_context(|| format!("spine s{j}'s counters"))
            }));
            counters.servers.push(server);
            counters._dirs.push(dir);
        }
        for rx in ready {
            if rx.recv().is_err() {
                return Err(counters
                    .join()
                    .err()
                    .unwrap_or_else(|| anyhow!("a counter writer ended")));
            }
        }
        Ok(counters)
    }

    /// The Redis servers' process ids, in spine order.
    pub fn pids(&self) -> Vec<u32> {
        self.servers.iter().map(RedisServer::pid).collect()
    }

    /// The HGETs every spine's Redis answered so far, summed: what the
    /// leaves read (the writer only sets).
    pub fn reads(&self) -> Result<u64> {
        let mut total = 0;
        for server in &self.servers {
            let mut db = server.try_conn(0)?;
            let info: String = redis::cmd("INFO").arg("commandstats").query(&mut db)?;
            total += info
                .lines()
                .find_map(|l| l.strip_prefix("cmdstat_hget:calls="))
                .and_then(|rest| rest.split(',').next()?.parse::<u64>().ok())
                .unwrap_or(0);
        }
        Ok(total)
    }

    fn join(&mut self) -> Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            thread
                .join()
                .map_err(|_| anyhow!("counter writer panicked"))??;
        }
        Ok(())
    }
}

impl Drop for FlexCounters {
    fn drop(&mut self) {
        let _ = self.join();
    }
}

/// The name maps, once: each port toward a leaf, its one unicast queue.
fn write_maps(db: &mut redis::Connection, leaves: usize) -> Result<()> {
    let mut pipe = redis::pipe();
    for leaf in 1..=leaves {
        let port = format!("l{leaf}");
        pipe.hset("COUNTERS_PORT_NAME_MAP", &port, port_oid(leaf))
            .hset(
                "COUNTERS_QUEUE_NAME_MAP",
                format!("{port}:0"),
                queue_oid(leaf),
            )
            .hset(
                "COUNTERS_QUEUE_TYPE_MAP",
                queue_oid(leaf),
                "SAI_QUEUE_TYPE_UNICAST",
            );
    }
    pipe.query::<()>(db).context("writing the name maps")
}

/// This namespace's TBF on each `lK`: its backlog as the queue's
/// occupancy, what it sent as the port's out octets, its rate as the
/// port's speed in `state`, every [`INTERVAL`] until `stop`; `started`
/// after the first write.
fn write_counters(
    db: &mut redis::Connection,
    state: &mut redis::Connection,
    leaves: usize,
    stop: &AtomicBool,
    started: impl FnOnce(),
) -> Result<()> {
    let mut socket = StatsSocket::open()?;
    let ports: Vec<(usize, u32)> = (1..=leaves)
        .map(|leaf| Ok((leaf, socket.ifindex(&format!("l{leaf}"))?)))
        .collect::<Result<_>>()?;
    let mut started = Some(started);
    while !stop.load(Ordering::Relaxed) {
        let qdiscs = socket.qdiscs()?;
        let mut pipe = redis::pipe();
        let mut speeds = redis::pipe();
        for &(leaf, ifindex) in &ports {
            let Some(q) = qdiscs.iter().find(|q| q.ifindex == ifindex && q.is_root()) else {
                continue;
            };
            if let Some(rate) = q.rate_bytes_per_s {
                speeds.hset(
                    format!("PORT_TABLE|l{leaf}"),
                    "speed",
                    rate / BYTES_PER_SEC_PER_MBIT,
                );
            }
            pipe.hset(
                format!("COUNTERS:{}", queue_oid(leaf)),
                "SAI_QUEUE_STAT_CURR_OCCUPANCY_BYTES",
                q.backlog_bytes,
            )
            .hset(
                format!("COUNTERS:{}", port_oid(leaf)),
                "SAI_PORT_STAT_IF_OUT_OCTETS",
                q.sent_bytes,
            );
        }
        pipe.query::<()>(db).context("writing counters")?;
        speeds.query::<()>(state).context("writing speeds")?;
        if let Some(started) = started.take() {
            started();
        }
        std::thread::sleep(INTERVAL);
    }
    Ok(())
}
