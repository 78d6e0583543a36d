//! `--scenario sonic`: the leaf driven only from a Redis holding SONiC's
//! rows (`run --sonic`): the config file names the spine group, which
//! follows APPL_DB's BGP routes, and nothing else; APPL_DB's
//! `ROUTE_TABLE` row (a spine withdrawn and back, as fpmsyncd rewrites it
//! when a BGP session drops) and CONFIG_DB's `SWITCH_HASH|GLOBAL` and ARS
//! tables are changed under steady collective traffic, and each change's
//! per-spine shares are measured after the daemon logged it applied.
//! Every packet sent is counted: a change must lose none.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use serde::Serialize;

use super::{Scenario, restart};
use crate::sonic::{APPL_DB, CONFIG_DB};
use crate::testbed::redis::{RedisServer, Scratch, command};
use crate::testbed::{
    Collective, Daemon, Leaf, LeafCounters, PATIENCE, Routing, Testbed, run_collective_with,
};

/// How long the full scenario's senders send.
pub const SECONDS: u32 = 20;

/// `ecmp_hash@` lists (`sonic-hash.yang` names).
pub const FIVE_TUPLE: &str = "SRC_IP,DST_IP,IP_PROTOCOL,L4_SRC_PORT,L4_DST_PORT";
pub const WITH_QP: &str = "SRC_IP,DST_IP,IP_PROTOCOL,L4_SRC_PORT,L4_DST_PORT,RDMA_BTH_DEST_QP";

/// What the daemon logs once a CONFIG_DB change, or an APPL_DB route
/// change, is in the maps.
const RELOADED: &str = "config reloaded";
const ROUTED: &str = "APPL_DB routes in the maps";

/// One change: its name, the commands that make it (database, arguments)
/// and the log line that says it applied.
struct Step {
    change: &'static str,
    commands: Vec<(i64, Vec<String>)>,
    applied: &'static str,
}

fn config_db(args: &[&str]) -> (i64, Vec<String>) {
    (CONFIG_DB, args.iter().map(|a| a.to_string()).collect())
}

/// The changes made in SONiC's Redis, in order: the first before the
/// daemon starts.
fn steps(bed: &Testbed) -> Vec<Step> {
    let spines: Vec<usize> = (1..=bed.shape().spines).collect();
    let route = |spines: &[usize]| (APPL_DB, bed.appl_db_route(spines));
    let ars_interfaces = spines.iter().map(|j| {
        let key = format!("ARS_INTERFACE|s{j}");
        config_db(&["HSET", &key, "scaling_factor", "1"])
    });
    vec![
        Step {
            change: "BGP route, ecmp_hash@ five-tuple (start)",
            commands: vec![
                route(&spines),
                config_db(&["HSET", "SWITCH_HASH|GLOBAL", "ecmp_hash@", FIVE_TUPLE]),
            ],
            applied: "",
        },
        Step {
            change: "ecmp_hash@ with RDMA_BTH_DEST_QP",
            commands: vec![config_db(&[
                "HSET",
                "SWITCH_HASH|GLOBAL",
                "ecmp_hash@",
                WITH_QP,
            ])],
            applied: RELOADED,
        },
        Step {
            change: "ROUTE_TABLE: last spine withdrawn",
            commands: vec![route(&spines[..spines.len() - 1])],
            applied: ROUTED,
        },
        Step {
            change: "ROUTE_TABLE: last spine back",
            commands: vec![route(&spines)],
            applied: ROUTED,
        },
        Step {
            change: "ARS per_packet_quality on every spine",
            commands: [
                config_db(&[
                    "HSET",
                    "ARS_PROFILE|default",
                    "algorithm",
                    "ewma",
                    "default_ars_object",
                    "ars",
                ]),
                config_db(&[
                    "HSET",
                    "ARS_OBJECT|ars",
                    "assign_mode",
                    "per_packet_quality",
                ]),
            ]
            .into_iter()
            .chain(ars_interfaces)
            .collect(),
            applied: RELOADED,
        },
        Step {
            change: "ARS per_flowlet_quality",
            commands: vec![config_db(&[
                "HSET",
                "ARS_OBJECT|ars",
                "assign_mode",
                "per_flowlet_quality",
            ])],
            applied: RELOADED,
        },
        Step {
            change: "ARS_PROFILE deleted: the file's ecmp",
            commands: vec![config_db(&["DEL", "ARS_PROFILE|default"])],
            applied: RELOADED,
        },
    ]
}

/// Packets forwarded over which each step's shares are measured.
const WINDOW: u64 = 4_000;

/// The restart scenario's fabric and steady workload: 2 senders, 16 QPs
/// on one UDP source port per connection, so that the five-tuple and the
/// destination QP spread it differently; the leaf's route over the spines
/// is APPL_DB's.
pub fn scenario(seconds: u32) -> Scenario {
    let mut scenario = Scenario {
        name: "sonic",
        ..restart::scenario(seconds)
    };
    scenario.shape.routing = Routing::AppDb;
    scenario
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SonicRun {
    pub mode: &'static str,
    pub sent: u64,
    pub received: u64,
    /// Sent and never received.
    pub lost: u64,
    /// Of `lost`, what the testbed's own links dropped.
    pub link_lost: u64,
    pub changes: Vec<Change>,
}

/// One change in CONFIG_DB or APPL_DB and the data plane after it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Change {
    pub change: &'static str,
    /// The group's mode in the metrics after it.
    pub group_mode: String,
    /// Each spine's share of the bytes over the window after it.
    pub spine_shares: Vec<f64>,
    /// From the write to the daemon's log that it applied (`config
    /// reloaded`, `APPL_DB routes in the maps`); `None` (null) for the
    /// first, read at start.
    pub applied_after_ms: Option<u128>,
}

/// Each spine's share of the bytes over the next [`WINDOW`] packets the
/// daemon forwards, and the counters at its end.
pub fn shares(bed: &Testbed, daemon: &Daemon) -> Result<(Vec<f64>, LeafCounters)> {
    let read = || LeafCounters::from_metrics(bed, &daemon.metrics()?);
    let old = daemon.metrics()?;
    let deadline = Instant::now() + PATIENCE;
    // A snapshot written after this call began: the change is in it.
    while daemon.metrics()? == old {
        ensure!(
            Instant::now() < deadline,
            "no new metrics within {PATIENCE:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let a = read()?;
    loop {
        let b = read()?;
        if b.forwarded >= a.forwarded + WINDOW {
            let bytes: Vec<u64> = a
                .spines
                .iter()
                .zip(&b.spines)
                .map(|(a, b)| b.bytes - a.bytes)
                .collect();
            let total = bytes.iter().sum::<u64>().max(1) as f64;
            return Ok((bytes.iter().map(|&b| b as f64 / total).collect(), b));
        }
        ensure!(
            Instant::now() < deadline,
            "{WINDOW} packets not forwarded within {PATIENCE:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Runs the scenario on `bed` (built with its shape) with the `fabriclb`
/// binary and a `redis-server` of its own.
pub fn measure(
    bed: &Testbed,
    fabriclb: &Path,
    workdir: &Path,
    scenario: &Scenario,
) -> Result<SonicRun> {
    let dir = Scratch::new("scenario-sonic");
    let server = RedisServer::start_with(&dir, &["--port", "0", "--notify-keyspace-events", "AKE"]);
    let mut dbs = [
        (APPL_DB, server.try_conn(APPL_DB)?),
        (CONFIG_DB, server.try_conn(CONFIG_DB)?),
    ];
    let mut write = |step: &Step| {
        for (db, args) in &step.commands {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            if let Some((_, connection)) = dbs.iter_mut().find(|(n, _)| n == db) {
                command(connection, &args);
            }
        }
    };
    let address = format!("unix:{}", server.socket.display());
    let collective = Collective {
        leaf: Leaf::Fabriclb {
            group: String::new(),
        },
        ..scenario.collective.clone()
    };
    let steps = steps(bed);
    let mut changes = Vec::new();
    write(&steps[0]);
    let (report, ()) = run_collective_with(
        bed,
        fabriclb,
        workdir,
        &collective,
        &["--sonic", &address],
        |daemon| {
            let daemon = daemon.context("no fabriclb on the leaf")?;
            for (i, step) in steps.iter().enumerate() {
                let written = Instant::now();
                if i > 0 {
                    write(step);
                    daemon.wait_for_log(step.applied)?;
                }
                let applied_after_ms = (i > 0).then(|| written.elapsed().as_millis());
                let (spine_shares, counters) = shares(bed, daemon)?;
                changes.push(Change {
                    change: step.change,
                    group_mode: counters.mode,
                    spine_shares,
                    applied_after_ms,
                });
            }
            Ok(())
        },
    )?;
    Ok(SonicRun {
        mode: "driven by SONiC's Redis",
        sent: report.sent_packets,
        received: report.received.packets,
        lost: report.sent_packets - report.received.packets,
        link_lost: report.drops.lost(),
        changes,
    })
}

/// Builds testbed `bed_name`, runs the scenario, prints the result,
/// writes it to `json` if given, tears down (also on failure and Ctrl-C).
pub fn run(bed_name: &str, json: Option<&Path>) -> Result<()> {
    let scenario = scenario(SECONDS);
    let run = super::on_own_bed(bed_name, &scenario.shape, |bed, exe, workdir| {
        measure(bed, exe, workdir, &scenario)
    })
    .context("scenario sonic")?;
    println!(
        "sonic: {}; the leaf's route, hashing and mode set only in SONiC's APPL_DB and \
         CONFIG_DB",
        scenario.workload
    );
    println!("{:<40} {:<11} spine shares", "change", "group mode");
    for change in &run.changes {
        let shares: Vec<String> = change
            .spine_shares
            .iter()
            .map(|s| format!("{:>4.0}%", s * 100.0))
            .collect();
        println!(
            "{:<40} {:<11} {}",
            change.change,
            change.group_mode,
            shares.join(" ")
        );
    }
    println!(
        "sent {}, received {}, lost {} ({} by the testbed's links)",
        run.sent, run.received, run.lost, run.link_lost
    );
    // One run, driven from SONiC's Redis.
    super::write_runs("sonic", &[run], json)
}
