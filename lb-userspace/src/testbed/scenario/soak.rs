//! `soak`: collective traffic for a long while (ten minutes by default)
//! while, in turn, everything that happens to a leaf in service happens
//! to it: an uplink flaps, a spine changes its MAC unannounced, the config
//! is rewritten (valid and invalid versions), a telemetry source dies and
//! returns, a spine's BGP session drops and returns, and, once, halfway,
//! the daemon is killed (-9) and started again. The testbed runs BGP; the
//! leaf's spine group follows the kernel's BGP routes in flowlet mode, and
//! a second group with the spines written out reads their exporters
//! (`remote`), so that a dying source has a poller to silence.
//!
//! The run is a sequence of segments, one event each, each a collective
//! of its own (a few seconds), so that what an event cost is counted, not
//! estimated: per segment what was sent and received, what the spines'
//! queues, the testbed's links, the leaf's transmit path and the spines'
//! ports dropped as addressed to another MAC (`unaccounted`: what none of them explains),
//! the bound the event's loss is held to, the daemon's log lines, and its
//! RSS and open file descriptors.

use std::cell::RefCell;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use serde::Serialize;

use super::link_down::{busiest, last_growth, sample_until, set_link};
use super::slow_spine::{EVEN_RATES_MBIT, RANKS, ring};
use super::{Scenario, on_own_bed};
use crate::testbed::bpffs::Bpffs;
use crate::testbed::drops::{WrongMac, unaccounted};
use crate::testbed::topology::spine_addr;
use crate::testbed::{
    Collective, Daemon, Exporters, Leaf, LeafCounters, LeafMaps, Queues, Routing, Testbed,
    leaf_ifindex, run_collective_with,
};

/// The soak's length at full length, seconds.
pub const SECONDS: u64 = 600;
/// Messages per connection in a segment: about 3.5 s at [`LOAD`].
const SEGMENT_MESSAGES: u32 = 400;
/// Offered load, as a share of the four spines: what three carry without
/// a queue while one is away.
const LOAD: f64 = 0.4;
/// When, in its segment, an event starts, and when what it undid comes
/// back.
const EVENT_AT: Duration = Duration::from_millis(1000);
const BACK_AFTER: Duration = Duration::from_millis(1000);
/// The spines each event is done to.
const FLAPPED: usize = 2;
const RENAMED: usize = 3;
const SILENCED: usize = 1;
const DRAINED: usize = 4;
/// A flap's next hop watched (its packet counter, every millisecond)
/// from this long before its link goes to this long after.
const WATCHED_BEFORE: Duration = Duration::from_millis(300);
const WATCHED_AFTER: Duration = Duration::from_millis(100);
/// The time the product follows a link or a session in, and a MAC.
const LINK_WITHIN: Duration = Duration::from_millis(10);
const MAC_WITHIN: Duration = Duration::from_millis(100);
/// The MACs spine [`RENAMED`] takes in turn.
const MACS: [&str; 2] = ["02:42:00:00:5a:01", "02:42:00:00:5a:02"];
/// The telemetry group's route: a documentation prefix no traffic uses.
const WATCH_PREFIX: &str = "198.51.100.0/24";

/// What happens in a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Event {
    /// Nothing: the baseline.
    Quiet,
    /// Spine [`FLAPPED`]'s end of its link down, and up again.
    LinkFlap,
    /// Spine [`RENAMED`] takes a new MAC on its link, announcing nothing.
    MacChange,
    /// The config rewritten four times: valid, invalid, valid, invalid.
    Reloads,
    /// Spine [`SILENCED`]'s exporter killed, and started again.
    TelemetryLoss,
    /// Spine [`DRAINED`]'s BGP session with the leaf shut, and back.
    BgpSession,
    /// The daemon killed (-9) and started again at once.
    Restart,
}

/// The events of one round, in order; the restart only in the round that
/// passes half the soak.
const ROUND: [Event; 6] = [
    Event::Quiet,
    Event::LinkFlap,
    Event::MacChange,
    Event::Reloads,
    Event::TelemetryLoss,
    Event::BgpSession,
];

/// What a stretch of the soak sent and received, and what each counter
/// says was dropped.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Counts {
    pub sent: u64,
    pub received: u64,
    /// What the spines' queues dropped.
    pub dropped: u64,
    /// What the testbed's links dropped on the way.
    pub link_lost: u64,
    /// What the leaf redirected and its kernel failed to send.
    pub tx_errors: u64,
    /// The collective's packets the spines dropped as addressed to
    /// another MAC.
    pub wrong_mac: u64,
}

impl Counts {
    /// What none of the counters explains.
    pub fn unaccounted(&self) -> i64 {
        unaccounted(
            self.sent,
            self.received,
            self.dropped + self.link_lost + self.tx_errors + self.wrong_mac,
        )
    }
}

impl std::iter::Sum for Counts {
    fn sum<I: Iterator<Item = Self>>(iter: I) -> Self {
        iter.fold(Self::default(), |a, b| Self {
            sent: a.sent + b.sent,
            received: a.received + b.received,
            dropped: a.dropped + b.dropped,
            link_lost: a.link_lost + b.link_lost,
            tx_errors: a.tx_errors + b.tx_errors,
            wrong_mac: a.wrong_mac + b.wrong_mac,
        })
    }
}

/// One segment's counts.
#[derive(Clone, Debug, Serialize)]
pub struct Segment {
    pub event: Event,
    /// When it started, seconds into the soak.
    pub at_s: f64,
    #[serde(flatten)]
    pub counts: Counts,
    /// Sent and not received: what the event cost.
    pub lost: u64,
    /// For a flap: from the carrier change to the last millisecond in
    /// which the leaf still sent to the flapped spine; null when it sent
    /// nothing after the change, or for other events.
    pub failover_ms: Option<f64>,
    /// For a flap: the most the leaf sent to the flapped spine in any
    /// 10 ms before the change (the collective sends in rounds, so this
    /// may be several times the mean).
    pub busiest_10ms: Option<u64>,
    /// What the event may cost: what its spine carries in the time the
    /// product promises to follow it in (10 ms for a link, at its busiest
    /// if more than at its mean; 100 ms for a MAC), 0 where nothing should
    /// be lost.
    pub bound: u64,
    pub unaccounted: i64,
    /// Lines the daemon logged during it.
    pub log_lines: usize,
    /// What the leaf sent to each spine during it (the spine group's
    /// counters); `None` (null) for a spine that joined or left the group
    /// meanwhile, whose counters do not span the segment.
    pub spine_packets: Vec<Option<u64>>,
    /// The longest sender's first to last packet, seconds.
    pub sending_s: f64,
    /// The daemon's resident memory (kB), open descriptors and threads at
    /// the segment's end.
    pub rss_kb: u64,
    pub fds: usize,
    pub threads: usize,
}

/// One daemon's life in the soak: its memory and descriptors when it
/// started and at its end.
#[derive(Clone, Debug, Serialize)]
pub struct DaemonLife {
    pub seconds: f64,
    pub rss_kb_start: u64,
    pub rss_kb_end: u64,
    pub fds_start: usize,
    pub fds_end: usize,
}

/// The soak, as `--json` writes it.
#[derive(Clone, Debug, Serialize)]
pub struct SoakRun {
    pub mode: &'static str,
    pub seconds: f64,
    #[serde(flatten)]
    pub counts: Counts,
    pub unaccounted: i64,
    /// Segments whose loss went past their bound.
    pub over_bound: usize,
    /// The longest-lived daemon's RSS and descriptors at its start and
    /// end.
    pub rss_kb_start: u64,
    pub rss_kb_end: u64,
    pub fds_start: usize,
    pub fds_end: usize,
    pub daemons: Vec<DaemonLife>,
    pub segments: Vec<Segment>,
}

/// The soak's shape and collective (one segment's).
pub fn scenario() -> Scenario {
    let mut scenario = ring(
        RANKS,
        "soak",
        &EVEN_RATES_MBIT,
        LOAD,
        Queues::Lossy,
        SEGMENT_MESSAGES,
    );
    scenario.shape.routing = Routing::Bgp;
    scenario.collective.leaf = Leaf::Started;
    Scenario {
        workload: format!(
            "{}, a collective per event, in turn: quiet, spine {FLAPPED}'s link down and up, \
             spine {RENAMED}'s MAC changed, four config rewrites (two invalid), spine \
             {SILENCED}'s exporter killed and restarted, spine {DRAINED}'s BGP session shut \
             and back; once, halfway, the daemon killed and restarted",
            scenario.workload
        ),
        ..scenario
    }
}

/// The leaf's config: the spine group from BGP in flowlet mode, and a
/// group with the spines written out that reads their exporters, with
/// `gap_us` as the spine group's flowlet gap (what the valid reloads
/// change).
fn config(bed: &Testbed, gap_us: u32) -> String {
    let mut text = bed.leaf_config(&format!(
        "mode = \"flowlet\"\nflowlet_gap_us = {gap_us}\ntelemetry = \"linux\""
    ));
    text.push_str("\n[[group]]\nname = \"watch\"\ntelemetry = \"remote\"\nnext_hops = [\n");
    for j in 1..=bed.shape().spines {
        let target = Exporters::target(j);
        text.push_str(&format!(
            "  {{ interface = \"s{j}\", ip = \"{}\", telemetry_url = \"{}\", telemetry_device = \"{}\" }},\n",
            spine_addr(j),
            target.url,
            target.device
        ));
    }
    text.push_str(&format!(
        "]\n\n[[route]]\nprefix = \"{WATCH_PREFIX}\"\ngroup = \"watch\"\n"
    ));
    text
}

/// What a segment holds on to: the daemon (replaced by a restart), the
/// exporters, the spines' wrong-MAC counters and the turn of the MAC.
struct Rig<'a> {
    bed: &'a Testbed,
    fabriclb: &'a Path,
    workdir: &'a Path,
    args: Vec<String>,
    daemon: RefCell<Option<Daemon>>,
    exporters: RefCell<Exporters>,
    wrong_mac: WrongMac,
    renamed: RefCell<usize>,
    lives: RefCell<Vec<DaemonLife>>,
    /// The running daemon's start: its RSS and descriptors then.
    life: RefCell<(Instant, u64, usize)>,
}

impl Rig<'_> {
    fn start_daemon(&self) -> Result<()> {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        let daemon = Daemon::start(
            self.bed,
            self.fabriclb,
            self.workdir,
            &config(self.bed, GAPS_US[0]),
            &args,
        )?;
        let (rss, fds) = usage(daemon.pid())?;
        *self.life.borrow_mut() = (Instant::now(), rss, fds);
        *self.daemon.borrow_mut() = Some(daemon);
        Ok(())
    }

    /// Closes the running daemon's life with its usage now.
    fn end_life(&self) -> Result<()> {
        let (rss, fds) = usage(self.pid()?)?;
        let (started, rss_start, fds_start) = *self.life.borrow();
        self.lives.borrow_mut().push(DaemonLife {
            seconds: started.elapsed().as_secs_f64(),
            rss_kb_start: rss_start,
            rss_kb_end: rss,
            fds_start,
            fds_end: fds,
        });
        Ok(())
    }

    fn pid(&self) -> Result<u32> {
        self.daemon
            .borrow()
            .as_ref()
            .map(Daemon::pid)
            .ok_or_else(|| anyhow!("no daemon"))
    }

    fn with_daemon<T>(&self, f: impl FnOnce(&Daemon) -> Result<T>) -> Result<T> {
        f(self.daemon.borrow().as_ref().context("no daemon")?)
    }

    /// Does `event` at its times, counted from the segment's `start`; for
    /// a flap, what the leaf sent to the spine around it.
    fn event(&self, event: Event, start: Instant) -> Result<Option<FlapWatch>> {
        let at = |offset: Duration| {
            std::thread::sleep((start + offset).saturating_duration_since(Instant::now()));
        };
        if event == Event::LinkFlap {
            let watch = self.flap(start)?;
            at(EVENT_AT + BACK_AFTER);
            set_link(self.bed, FLAPPED, true)?;
            return Ok(Some(watch));
        }
        at(EVENT_AT);
        match event {
            Event::Quiet | Event::LinkFlap => {}
            Event::MacChange => {
                let turn = {
                    let mut renamed = self.renamed.borrow_mut();
                    *renamed += 1;
                    *renamed
                };
                let mac = MACS[turn % MACS.len()];
                let ns = self.bed.ns(&format!("s{RENAMED}"));
                let set = std::process::Command::new("ip")
                    .args(["-n", &ns, "link", "set", "leaf", "address", mac])
                    .status()?;
                anyhow::ensure!(set.success(), "setting spine {RENAMED}'s MAC");
            }
            Event::Reloads => {
                for (i, step) in [GAPS_US[1], 0, GAPS_US[0], 0].into_iter().enumerate() {
                    at(EVENT_AT + RELOAD_EVERY * i as u32);
                    let text = match step {
                        0 => "[switch\nthis is no config\n".to_owned(),
                        gap => config(self.bed, gap),
                    };
                    self.with_daemon(|d| d.write_config(&text))?;
                }
            }
            Event::TelemetryLoss => {
                self.exporters.borrow_mut().kill(SILENCED)?;
                at(EVENT_AT + BACK_AFTER);
                self.exporters.borrow_mut().restart(SILENCED)?;
            }
            Event::BgpSession => {
                let routers = self.bed.routers().context("the soak runs BGP")?;
                let ns = self.bed.ns(&format!("s{DRAINED}"));
                routers.set_spine_session(DRAINED, &ns, false)?;
                at(EVENT_AT + BACK_AFTER);
                routers.set_spine_session(DRAINED, &ns, true)?;
            }
            Event::Restart => {
                self.end_life()?;
                let daemon = self.daemon.borrow_mut().take().context("no daemon")?;
                daemon.kill()?;
                self.start_daemon()?;
            }
        }
        Ok(None)
    }

    /// Takes spine [`FLAPPED`]'s link down at [`EVENT_AT`], watching what
    /// the leaf sends it from [`WATCHED_BEFORE`] that to
    /// [`WATCHED_AFTER`] the change.
    fn flap(&self, start: Instant) -> Result<FlapWatch> {
        let maps = LeafMaps::open(self.bed)?;
        let ifindex = leaf_ifindex(self.bed, &format!("s{FLAPPED}"))?;
        let ids = maps.next_hops_via(ifindex)?;
        anyhow::ensure!(
            !ids.is_empty(),
            "spine {FLAPPED} is in no group before its flap"
        );
        let counter = || ids.iter().map(|&id| maps.packets(id)).sum::<Result<u64>>();
        std::thread::sleep(
            (start + EVENT_AT - WATCHED_BEFORE).saturating_duration_since(Instant::now()),
        );
        let mut samples = Vec::new();
        sample_until(&counter, start + EVENT_AT, &mut samples)?;
        let busiest_10ms = busiest(&samples, LINK_WITHIN);
        let changed = set_link(self.bed, FLAPPED, false)?;
        sample_until(&counter, changed + WATCHED_AFTER, &mut samples)?;
        Ok(FlapWatch {
            failover_ms: last_growth(&samples, changed),
            busiest_10ms,
        })
    }

    /// The leaf's counters now, from a metrics snapshot written after
    /// this call.
    fn counters(&self) -> Result<LeafCounters> {
        let old = self.with_daemon(Daemon::metrics)?;
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let text = self.with_daemon(Daemon::metrics)?;
            if text != old || Instant::now() > deadline {
                return LeafCounters::from_metrics(self.bed, &text);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The leaf's counters once they hold still: transmit errors are
    /// counted when the kernel gives a frame up, which may be after the
    /// collective's last packet arrived.
    fn settled_counters(&self) -> Result<LeafCounters> {
        let mut last = self.counters()?;
        for _ in 0..10 {
            let now = self.counters()?;
            if now.tx_errors == last.tx_errors && now.forwarded == last.forwarded {
                return Ok(now);
            }
            last = now;
        }
        Ok(last)
    }

    /// Runs one segment with `event` in it.
    fn segment(&self, event: Event, soak_start: Instant) -> Result<Segment> {
        let at_s = soak_start.elapsed().as_secs_f64();
        let log_before = self.with_daemon(|d| Ok(d.log()?.lines().count()))?;
        let wrong_before = self.wrong_mac.dropped()?;
        let leaf_before = self.counters()?;
        let collective = Collective {
            leaf: Leaf::Started,
            ..scenario().collective
        };
        let (run, flap) = run_collective_with(
            self.bed,
            self.fabriclb,
            self.workdir,
            &collective,
            &[],
            |_| self.event(event, Instant::now()),
        )
        .with_context(|| format!("segment {event:?}"))?;
        let leaf_after = self.settled_counters()?;
        let (rss_kb, fds) = usage(self.pid()?)?;
        let threads = threads(self.pid()?)?;
        // A restarted daemon's log starts anew.
        let log_after = self.with_daemon(|d| Ok(d.log()?.lines().count()))?;
        let log_lines = match event {
            Event::Restart => log_after,
            _ => log_after.saturating_sub(log_before),
        };
        let tx_errors = leaf_after.tx_errors.saturating_sub(leaf_before.tx_errors);
        let wrong_mac = self.wrong_mac.dropped()?.saturating_sub(wrong_before);
        let counts = Counts {
            sent: run.sent_packets,
            received: run.received.packets,
            dropped: run.spine_drops(),
            link_lost: run.drops.lost_on_the_way(),
            tx_errors,
            wrong_mac,
        };
        Ok(Segment {
            event,
            at_s,
            counts,
            lost: counts.sent.saturating_sub(counts.received),
            failover_ms: flap.and_then(|f| f.failover_ms),
            busiest_10ms: flap.map(|f| f.busiest_10ms),
            bound: 0,
            unaccounted: counts.unaccounted(),
            log_lines,
            spine_packets: leaf_after
                .spines
                .iter()
                .zip(&leaf_before.spines)
                .map(|(after, before)| {
                    (after.in_group && before.in_group)
                        .then(|| after.packets.saturating_sub(before.packets))
                })
                .collect(),
            sending_s: run.elapsed.as_secs_f64(),
            rss_kb,
            fds,
            threads,
        })
    }
}

/// What the leaf sent a flapped spine around the change.
#[derive(Clone, Copy, Debug)]
struct FlapWatch {
    failover_ms: Option<f64>,
    busiest_10ms: u64,
}

/// The flowlet gaps the valid reloads switch between, µs.
const GAPS_US: [u32; 2] = [25_000, 30_000];
/// Between the reloads: more than the config watch's settle time.
const RELOAD_EVERY: Duration = Duration::from_millis(600);

/// What `segment`'s event may cost: what its spine carries in the time
/// the product follows it in ([`LINK_WITHIN`] for a link or a session,
/// [`MAC_WITHIN`] for a MAC), at the rate the round's quiet segment
/// measured (the spines are equal), or for a flap what its spine carried
/// in its busiest such stretch if that is more. The event's own segment
/// cannot give the rate: the spine leaves the group in it.
fn bound(segment: &Segment, quiet: &Segment) -> u64 {
    let (spine, within) = match segment.event {
        Event::LinkFlap => (FLAPPED, LINK_WITHIN),
        Event::MacChange => (RENAMED, MAC_WITHIN),
        Event::BgpSession => (DRAINED, LINK_WITHIN),
        Event::Quiet | Event::Reloads | Event::TelemetryLoss | Event::Restart => return 0,
    };
    // A spine still coming back (a BGP session re-established in the
    // quiet segment) is taken at the others' mean: equal spines share
    // equally.
    let known: Vec<u64> = quiet.spine_packets.iter().flatten().copied().collect();
    let mean = known.iter().sum::<u64>() / known.len().max(1) as u64;
    let carried = quiet.spine_packets[spine - 1].unwrap_or(mean);
    let at_mean =
        (carried as f64 * within.as_secs_f64() / quiet.sending_s.max(f64::EPSILON)).ceil() as u64;
    at_mean.max(segment.busiest_10ms.unwrap_or(0))
}

/// A process's threads.
fn threads(pid: u32) -> Result<usize> {
    Ok(std::fs::read_dir(format!("/proc/{pid}/task"))?.count())
}

/// A process's resident memory (kB) and open descriptors.
fn usage(pid: u32) -> Result<(u64, usize)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .with_context(|| format!("no VmRSS for pid {pid}"))?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))?.count();
    Ok((rss, fds))
}

/// Runs the soak on `bed` for about `seconds`.
pub fn measure(bed: &Testbed, fabriclb: &Path, workdir: &Path, seconds: u64) -> Result<SoakRun> {
    // Pins that outlive a killed daemon, removed (program and all) when
    // this drops.
    let bpffs = Bpffs::at(&workdir.join("bpffs"))?;
    let spines: Vec<String> = (1..=bed.shape().spines).map(|j| format!("s{j}")).collect();
    let rig = Rig {
        bed,
        fabriclb,
        workdir,
        args: bpffs.args("soak"),
        daemon: RefCell::new(None),
        exporters: RefCell::new(Exporters::start(bed)?),
        wrong_mac: WrongMac::count(bed, &spines, "leaf")?,
        renamed: RefCell::new(0),
        lives: RefCell::new(Vec::new()),
        life: RefCell::new((Instant::now(), 0, 0)),
    };
    rig.start_daemon()?;
    let start = Instant::now();
    let soak = Duration::from_secs(seconds);
    let mut segments = Vec::new();
    let mut restarted = false;
    let mut quiet = None;
    let run = |event: Event, quiet: &mut Option<Segment>| -> Result<Segment> {
        let mut segment = rig.segment(event, start)?;
        match event {
            Event::Quiet => *quiet = Some(segment.clone()),
            _ => segment.bound = quiet.as_ref().map_or(0, |q| bound(&segment, q)),
        }
        Ok(segment)
    };
    while start.elapsed() < soak {
        for event in ROUND {
            segments.push(run(event, &mut quiet)?);
        }
        if !restarted && start.elapsed() * 2 >= soak {
            segments.push(run(Event::Restart, &mut quiet)?);
            restarted = true;
        }
    }
    if !restarted {
        segments.push(run(Event::Restart, &mut quiet)?);
    }
    rig.end_life()?;
    if let Some(daemon) = rig.daemon.borrow_mut().take() {
        daemon.stop()?;
    }
    let lives = rig.lives.take();
    let longest = lives
        .iter()
        .max_by(|a, b| a.seconds.total_cmp(&b.seconds))
        .cloned()
        .context("no daemon ran")?;
    let counts: Counts = segments.iter().map(|s| s.counts).sum();
    Ok(SoakRun {
        mode: "flowlet, BGP routes, linux and remote telemetry",
        seconds: start.elapsed().as_secs_f64(),
        counts,
        unaccounted: counts.unaccounted(),
        over_bound: segments.iter().filter(|s| s.lost > s.bound).count(),
        rss_kb_start: longest.rss_kb_start,
        rss_kb_end: longest.rss_kb_end,
        fds_start: longest.fds_start,
        fds_end: longest.fds_end,
        daemons: lives,
        segments,
    })
}

/// Builds testbed `bed_name`, runs the soak for `seconds`, prints it,
/// writes it to `json` if given, tears down (also on failure and Ctrl-C).
pub fn run(bed_name: &str, seconds: u64, json: Option<&Path>) -> Result<()> {
    let scenario = scenario();
    let run = on_own_bed(bed_name, &scenario.shape, |bed, exe, workdir| {
        measure(bed, exe, workdir, seconds)
    })
    .context("scenario soak")?;
    println!("soak: {}", scenario.workload);
    println!(
        "{:<15} {:>7} {:>8} {:>8} {:>6} {:>7} {:>11} {:>9} {:>9} {:>6} {:>6} {:>11} {:>5}",
        "event",
        "at_s",
        "sent",
        "received",
        "lost",
        "bound",
        "failover_ms",
        "dropped",
        "tx_errors",
        "wrong",
        "links",
        "unaccounted",
        "log"
    );
    for s in &run.segments {
        println!(
            "{:<15} {:>7.1} {:>8} {:>8} {:>6} {:>7} {:>11} {:>9} {:>9} {:>6} {:>6} {:>11} {:>5}",
            serde_json::to_value(s.event)?.as_str().unwrap_or_default(),
            s.at_s,
            s.counts.sent,
            s.counts.received,
            s.lost,
            s.bound,
            s.failover_ms
                .map_or("-".to_owned(), |ms| format!("{ms:.1}")),
            s.counts.dropped,
            s.counts.tx_errors,
            s.counts.wrong_mac,
            s.counts.link_lost,
            s.unaccounted,
            s.log_lines
        );
    }
    println!(
        "{:.0} s: sent {}, received {}, dropped {}, tx_errors {}, wrong MAC {}, links {}, \
         unaccounted {}; {} segments over their bound; the longest-lived daemon: RSS {} -> {} kB, \
         fds {} -> {} over {:.0} s",
        run.seconds,
        run.counts.sent,
        run.counts.received,
        run.counts.dropped,
        run.counts.tx_errors,
        run.counts.wrong_mac,
        run.counts.link_lost,
        run.unaccounted,
        run.over_bound,
        run.rss_kb_start,
        run.rss_kb_end,
        run.fds_start,
        run.fds_end,
        run.daemons.iter().map(|d| d.seconds).fold(0.0, f64::max)
    );
    super::write_runs("soak", &[run], json)
}
