//! `--scenario sonic`: the leaf driven only from a Redis holding SONiC's
//! rows (`run --sonic`): the config file names the spine group and its
//! next hops and nothing else; CONFIG_DB's `SWITCH_HASH|GLOBAL` and ARS
//! tables are changed under steady collective traffic, and each change's
//! per-spine shares are measured after the daemon logged its reload.
//! Every packet sent is counted: a change must lose none.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use serde::Serialize;

use super::{Scenario, restart};
use crate::testbed::redis::{RedisServer, Scratch, command};
use crate::testbed::{
    Collective, Daemon, Leaf, LeafCounters, PATIENCE, Testbed, run_collective_with,
};

/// How long the full scenario's senders send.
pub const SECONDS: u32 = 12;

/// `ecmp_hash@` lists (`sonic-hash.yang` names).
pub const FIVE_TUPLE: &str = "SRC_IP,DST_IP,IP_PROTOCOL,L4_SRC_PORT,L4_DST_PORT";
pub const WITH_QP: &str = "SRC_IP,DST_IP,IP_PROTOCOL,L4_SRC_PORT,L4_DST_PORT,RDMA_BTH_DEST_QP";

/// The changes made in CONFIG_DB, in order, each a list of commands.
const STEPS: [(&str, &[&[&str]]); 5] = [
    (
        "ecmp_hash@ five-tuple (before start)",
        &[&["HSET", "SWITCH_HASH|GLOBAL", "ecmp_hash@", FIVE_TUPLE]],
    ),
    (
        "ecmp_hash@ with RDMA_BTH_DEST_QP",
        &[&["HSET", "SWITCH_HASH|GLOBAL", "ecmp_hash@", WITH_QP]],
    ),
    (
        "ARS per_packet_quality on s1..s4",
        &[
            &[
                "HSET",
                "ARS_PROFILE|default",
                "algorithm",
                "ewma",
                "default_ars_object",
                "ars",
            ],
            &[
                "HSET",
                "ARS_OBJECT|ars",
                "assign_mode",
                "per_packet_quality",
            ],
            &["HSET", "ARS_INTERFACE|s1", "scaling_factor", "1"],
            &["HSET", "ARS_INTERFACE|s2", "scaling_factor", "1"],
            &["HSET", "ARS_INTERFACE|s3", "scaling_factor", "1"],
            &["HSET", "ARS_INTERFACE|s4", "scaling_factor", "1"],
        ],
    ),
    (
        "ARS per_flowlet_quality",
        &[&[
            "HSET",
            "ARS_OBJECT|ars",
            "assign_mode",
            "per_flowlet_quality",
        ]],
    ),
    (
        "ARS_PROFILE deleted: the file's ecmp",
        &[&["DEL", "ARS_PROFILE|default"]],
    ),
];

/// Packets forwarded over which each step's shares are measured.
const WINDOW: u64 = 4_000;

/// The restart scenario's fabric and steady workload: 2 senders, 16 QPs
/// on one UDP source port per connection, so that the five-tuple and the
/// destination QP spread it differently.
pub fn scenario(seconds: u32) -> Scenario {
    Scenario {
        name: "sonic",
        ..restart::scenario(seconds)
    }
}

/// As the other scenarios write it: one run (driven from CONFIG_DB).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SonicReport {
    pub scenario: &'static str,
    pub modes: Vec<SonicRun>,
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

/// One change in CONFIG_DB and the data plane after it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Change {
    pub change: &'static str,
    /// The group's mode in the metrics after it.
    pub group_mode: String,
    /// Each spine's share of the bytes over the window after it.
    pub spine_shares: Vec<f64>,
    /// From the write to the daemon's `config reloaded` (0 for the first,
    /// read at start).
    pub applied_after_ms: u128,
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
    let mut config_db = server.try_conn(4)?;
    let address = format!("unix:{}", server.socket.display());
    let collective = Collective {
        leaf: Leaf::Fabriclb {
            group: String::new(),
        },
        ..scenario.collective.clone()
    };
    let mut changes = Vec::new();
    for command_args in STEPS[0].1 {
        command(&mut config_db, command_args);
    }
    let (report, ()) = run_collective_with(
        bed,
        fabriclb,
        workdir,
        &collective,
        &["--sonic", &address],
        |daemon| {
            let daemon = daemon.context("no fabriclb on the leaf")?;
            for (i, (change, commands)) in STEPS.iter().enumerate() {
                let written = Instant::now();
                if i > 0 {
                    for command_args in *commands {
                        command(&mut config_db, command_args);
                    }
                    daemon.wait_for_log("config reloaded")?;
                }
                let applied_after_ms = if i > 0 {
                    written.elapsed().as_millis()
                } else {
                    0
                };
                let (spine_shares, counters) = shares(bed, daemon)?;
                changes.push(Change {
                    change,
                    group_mode: counters.mode,
                    spine_shares,
                    applied_after_ms,
                });
            }
            Ok(())
        },
    )?;
    Ok(SonicRun {
        mode: "driven by CONFIG_DB",
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
        "sonic: {}; the leaf's hashing and mode set only in CONFIG_DB",
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
    let report = SonicReport {
        scenario: "sonic",
        modes: vec![run],
    };
    super::write_json(&report, json)
}
