//! `--scenario te-override`: a traffic-engineering controller steers a
//! collective through fabriclb's override channel. The leaf runs `run
//! --sonic` against a `redis-server` of the scenario's own; the controller
//! is `configs/te-controller.sh`, the script an operator would use, writing
//! `FABRICLB_OVERRIDE_TABLE` rows with `redis-cli`. Under steady traffic it
//! pins the traffic h1 sends to one receiver onto spine 1 (and writes a
//! row the daemon must refuse), unpins it, pins it again, and then spine
//! 1's link goes down. Measured at the leaf's data plane every
//! millisecond: from the controller's start to the first packet the
//! override sent to spine 1 (`applied_ms`), and from the link going down
//! to the last packet sent to spine 1 (`fallback_ms`); per-spine shares
//! after each step; every packet sent is counted.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use serde::Serialize;

use super::link_down::{last_growth, set_link};
use super::sonic::shares;
use super::{Scenario, restart};
use crate::testbed::redis::{RedisServer, Scratch};
use crate::testbed::{
    Collective, Daemon, Leaf, LeafMaps, PATIENCE, Testbed, receiver_addr, run_collective_with,
    spine_addr,
};

/// How long the full scenario's senders send.
pub const SECONDS: u32 = 12;
/// The controller, as the repository ships it.
const CONTROLLER: &str = include_str!("../../../../configs/te-controller.sh");
/// The override's name: its row's key and its counters' label.
const PIN: &str = "h1-to-r2";
/// The pinned spine (1-based); its next hop is id 0 in a fresh daemon.
const SPINE: usize = 1;
/// Samples taken this often while a change is watched.
const SAMPLE_EVERY: Duration = Duration::from_millis(1);
/// How long after the link went down its next hop's counter is watched.
const FALLBACK_WATCH: Duration = Duration::from_millis(300);

/// The restart scenario's fabric and steady workload (2 senders in a ring,
/// 16 QPs, 4-packet messages): h1's traffic all goes to receiver 2.
pub fn scenario(seconds: u32) -> Scenario {
    Scenario {
        name: "te-override",
        ..restart::scenario(seconds)
    }
}

/// The flowlet row's gap: shorter than a QP's pause between messages
/// (16 ms here), so a pin takes each flow at its next message.
const FLOWLET_GAP_US: u32 = 2_000;

/// The rows the scenario runs: ECMP (a pin applies at once) and flowlet
/// (at a flow's next flowlet).
fn modes() -> [(&'static str, String); 2] {
    [
        ("ecmp", String::new()),
        (
            "flowlet",
            format!("mode = \"flowlet\"\nflowlet_gap_us = {FLOWLET_GAP_US}\n"),
        ),
    ]
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TeRun {
    pub mode: &'static str,
    pub sent: u64,
    pub received: u64,
    /// Sent and never received.
    pub lost: u64,
    /// Packets the leaf sent to the pinned spine after its link went down:
    /// the failover window's. `lost` within it is loss inside the window.
    pub sent_into_failover: u64,
    /// Packets received out of order within their message.
    pub in_message_reorders: u64,
    /// From the controller's pin acknowledged by Redis (the controller
    /// exited) to the first packet the override sent to the pinned spine:
    /// the first pin and the second.
    pub applied_ms: Vec<f64>,
    /// How long the controller ran for each pin (a shell and `redis-cli`
    /// started, the row written): before `applied_ms` begins.
    pub controller_ms: Vec<f64>,
    /// From the pinned spine's link going down to the last packet the
    /// leaf sent to it; `None` (null) when none was sent after it.
    pub fallback_ms: Option<f64>,
    /// Each spine's share of the bytes after each step.
    pub shares: Vec<Step>,
    /// What the daemon said of the row it refused.
    pub refused: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Step {
    pub step: &'static str,
    pub spine_shares: Vec<f64>,
}

/// The controller at `script`, writing to the Redis at `socket`.
struct Controller<'a> {
    script: &'a Path,
    socket: &'a Path,
}

impl Controller<'_> {
    /// Runs the controller with `args`; returns when its writes were
    /// acknowledged (it exited), and how long it ran.
    fn run(&self, args: &[&str]) -> Result<(Instant, f64)> {
        let started = Instant::now();
        let out = Command::new("sh")
            .arg(self.script)
            .arg("-s")
            .arg(self.socket)
            .args(args)
            .output()
            .context("running the controller")?;
        ensure!(
            out.status.success(),
            "controller {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok((Instant::now(), started.elapsed().as_secs_f64() * 1e3))
    }

    /// Pins h1's traffic to receiver 2 onto [`SPINE`].
    fn pin(&self) -> Result<(Instant, f64)> {
        self.run(&[
            "pin",
            PIN,
            &format!("dst={}/32", receiver_addr(2)),
            "ingress=h1",
            &format!("nexthop={}", spine_addr(SPINE)),
            &format!("ifname=s{SPINE}"),
        ])
    }
}

/// Milliseconds from `from` to the first sample in which the override's
/// packet counter grew; an error after [`PATIENCE`]. Writing an override
/// zeroes its counter, so a count below the last one that is not zero
/// grew from that zero.
fn first_pinned(from: Instant, counter: impl Fn() -> Result<u64>) -> Result<f64> {
    let mut last = counter()?;
    loop {
        let now = counter()?;
        if pinned_since(last, now) {
            return Ok(from.elapsed().as_secs_f64() * 1e3);
        }
        last = now;
        ensure!(
            from.elapsed() < PATIENCE,
            "no packet pinned within {PATIENCE:?}"
        );
        std::thread::sleep(SAMPLE_EVERY);
    }
}

/// Whether an override's packet counter read `now` after `last` counted a
/// packet in between: it grew, or it was zeroed and grew again.
fn pinned_since(last: u64, now: u64) -> bool {
    now > last || (now < last && now > 0)
}

/// Runs the scenario's steps on `bed` in each mode, with the `fabriclb`
/// binary and a `redis-server` of its own.
pub fn measure(
    bed: &Testbed,
    fabriclb: &Path,
    workdir: &Path,
    scenario: &Scenario,
) -> Result<Vec<TeRun>> {
    let dir = Scratch::new("scenario-te");
    let server = RedisServer::start_with(&dir, &["--port", "0", "--notify-keyspace-events", "AKE"]);
    let script = workdir.join("te-controller.sh");
    std::fs::write(&script, CONTROLLER)?;
    let controller = Controller {
        script: &script,
        socket: &server.socket,
    };
    let address = format!("unix:{}", server.socket.display());
    let mut runs = Vec::new();
    for (mode, group) in modes() {
        controller.run(&["unpin", PIN])?;
        let collective = Collective {
            leaf: Leaf::Fabriclb { group },
            ..scenario.collective.clone()
        };
        let result = run_collective_with(
            bed,
            fabriclb,
            workdir,
            &collective,
            &["--sonic", &address],
            |daemon| steps(bed, daemon.context("no fabriclb on the leaf")?, &controller),
        );
        // The next mode starts on the whole fabric, whatever happened.
        let restored = set_link(bed, SPINE, true);
        let (report, steps) = result.with_context(|| format!("mode {mode}"))?;
        restored?;
        runs.push(TeRun {
            mode,
            sent: report.sent_packets,
            received: report.received.packets,
            lost: report.sent_packets - report.received.packets,
            in_message_reorders: report.received.message_out_of_order,
            ..steps
        });
    }
    Ok(runs)
}

/// The controller's steps under traffic, and what the leaf did.
fn steps(bed: &Testbed, daemon: &Daemon, controller: &Controller) -> Result<TeRun> {
    let maps = LeafMaps::open(bed)?;
    let dead = SPINE as u32 - 1;
    let mut shares_after = Vec::new();
    let mut step = |step, daemon| -> Result<()> {
        let (spine_shares, _) = shares(bed, daemon)?;
        shares_after.push(Step { step, spine_shares });
        Ok(())
    };
    step("before", daemon)?;

    let (written, controller_ms) = controller.pin()?;
    let mut applied_ms = vec![first_pinned(written, || maps.override_packets(0))?];
    let mut controller_runs_ms = vec![controller_ms];
    // A controller's mistake: host bits in dst.
    controller.run(&[
        "pin",
        "bad-row",
        "dst=198.19.2.1/24",
        &format!("nexthop={}", spine_addr(SPINE)),
        &format!("ifname=s{SPINE}"),
    ])?;
    let said = daemon.wait_for_log("FABRICLB_OVERRIDE_TABLE:bad-row")?;
    let refused = said
        .lines()
        .rfind(|l| l.contains("bad-row"))
        .map(str::to_owned)
        .unwrap_or_default();
    step("pinned", daemon)?;

    controller.run(&["unpin", PIN])?;
    controller.run(&["unpin", "bad-row"])?;
    wait_unpinned(&maps)?;
    step("unpinned", daemon)?;

    let (written, controller_ms) = controller.pin()?;
    applied_ms.push(first_pinned(written, || maps.override_packets(0))?);
    controller_runs_ms.push(controller_ms);
    step("pinned again", daemon)?;

    let mut samples = vec![(Instant::now(), maps.packets(dead)?)];
    let down = set_link(bed, SPINE, false)?;
    while down.elapsed() < FALLBACK_WATCH {
        samples.push((Instant::now(), maps.packets(dead)?));
        std::thread::sleep(SAMPLE_EVERY);
    }
    let sent_into_failover = samples.last().map_or(0, |s| s.1) - samples[0].1;
    step("pinned spine's link down", daemon)?;
    Ok(TeRun {
        mode: "",
        sent: 0,
        received: 0,
        lost: 0,
        sent_into_failover,
        in_message_reorders: 0,
        applied_ms,
        controller_ms: controller_runs_ms,
        fallback_ms: last_growth(&samples, down),
        shares: shares_after,
        refused,
    })
}

/// Waits until group 0 has no override left.
fn wait_unpinned(maps: &LeafMaps) -> Result<()> {
    let deadline = Instant::now() + PATIENCE;
    while maps.group(0)?.override_count != 0 {
        if Instant::now() > deadline {
            bail!("the override still in the maps after {PATIENCE:?}");
        }
        std::thread::sleep(SAMPLE_EVERY);
    }
    Ok(())
}

/// Builds testbed `bed_name`, runs the scenario, prints the result,
/// writes it to `json` if given, tears down (also on failure and Ctrl-C).
pub fn run(bed_name: &str, json: Option<&Path>) -> Result<()> {
    let scenario = scenario(SECONDS);
    let runs = super::on_own_bed(bed_name, &scenario.shape, |bed, exe, workdir| {
        measure(bed, exe, workdir, &scenario)
    })
    .context("scenario te-override")?;
    println!(
        "te-override: {}; a controller pins h1's traffic to r2 onto spine {SPINE} through \
         FABRICLB_OVERRIDE_TABLE, unpins it, pins it again, then spine {SPINE}'s link goes down",
        scenario.workload
    );
    for run in &runs {
        println!("\n{} mode", run.mode);
        println!("{:<26} spine shares", "after");
        for step in &run.shares {
            let shares: Vec<String> = step
                .spine_shares
                .iter()
                .map(|s| format!("{:>4.0}%", s * 100.0))
                .collect();
            println!("{:<26} {}", step.step, shares.join(" "));
        }
        let ms = |list: &[f64]| {
            let list: Vec<String> = list.iter().map(|ms| format!("{ms:.1}")).collect();
            list.join(" and ")
        };
        println!(
            "applied {} ms after the controller's write (which took {} ms), fallback {} ms; \
             sent {}, received {}, lost {} (sent into the failover {}), in-message reorders {}",
            ms(&run.applied_ms),
            ms(&run.controller_ms),
            super::table::optional_ms(run.fallback_ms),
            run.sent,
            run.received,
            run.lost,
            run.sent_into_failover,
            run.in_message_reorders
        );
        println!("refused: {}", run.refused);
    }
    super::write_runs("te-override", &runs, json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pinned_packet_is_growth_or_growth_after_the_counter_was_zeroed() {
        assert!(pinned_since(10, 11));
        assert!(!pinned_since(10, 10));
        // Rewritten: zeroed, then a packet.
        assert!(pinned_since(2_500, 3));
        // Rewritten and nothing pinned yet.
        assert!(!pinned_since(2_500, 0));
        assert!(pinned_since(0, 1));
    }
}
