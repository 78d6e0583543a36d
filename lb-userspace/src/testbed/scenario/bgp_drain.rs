//! `bgp-drain`: the testbed run by BGP (`--routing bgp`), fabriclb on the
//! leaf following the kernel's BGP routes (no route in its config), four
//! equal spines under a steady ring all-reduce. One spine is drained twice
//! while the collective runs: its session with the leaf shut down (and
//! brought back), then graceful shutdown (RFC 8326: the session stays, its
//! routes carry the GRACEFUL_SHUTDOWN community and the leaf prefers the
//! others), and back. For each: how long the leaf's kernel took to change
//! its route (the first route or next-hop event in the leaf after the
//! command), how long until fabriclb's group had lost the spine (its
//! member count, sampled all the time), and which flows moved.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use serde::{Deserialize, Serialize};

use super::Scenario;
use super::link_down::FlowBuckets;
use super::slow_spine::{EVEN_RATES_MBIT, RANKS, ring};
use crate::testbed::frr::Routers;
use crate::testbed::{Collective, LeafMaps, PATIENCE, Queues, Routing, Testbed};

/// Messages per connection at full length: about 5.5 s of sending, room
/// for both drains and the session's return between them.
pub const MESSAGES: u32 = 1000;
/// Offered load, as a share of the four spines: 53% of the three left, so
/// that the spine ECMP gives most of the drained one's flows is not
/// overrun (its queue would drop what the drain itself does not).
const LOAD: f64 = 0.4;
/// The drained spine, and when each drain starts and ends, from the
/// senders' start (the second waits for the session's return).
const SPINE: usize = 2;
const SESSION_DOWN_AFTER: Duration = Duration::from_millis(500);
const DRAINED_FOR: Duration = Duration::from_millis(800);
const GRACEFUL_AFTER: Duration = Duration::from_millis(2800);
/// The group the leaf learns from BGP: the only one, so id 0.
const GROUP: u32 = 0;

/// Which spine is drained, and when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DrainPlan {
    /// 1-based spine.
    pub spine: usize,
    pub session_down_after: Duration,
    pub drained_for: Duration,
    pub graceful_after: Duration,
}

/// How a spine was drained.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum How {
    /// `neighbor ... shutdown` on the spine: the session goes down.
    SessionDown,
    /// `bgp graceful-shutdown` on the spine: the session stays up.
    GracefulShutdown,
}

impl How {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SessionDown => "session-down",
            Self::GracefulShutdown => "graceful-shutdown",
        }
    }
}

/// One drain's figures.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Drain {
    pub how: How,
    /// From the vtysh command to the first route or next-hop event in the
    /// leaf's kernel: BGP's and zebra's part.
    pub kernel_ms: f64,
    /// From the vtysh command to the first sample of fabriclb's group
    /// without the spine (sampled about every 0.2 ms).
    pub convergence_ms: f64,
    /// `convergence_ms - kernel_ms`: what fabriclb adds.
    pub added_ms: f64,
    /// Flows on the drained spine before.
    pub drained_flows: u64,
    /// Flows whose next hop changed when the spine left.
    pub moved_flows: u64,
    /// Flows whose next hop changed when it came back.
    pub rejoin_moved_flows: u64,
}

/// What the leaf did about the drains.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Drains {
    /// Packets sent and never received, whatever dropped them.
    pub lost: u64,
    /// The collective's flows (connection and QP).
    pub total_flows: u64,
    pub drains: Vec<Drain>,
}

/// The scenario with `messages` per connection.
pub fn bgp_drain(messages: u32) -> Scenario {
    let plan = DrainPlan {
        spine: SPINE,
        session_down_after: SESSION_DOWN_AFTER,
        drained_for: DRAINED_FOR,
        graceful_after: GRACEFUL_AFTER,
    };
    let mut scenario = ring(
        RANKS,
        "bgp-drain",
        &EVEN_RATES_MBIT,
        LOAD,
        Queues::Lossy,
        messages,
    );
    scenario.shape.routing = Routing::Bgp;
    Scenario {
        workload: format!(
            "{}; BGP: spine {SPINE}'s session down {} ms into the run for {} ms, then in \
             graceful shutdown from {} ms for as long",
            scenario.workload,
            SESSION_DOWN_AFTER.as_millis(),
            DRAINED_FOR.as_millis(),
            GRACEFUL_AFTER.as_millis(),
        ),
        drain: Some(plan),
        ..scenario
    }
}

/// Drains `plan`'s spine both ways at its times (counted from `started`)
/// and measures the leaf for `collective`'s flows.
pub fn measure(
    bed: &Testbed,
    collective: &Collective,
    plan: &DrainPlan,
    started: Instant,
) -> Result<Drains> {
    let routers = bed.routers().context("bgp-drain needs --routing bgp")?;
    let maps = LeafMaps::open(bed)?;
    let entry = maps.group(GROUP)?;
    let members = entry.member_count;
    ensure!(
        members as usize == bed.shape().spines,
        "the leaf's learned group has {members} next hops, not one per spine"
    );
    let flows = FlowBuckets::new(bed, collective, &maps, GROUP)?;
    let next_hops = || flows.next_hops(&maps);
    let ns = bed.ns(&format!("s{}", plan.spine));
    let mut drains = Vec::new();
    for (how, at) in [
        (How::SessionDown, plan.session_down_after),
        (How::GracefulShutdown, plan.graceful_after),
    ] {
        std::thread::sleep((started + at).saturating_duration_since(Instant::now()));
        let before = next_hops()?;
        let monitor = RouteMonitor::start(&bed.ns("leaf"))?;
        let issued = Instant::now();
        drain(routers, plan.spine, &ns, how, true)?;
        let gone = wait_for_members(&maps, members - 1)?;
        let kernel = monitor.first_after(issued)?;
        let down = next_hops()?;
        let left = maps.group(GROUP)?;
        let left = &left.members[..left.member_count as usize];
        let dead: Vec<u32> = entry.members[..members as usize]
            .iter()
            .copied()
            .filter(|id| !left.contains(id))
            .collect();
        std::thread::sleep(plan.drained_for.saturating_sub(issued.elapsed()));
        drain(routers, plan.spine, &ns, how, false)?;
        wait_for_members(&maps, members)?;
        let up = next_hops()?;
        let count = |f: &dyn Fn(usize) -> bool| (0..flows.len()).filter(|&i| f(i)).count() as u64;
        let (kernel_ms, convergence_ms) = (ms(kernel - issued), ms(gone - issued));
        drains.push(Drain {
            how,
            kernel_ms,
            convergence_ms,
            added_ms: convergence_ms - kernel_ms,
            drained_flows: count(&|i| dead.contains(&before[i])),
            moved_flows: count(&|i| down[i] != before[i]),
            rejoin_moved_flows: count(&|i| up[i] != down[i]),
        });
    }
    Ok(Drains {
        lost: 0,
        total_flows: flows.len() as u64,
        drains,
    })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn drain(routers: &Routers, spine: usize, ns: &str, how: How, on: bool) -> Result<()> {
    match how {
        How::SessionDown => routers.set_spine_session(spine, ns, !on),
        How::GracefulShutdown => routers.set_spine_graceful_shutdown(spine, ns, on),
    }
}

/// Samples the leaf's group until it has `members` next hops; returns when
/// it first had.
fn wait_for_members(maps: &LeafMaps, members: u32) -> Result<Instant> {
    let start = Instant::now();
    loop {
        let at = Instant::now();
        if maps.group(GROUP)?.member_count == members {
            return Ok(at);
        }
        ensure!(
            start.elapsed() < PATIENCE,
            "the leaf's group did not reach {members} next hops in {PATIENCE:?}"
        );
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// `ip monitor route nexthop` in a namespace: when each line arrived.
struct RouteMonitor {
    child: Child,
    lines: mpsc::Receiver<Instant>,
}

impl RouteMonitor {
    fn start(ns: &str) -> Result<Self> {
        let mut child = Command::new("ip")
            .args(["-n", ns, "monitor", "route", "nexthop"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("ip monitor")?;
        let stdout = child.stdout.take().context("ip monitor's output")?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                if line.is_err() || tx.send(Instant::now()).is_err() {
                    break;
                }
            }
        });
        // Subscribed before it prints anything; give it the time to be.
        std::thread::sleep(Duration::from_millis(50));
        Ok(Self { child, lines })
    }

    /// When the first line after `after` arrived.
    fn first_after(&self, after: Instant) -> Result<Instant> {
        loop {
            let at = self
                .lines
                .recv_timeout(PATIENCE)
                .context("no route event in the leaf")?;
            if at >= after {
                return Ok(at);
            }
        }
    }
}

impl Drop for RouteMonitor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
