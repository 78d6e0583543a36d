//! What every namespace test sets up: a testbed with a scratch directory
//! that go away with it, runs of the real `fabriclb` on it, and the ring
//! collective the tests vary.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use fabriclb::testbed::scenario::{Mode, Report, Scenario, restart};
use fabriclb::testbed::{
    self, Collective, CollectiveReport, Daemon, Leaf, LeafCounters, Shape, Testbed, TrafficReport,
};
use fabriclb::traffic::{Exchange, Pace, Pattern};

pub fn fabriclb() -> &'static Path {
    env!("CARGO_BIN_EXE_fabriclb").as_ref()
}

/// A testbed name of this process and `tag`, so that parallel tests and
/// other runs do not collide.
///
/// Tests run in parallel and a testbed removes any namespaces of its name
/// before it builds, so two tests with one tag would tear down each
/// other's fabric: a tag used twice is a failure of its own.
pub fn name(tag: &str) -> String {
    static TAGS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut tags = TAGS.lock().unwrap_or_else(|e| e.into_inner());
    assert!(
        !tags.iter().any(|t| t == tag),
        "testbed tag {tag:?} is used by two tests"
    );
    tags.push(tag.to_owned());
    format!("fl{}{tag}", std::process::id() % 100_000)
}

/// A testbed and a scratch directory for the daemon; the directory is
/// removed when this drops and the testbed then removes itself, also when
/// an assertion failed.
pub struct Bed {
    pub testbed: Testbed,
    workdir: PathBuf,
    /// Held until the testbed is gone (the last field drops last).
    _turn: Turn,
}

/// Tests run two at a time (one per core). One that measures how well
/// traffic is steered under load runs alone ([`Bed::shaped_alone`]): a
/// second testbed's traffic on the other core makes its senders and
/// telemetry late, and what it measures is the machine, not fabriclb.
static TURNS: RwLock<()> = RwLock::new(());

/// A test's hold on [`TURNS`]: shared, or alone.
pub struct Turn {
    _shared: Option<RwLockReadGuard<'static, ()>>,
    _alone: Option<RwLockWriteGuard<'static, ()>>,
}

impl Turn {
    /// A turn with no other test running.
    pub fn alone() -> Self {
        Self {
            _shared: None,
            _alone: Some(TURNS.write().unwrap_or_else(|e| e.into_inner())),
        }
    }

    /// A turn beside one other test.
    pub fn shared() -> Self {
        Self {
            _shared: Some(TURNS.read().unwrap_or_else(|e| e.into_inner())),
            _alone: None,
        }
    }
}

impl Bed {
    /// `hosts` hosts and 4 unshaped spines.
    pub fn up(tag: &str, hosts: usize) -> Self {
        Self::shaped(
            tag,
            Shape {
                hosts,
                spines: 4,
                ..Shape::default()
            },
        )
    }

    /// [`Bed::up`], with no other test's testbed up meanwhile: for tests
    /// whose loss bounds are rates of traffic in time.
    pub fn up_alone(tag: &str, hosts: usize) -> Self {
        Self::shaped_alone(
            tag,
            Shape {
                hosts,
                spines: 4,
                ..Shape::default()
            },
        )
    }

    pub fn shaped(tag: &str, shape: Shape) -> Self {
        Self::with_turn(tag, shape, Turn::shared())
    }

    /// [`Bed::shaped`], with no other test's testbed up meanwhile.
    pub fn shaped_alone(tag: &str, shape: Shape) -> Self {
        Self::with_turn(tag, shape, Turn::alone())
    }

    fn with_turn(tag: &str, shape: Shape, turn: Turn) -> Self {
        let name = name(tag);
        let testbed = Testbed::up(&name, shape).expect("testbed");
        let workdir = std::env::temp_dir().join(format!("{name}-work"));
        std::fs::create_dir_all(&workdir).expect("workdir");
        Self {
            testbed,
            workdir,
            _turn: turn,
        }
    }

    /// See [`testbed::run_traffic`].
    pub fn traffic(&self, flows: u16, packets: u32) -> Result<TrafficReport> {
        testbed::run_traffic(&self.testbed, fabriclb(), &self.workdir, flows, packets)
    }

    /// See [`testbed::run_collective`].
    pub fn collective(&self, collective: &Collective) -> Result<CollectiveReport> {
        testbed::run_collective(&self.testbed, fabriclb(), &self.workdir, collective)
    }

    /// See [`testbed::scenario::measure`]; the testbed must have the
    /// scenario's shape.
    pub fn scenario(&self, scenario: &Scenario, modes: &[Mode]) -> Result<Report> {
        testbed::scenario::measure(&self.testbed, fabriclb(), &self.workdir, scenario, modes)
    }

    /// See [`testbed::scenario::restart::measure`].
    pub fn restart(
        &self,
        scenario: &Scenario,
        group: &str,
        timing: restart::Timing,
    ) -> Result<restart::RestartRun> {
        restart::measure(
            &self.testbed,
            fabriclb(),
            &self.workdir,
            scenario,
            group,
            timing,
        )
    }

    /// The daemon's scratch directory.
    pub fn workdir(&self) -> &Path {
        &self.workdir
    }

    /// See [`testbed::run_collective_with`]; `during` gets the daemon.
    pub fn collective_with<T>(
        &self,
        collective: &Collective,
        args: &[&str],
        during: impl FnOnce(&Daemon) -> Result<T>,
    ) -> Result<(CollectiveReport, T)> {
        testbed::run_collective_with(
            &self.testbed,
            fabriclb(),
            &self.workdir,
            collective,
            args,
            |daemon| during(daemon.context("no fabriclb on the leaf")?),
        )
    }

    /// `fabriclb run` on the leaf with `config` and extra arguments `args`.
    pub fn daemon(&self, config: &str, args: &[&str]) -> Result<Daemon> {
        self.daemon_through(fabriclb(), config, args)
    }

    /// [`Bed::daemon`] started through `program` (a wrapper that runs
    /// `fabriclb` with its arguments); see [`Bed::scratch`].
    pub fn daemon_through(&self, program: &Path, config: &str, args: &[&str]) -> Result<Daemon> {
        Daemon::start(&self.testbed, program, &self.workdir, config, args)
    }

    /// `name` in the scratch directory.
    pub fn scratch(&self, name: &str) -> PathBuf {
        self.workdir.join(name)
    }

    /// The spine group's counters in the daemon's latest metrics.
    pub fn counters(&self, daemon: &Daemon) -> Result<LeafCounters> {
        LeafCounters::from_metrics(&self.testbed, &daemon.metrics()?)
    }

    /// The spine group's counters from a metrics snapshot the daemon wrote
    /// after this call began (under traffic, each one differs).
    pub fn fresh_counters(&self, daemon: &Daemon) -> Result<LeafCounters> {
        let old = daemon.metrics()?;
        let (text, _) = wait_for("a new metrics snapshot", || {
            let text = daemon.metrics()?;
            Ok((text != old).then_some(text))
        })?;
        LeafCounters::from_metrics(&self.testbed, &text)
    }

    /// The leaf's config for the spine group with keys `group`.
    pub fn config(&self, group: &str) -> String {
        self.testbed.leaf_config(group)
    }

    /// `ip -n <role's namespace> args...`.
    pub fn ip(&self, role: &str, args: &[&str]) -> Result<String> {
        let ns = self.testbed.ns(role);
        let out = Command::new("ip")
            .args(["-n", &ns])
            .args(args)
            .output()
            .context("running ip")?;
        ensure!(
            out.status.success(),
            "ip -n {ns} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `ip -n <role's namespace> -batch` of `commands`, one a line.
    pub fn ip_batch(&self, role: &str, commands: &[String]) -> Result<()> {
        let file = self.workdir.join(format!("{role}.batch"));
        std::fs::write(&file, commands.join("\n") + "\n")?;
        self.ip(role, &["-batch", &file.to_string_lossy()])?;
        Ok(())
    }

    /// Links of `role`'s namespace with an XDP program, and how it is
    /// attached (`xdp` for driver mode, `xdpgeneric`), from `ip -d link`.
    pub fn xdp_links(&self, role: &str) -> Result<Vec<(String, String)>> {
        let links = self.ip(role, &["-o", "-d", "link", "show"])?;
        Ok(links
            .lines()
            .filter_map(|line| {
                let name = line.split(": ").nth(1)?.split('@').next()?;
                // `xdpgeneric` or `xdpgeneric/id:7`, depending on iproute2.
                let mode = line.split_whitespace().find(|w| w.starts_with("xdp"))?;
                Some((name.to_owned(), mode.split('/').next()?.to_owned()))
            })
            .collect())
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.workdir);
    }
}

/// A ring in RoCE-MTU packets, one UDP source port per connection and no
/// single-packet messages. The rest is the smallest exchange (one
/// single-packet message on one QP); every test sets the sizes it is
/// about.
pub fn ring_exchange() -> Exchange {
    Exchange {
        pattern: Pattern::Ring,
        qps_per_connection: 1,
        message_bytes: testbed::ROCE_MTU,
        mtu: testbed::ROCE_MTU,
        messages: 1,
        source_port_per_qp: false,
        small_messages: 0,
    }
}

/// [`ring_exchange`] from hosts 1..=`senders` through fabriclb with the
/// group keys `group`, unpaced; every test sets the pace it is about.
pub fn ring(senders: usize, group: &str) -> Collective {
    Collective {
        exchange: ring_exchange(),
        pace: gaps(Duration::ZERO),
        senders,
        leaf: Leaf::Fabriclb {
            group: group.to_owned(),
        },
    }
}

/// Single-packet WRITEs (8 per round) on 16 QPs from `senders` senders
/// at 8k packets/s each for 6 s: steady traffic, several times longer
/// than the reloads tests make under it take, whose packets any mode may
/// spray.
pub fn steady(senders: usize) -> Collective {
    Collective {
        exchange: Exchange {
            qps_per_connection: 16,
            messages: 6_000,
            small_messages: 7,
            ..ring_exchange()
        },
        pace: rate(8_000),
        ..ring(senders, "")
    }
}

/// `rate_pps` packets per second from each sender, no gap between rounds.
pub fn rate(rate_pps: u64) -> Pace {
    Pace {
        rate_pps: Some(rate_pps),
        gap: Duration::ZERO,
        spread: false,
    }
}

/// As fast as the ring drains, idle for `gap` after each round.
pub fn gaps(gap: Duration) -> Pace {
    Pace {
        rate_pps: None,
        gap,
        spread: false,
    }
}

/// Polls `f` until it returns `Some`, up to [`testbed::PATIENCE`]; `what`
/// names the wait in the error. Returns the value and how long it took.
pub fn wait_for<T>(what: &str, mut f: impl FnMut() -> Result<Option<T>>) -> Result<(T, Duration)> {
    let start = Instant::now();
    loop {
        if let Some(value) = f()? {
            return Ok((value, start.elapsed()));
        }
        ensure!(
            start.elapsed() < testbed::PATIENCE,
            "{what}: not after {:?}",
            testbed::PATIENCE
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every packet sent reached the leaf's XDP and arrived at a receiver, but
/// those the testbed's links dropped, which a loaded machine can; a lost
/// packet breaks its message's order at most once, so such breaks stay
/// within the losses (and are 0 when nothing was lost).
pub fn assert_delivered(report: &CollectiveReport) {
    let lost = report.drops.lost();
    let context = context(report);
    assert_eq!(
        report.received.packets,
        report.sent_packets - lost,
        "packets lost beyond the links' drops: {context}"
    );
    assert_eq!(
        report.leaf.forwarded,
        report.sent_packets - report.drops.lost_in("h"),
        "not every packet that reached the leaf was forwarded: {context}"
    );
    assert!(
        report.received.message_out_of_order <= lost,
        "messages reordered: {context}"
    );
}

/// [`assert_delivered`], and each QP's packets in PSN order, as ECMP and
/// flowlets keep them (again, up to one break per lost packet).
pub fn assert_delivered_in_order(report: &CollectiveReport) {
    assert_delivered(report);
    assert!(
        report.received.out_of_order <= report.drops.lost(),
        "reordered: {}",
        context(report)
    );
}

fn context(report: &CollectiveReport) -> String {
    format!(
        "sent {}, received {:?}, forwarded {}, link drops: {}",
        report.sent_packets, report.received, report.leaf.forwarded, report.drops
    )
}
