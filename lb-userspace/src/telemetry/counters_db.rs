//! The `counters-db` source: a SONiC switch's own egress queues, read from
//! COUNTERS_DB (Redis database 2) where syncd's flex counter thread writes
//! them.
//!
//! Per path (one SONiC port name each): queued bytes are the sum of
//! `SAI_QUEUE_STAT_CURR_OCCUPANCY_BYTES` over the port's unicast queues,
//! sent bytes are the port row's `SAI_PORT_STAT_IF_OUT_OCTETS`. Which rows
//! those are comes from the name maps (`COUNTERS_PORT_NAME_MAP`,
//! `COUNTERS_QUEUE_NAME_MAP`, `COUNTERS_QUEUE_TYPE_MAP`); see `rows` for
//! the layout and the choices. The port's operational speed is STATE_DB's
//! `PORT_TABLE|<port>` `speed` (Mbit/s, as portsorch writes it), read in
//! the same round trip: a port that runs slower than its peers (a lane
//! down, a breakout, auto-negotiation) counts at its speed from the first
//! sample, before a busy interval could measure it.
//!
//! Cost: the daemon polls every 10 ms, so a poll is one pipelined round
//! trip (an `HGET` per port row, per queue row and per port's speed, and
//! a `SELECT` to STATE_DB and back), two when the name maps are read as
//! well, three with a (re)connect's `SELECT`. The maps change
//! rarely, so they are cached and read again only after a reconnect, or
//! when a lookup missed (a port or queue the maps do not list, a row they
//! point to that is gone), at most once per `MISS_RELOAD_INTERVAL`.
//!
//! The whole poll runs under one deadline, `timeout` from its start; see
//! `wire` for why the socket is the source's own.

mod address;
mod rows;
mod switches;
mod wire;

use std::time::{Duration, Instant};

use redis::Value;

pub use address::Address;
use rows::{Bad, NameMaps, PortRows};
pub use switches::Switches;
use wire::{Batch, Failure, Wire, selected};

use super::{Reading, Source, TelemetryError};
use crate::sonic::{COUNTERS_DB, STATE_DB};

/// The source's name in config and logs.
const NAME: &str = "counters-db";

/// How often a missing port, queue or row may trigger reading the name
/// maps again. Without a bound, one port that is absent for good would add
/// three `HGETALL`s of maps with thousands of entries to every 10 ms poll
/// on the switch's shared Redis; a second is nothing next to how rarely
/// ports appear.
const MISS_RELOAD_INTERVAL: Duration = Duration::from_secs(1);

/// The longest `timeout` taken as given: `Instant + Duration` panics past
/// what the clock can hold, and no poll should wait an hour anyway.
const MAX_TIMEOUT: Duration = Duration::from_secs(3600);

/// Reads SONiC's COUNTERS_DB for one queue occupancy and one byte counter
/// per path.
pub struct CountersDb {
    address: Address,
    ports: Vec<String>,
    timeout: Duration,
    /// The connection and what was learnt over it; dropped whole on any
    /// connection failure, so a reconnect always re-reads the name maps
    /// (a restarted Redis or syncd may have new OIDs).
    session: Option<Session>,
}

impl CountersDb {
    /// A source reading `ports` (SONiC port names such as `Ethernet4`, one
    /// per path, in path order) from the Redis at `address`. Connects on
    /// the first poll, not here, so a switch whose Redis starts after the
    /// daemon still comes up. `timeout` bounds a whole poll: connecting,
    /// and every round trip of it (a TCP host name's lookup aside).
    pub fn new(address: Address, ports: Vec<String>, timeout: Duration) -> Self {
        Self {
            address,
            ports,
            timeout: timeout.min(MAX_TIMEOUT),
            session: None,
        }
    }

    fn try_poll(
        &mut self,
        deadline: Instant,
    ) -> Result<Vec<Result<Reading, TelemetryError>>, Failure> {
        let kept = self.session.take();
        let retry = kept.is_some();
        let mut session = match kept {
            Some(session) => session,
            None => Session::connect(&self.address, deadline)?,
        };
        match session.read(&self.ports, deadline) {
            Ok(results) => {
                self.session = Some(session);
                return Ok(results);
            }
            // A connection kept from an earlier poll may only be dead
            // because Redis restarted in between; one fresh connection
            // tells that apart from an outage. Not after a timeout: the
            // deadline is spent, and a stuck Redis would only get one more
            // connection queued in its backlog.
            Err(failure) if retry && !failure.timed_out => {
                tracing::debug!(address = %self.address, why = %failure.why, "counters-db: reconnecting");
            }
            Err(failure) => return Err(failure),
        }
        let mut session = Session::connect(&self.address, deadline)?;
        let results = session.read(&self.ports, deadline)?;
        self.session = Some(session);
        Ok(results)
    }
}

impl Source for CountersDb {
    fn name(&self) -> &'static str {
        NAME
    }

    fn poll(&mut self) -> Vec<Result<Reading, TelemetryError>> {
        self.poll_by(Instant::now() + self.timeout)
    }
}

impl CountersDb {
    /// [`Source::poll`], finished by `deadline`.
    fn poll_by(&mut self, deadline: Instant) -> Vec<Result<Reading, TelemetryError>> {
        // On failure the session is gone (try_poll keeps it only after a
        // good read): whatever the connection was in the middle of, its
        // replies could no longer be matched to requests.
        match self.try_poll(deadline) {
            Ok(results) => results,
            Err(failure) => unreachable(
                self.ports.len(),
                format!("{}: {}", self.address, failure.why),
            ),
        }
    }
}

/// `paths` paths unreachable, for `why`.
fn unreachable(paths: usize, why: String) -> Vec<Result<Reading, TelemetryError>> {
    (0..paths)
        .map(|_| {
            Err(TelemetryError::Unreachable {
                source_name: NAME,
                why: why.clone(),
            })
        })
        .collect()
}

/// One connection to COUNTERS_DB and the name maps read over it.
struct Session {
    wire: Wire,
    /// Per configured port, in order: the rows it reads, or why the maps
    /// could not say. Empty until the maps are first read.
    rows: Vec<Result<PortRows, Bad>>,
    loaded_at: Option<Instant>,
    /// The last poll missed something the maps point to or should list.
    stale: bool,
}

impl Session {
    fn connect(address: &Address, deadline: Instant) -> Result<Self, Failure> {
        Ok(Self {
            wire: Wire::connect(address.target(), COUNTERS_DB, deadline)?,
            rows: Vec::new(),
            loaded_at: None,
            stale: false,
        })
    }

    /// Reads every port. An `Err` is the connection's: nothing more it
    /// answers can be trusted. A server's error reply to one command is a
    /// value like any other and lands on that command's path.
    fn read(
        &mut self,
        ports: &[String],
        deadline: Instant,
    ) -> Result<Vec<Result<Reading, TelemetryError>>, Failure> {
        let due = match self.loaded_at {
            None => true,
            Some(at) => self.stale && at.elapsed() >= MISS_RELOAD_INTERVAL,
        };
        if due {
            self.load(ports, deadline)?;
        }

        let mut batch = Batch::default();
        for port in self.rows.iter().flatten() {
            batch.push(&[
                "HGET",
                &rows::counters_key(&port.port_oid),
                rows::OUT_OCTETS,
            ]);
            for oid in &port.queue_oids {
                batch.push(&["HGET", &rows::counters_key(oid), rows::OCCUPANCY]);
            }
        }
        let counters = batch.len();
        let read: Vec<&String> = (ports.iter().zip(&self.rows))
            .filter_map(|(name, port)| port.is_ok().then_some(name))
            .collect();
        let replies = if read.is_empty() {
            Vec::new()
        } else {
            batch.push_select(STATE_DB);
            for name in &read {
                batch.push(&["HGET", &rows::port_state_key(name), rows::SPEED]);
            }
            batch.push_select(COUNTERS_DB);
            self.wire.round_trip(&batch, deadline)?
        };
        // One reply per command: the counters, then STATE_DB's visit.
        let (mut rest, state) = replies.split_at(counters.min(replies.len()));
        let mut speeds: &[Value] = &[];
        if let [select, found @ .., back] = state {
            selected(STATE_DB, select)?;
            selected(COUNTERS_DB, back)?;
            speeds = found;
        }

        let mut stale = false;
        let results = (ports.iter().zip(&self.rows))
            .map(|(name, port)| {
                let result = match port {
                    Err(bad) => Err(bad.clone()),
                    Ok(port) => {
                        let (mine, after) = rest.split_at(1 + port.queue_oids.len());
                        rest = after;
                        let (speed, others) = speeds.split_first().unwrap_or((&Value::Nil, &[]));
                        speeds = others;
                        rows::reading(name, port, &mine[0], &mine[1..], speed)
                    }
                };
                result.map_err(|bad| {
                    stale |= bad.stale;
                    TelemetryError::Garbage {
                        source_name: NAME,
                        what: bad.what,
                        why: bad.why,
                    }
                })
            })
            .collect();
        self.stale = stale;
        Ok(results)
    }

    /// Reads the three name maps in one round trip and works out each
    /// port's rows.
    fn load(&mut self, ports: &[String], deadline: Instant) -> Result<(), Failure> {
        let mut batch = Batch::default();
        for map in [
            rows::PORT_NAME_MAP,
            rows::QUEUE_NAME_MAP,
            rows::QUEUE_TYPE_MAP,
        ] {
            batch.push(&["HGETALL", map]);
        }
        let replies = self.wire.round_trip(&batch, deadline)?;
        let Ok([port_map, queue_map, type_map]) = <[Value; 3]>::try_from(replies) else {
            return Err(Failure {
                why: "reply count differs from the commands sent".into(),
                timed_out: false,
            });
        };
        let maps = (|| {
            Ok::<_, Bad>(NameMaps {
                ports: rows::name_map(rows::PORT_NAME_MAP, port_map)?,
                queues: rows::name_map(rows::QUEUE_NAME_MAP, queue_map)?,
                types: rows::name_map(rows::QUEUE_TYPE_MAP, type_map)?,
            })
        })();
        self.rows = ports
            .iter()
            .map(|port| match &maps {
                Ok(maps) => rows::port_rows(port, maps),
                Err(bad) => Err(bad.clone()),
            })
            .collect();
        self.loaded_at = Some(Instant::now());
        Ok(())
    }
}
