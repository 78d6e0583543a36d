//! Paths read from several switches' COUNTERS_DB: a leaf whose next hops
//! each name their own switch's (the spine's queues, where a fabric's
//! congestion sits), or all of them this switch's own. One connection per
//! switch, each read with one pipelined round trip per poll, the switches
//! one after another: a Redis answers a poll in microseconds, where an
//! exporter builds a page per scrape, so L leaves reading S spines every
//! 10 ms ask each spine's Redis for 100 L small reads a second and cost
//! it next to nothing. A switch that hangs holds its group's poll up to
//! the timeout.

use std::time::Duration;

use super::{Address, CountersDb, NAME};
use crate::telemetry::{Reading, Source, TelemetryError};

/// The paths of one group, by switch.
pub struct Switches {
    /// Each switch's source and the paths (indices) it reads, in order.
    switches: Vec<(CountersDb, Vec<usize>)>,
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
        Self {
            switches: by_switch
                .into_iter()
                .map(|(address, ports, indices)| {
                    (CountersDb::new(address, ports, timeout), indices)
                })
                .collect(),
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
        for (switch, indices) in &mut self.switches {
            for (&index, reading) in indices.iter().zip(switch.poll()) {
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
