//! Paths read from several switches' COUNTERS_DB: a leaf whose next hops
//! each name their own switch's (the spine's queues, where a fabric's
//! congestion sits), or all of them this switch's own. One connection per
//! switch, each read with one pipelined round trip per poll, every switch
//! at once on a thread of its own ([`Fanout`]): a poll over S spines costs
//! one round trip, not S, and a switch that hangs costs the others
//! nothing but blinds its own paths until it answers. A Redis answers a
//! poll in microseconds, where an exporter builds a page per scrape, so L
//! leaves reading S spines every 10 ms ask each spine's Redis for 100 L
//! small reads a second and cost it next to nothing.

use std::time::Duration;

use super::{Address, CountersDb, NAME, unreachable};
use crate::telemetry::fanout::{Fanout, Work};
use crate::telemetry::{Reading, Source, TelemetryError};

type Readings = Vec<Result<Reading, TelemetryError>>;

/// The paths of one group, by switch.
pub struct Switches {
    /// Each switch's address and the paths (indices) it reads, in order.
    switches: Vec<(Address, Vec<usize>)>,
    fanout: Fanout<Readings>,
    paths: usize,
}

impl Switches {
    /// Reads path i's port `paths[i].1` from the COUNTERS_DB at
    /// `paths[i].0`; each poll of a switch under `timeout`.
    pub fn new(paths: Vec<(Address, String)>, timeout: Duration) -> Self {
        let count = paths.len();
        let mut by_switch: Vec<(Address, Vec<String>, Vec<usize>)> = Vec::new();
        for (index, (address, port)) in paths.into_iter().enumerate() {
            match by_switch.iter_mut().find(|(a, _, _)| *a == address) {
                Some((_, ports, indices)) => {
                    ports.push(port);
                    indices.push(index);
                }
                None => by_switch.push((address, vec![port], vec![index])),
            }
        }
        let work = (by_switch.iter())
            .map(|(address, ports, _)| {
                let mut db = CountersDb::new(address.clone(), ports.clone(), timeout);
                Box::new(move |deadline| db.poll_by(deadline)) as Work<Readings>
            })
            .collect();
        Self {
            switches: (by_switch.into_iter())
                .map(|(address, _, indices)| (address, indices))
                .collect(),
            fanout: Fanout::new("counters-db", work, timeout),
            paths: count,
        }
    }
}

impl Source for Switches {
    fn name(&self) -> &'static str {
        NAME
    }

    fn poll(&mut self) -> Vec<Result<Reading, TelemetryError>> {
        let mut readings: Vec<Option<Result<Reading, TelemetryError>>> =
            (0..self.paths).map(|_| None).collect();
        for ((address, indices), polled) in self.switches.iter().zip(self.fanout.poll()) {
            let polled = polled.unwrap_or_else(|missed| {
                unreachable(indices.len(), format!("{address}: {missed}"))
            });
            for (&index, reading) in indices.iter().zip(polled) {
                readings[index] = Some(reading);
            }
        }
        readings
            .into_iter()
            .map(|reading| {
                reading.unwrap_or_else(|| {
                    Err(TelemetryError::Unreachable {
                        source_name: NAME,
                        why: "no reading".into(),
                    })
                })
            })
            .collect()
    }
}
