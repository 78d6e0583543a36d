//! Telemetry cost on a fabric: L leaves (2, 4, 8) each steering by 4
//! spines' queues at the daemon's default 10 ms, no traffic, each source
//! in turn: `remote` (every leaf scrapes every spine's node_exporter) and
//! `counters-db` (every leaf reads every spine's COUNTERS_DB, which one
//! writer per spine fills every 10 ms, as SONiC's flex counters do). Per
//! leaf: the daemon's CPU; per spine: the CPU of what answers the leaves,
//! and its requests per second (Redis counts its commands; a scrape is one
//! request, L per 10 ms by the config).

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use fabriclb::testbed::fabric::{Fabric, FabricShape, FlexCounters, LinkRates, Sampling};
use fabriclb::testbed::{Daemon, Exporters, cpu_time};

/// Leaves per fabric, in table order.
const LEAVES: [usize; 3] = [2, 4, 8];
const SPINES: usize = 4;
/// The daemon's default sampling interval, microseconds.
const DEFAULT_SAMPLING_US: u32 = 10_000;
/// How long each figure is measured, after a second to settle.
const MEASURE: Duration = Duration::from_secs(5);

/// One row: a source at L leaves.
struct Row {
    leaves: usize,
    source: &'static str,
    /// CPU share of one core, per leaf's daemon and per spine's server.
    leaf_cpu: f64,
    spine_cpu: f64,
    /// Reads each spine answers per second: scrapes, or Redis HGETs (a
    /// leaf's poll of a spine pipelines three per destination: its
    /// queue, its sent bytes and its speed).
    spine_requests: f64,
}

pub fn section(base: &str, report: &mut String) -> Result<()> {
    let fabriclb: &Path = env!("CARGO_BIN_EXE_fabriclb").as_ref();
    let workdir = std::env::temp_dir().join(format!("{base}-telemetry-work"));
    std::fs::create_dir_all(&workdir)?;
    let mut rows = Vec::new();
    for (i, &leaves) in LEAVES.iter().enumerate() {
        let shape = FabricShape {
            leaves,
            spines: SPINES,
            hosts: 1,
            rates: LinkRates::all(1000),
            ..FabricShape::default()
        };
        let fabric = Fabric::up(&format!("{base}-t{i}"), shape)?;
        for source in ["remote", "counters-db"] {
            rows.push(
                measure(&fabric, fabriclb, &workdir, source)
                    .with_context(|| format!("{source} at {leaves} leaves"))?,
            );
        }
    }
    let _ = std::fs::remove_dir_all(&workdir);

    let _ = writeln!(
        report,
        "\n## Telemetry cost\n\n{SPINES} spines, every leaf steering by each spine's queue \
         toward every other leaf (a destination per leaf) every 10 ms, no traffic; CPU in \
         percent of one core, measured over {} s. `remote`: each leaf scrapes each spine's \
         `prometheus-node-exporter`; `counters-db`: each leaf reads each spine's COUNTERS_DB \
         (Redis over TCP, one pipelined round trip per poll), written by one reader of the \
         spine's queues per 10 ms whatever the number of leaves (SONiC's flex counters; its own \
         cost, constant in L, is left out).\n\n\
         | leaves | source | CPU per leaf (daemon) | CPU per spine (exporter or Redis) | reads per spine per s (scrapes or HGETs) |\n\
         |---:|---|---:|---:|---:|",
        MEASURE.as_secs()
    );
    for row in &rows {
        let _ = writeln!(
            report,
            "| {} | {} | {:.1}% | {:.1}% | {:.0} |",
            row.leaves,
            row.source,
            100.0 * row.leaf_cpu,
            100.0 * row.spine_cpu,
            row.spine_requests
        );
    }
    Ok(())
}

/// `source`'s cost on `fabric`: its servers, and a daemon on every leaf.
fn measure(fabric: &Fabric, fabriclb: &Path, workdir: &Path, source: &'static str) -> Result<Row> {
    let shape = fabric.shape();
    let (exporters, counters) = match source {
        "remote" => (Some(Exporters::start_fabric(fabric)?), None),
        _ => (None, Some(FlexCounters::start(fabric)?)),
    };
    let servers: Vec<u32> = match (&exporters, &counters) {
        (Some(e), _) => e.pids(),
        (_, Some(c)) => c.pids(),
        _ => Vec::new(),
    };
    let group = format!("mode = \"flowlet\"\ntelemetry = \"{source}\"");
    let daemons = (1..=shape.leaves)
        .map(|k| {
            let role = format!("l{k}");
            let sampling = Sampling {
                interval_us: DEFAULT_SAMPLING_US,
                ..Sampling::FABRIC
            };
            let config = fabric.leaf_config(k, &group, sampling);
            Daemon::start_in(&fabric.ns(&role), &role, fabriclb, workdir, &config, &[])
        })
        .collect::<Result<Vec<_>>>()?;
    std::thread::sleep(Duration::from_secs(1));
    let cpu = |pids: &[u32]| -> Result<Duration> { pids.iter().map(|&p| cpu_time(p)).sum() };
    let leaf_pids: Vec<u32> = daemons.iter().map(Daemon::pid).collect();
    let reads = || counters.as_ref().map(FlexCounters::reads).transpose();
    let (leaf_before, spine_before, reads_before) = (cpu(&leaf_pids)?, cpu(&servers)?, reads()?);
    let start = Instant::now();
    std::thread::sleep(MEASURE);
    let elapsed = start.elapsed().as_secs_f64();
    let leaf_cpu = (cpu(&leaf_pids)? - leaf_before).as_secs_f64() / elapsed / shape.leaves as f64;
    let spine_cpu = (cpu(&servers)? - spine_before).as_secs_f64() / elapsed / shape.spines as f64;
    let spine_requests = match (reads()?, reads_before) {
        (Some(after), Some(before)) => (after - before) as f64 / elapsed / shape.spines as f64,
        // A scrape per leaf per interval, by the config.
        _ => shape.leaves as f64 * 1e6 / f64::from(DEFAULT_SAMPLING_US),
    };
    for daemon in daemons {
        daemon.stop()?;
    }
    Ok(Row {
        leaves: shape.leaves,
        source,
        leaf_cpu,
        spine_cpu,
        spine_requests,
    })
}
