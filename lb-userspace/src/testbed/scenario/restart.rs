//! `--scenario restart`: steady collective traffic through a leaf whose
//! kernel has no route of its own to the receivers, so that nothing but
//! fabriclb's program forwards it. The daemon is killed with SIGKILL,
//! started again 2 s later, and later stopped and started onto another
//! map layout (another `flowlet_table_size`: a simulated upgrade). Every
//! packet the program did not forward while no daemon ran is lost, so
//! `lost` counts the restarts' gaps.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use aya::maps::{Array, Map, MapData};
use lb_common::abi as names;
use lb_common::limits::BUCKETS_PER_GROUP;
use serde::Serialize;

use super::Scenario;
use crate::dataplane::pins::{DEFAULT_BPFFS, PinDir};
use crate::dataplane::remove_instance;
use crate::testbed::{Collective, Daemon, Leaf, LeafCounters, Shape, Testbed, run_collective_with};
use crate::traffic::{Exchange, Pace, Pattern};

/// How long the full scenario's senders send.
pub const SECONDS: u32 = 8;
/// The instance the scenario pins.
pub const INSTANCE: &str = "restart";
/// The flowlet table of the "upgraded" daemon: another size, another
/// layout of `FL_FLOWLETS`.
const UPGRADED_FLOWLETS: u32 = 32_768;

/// The fabric and workload: 2 senders in a ring, 16 QPs each, messages of
/// 4 packets at 4000 packets/s per sender, for `seconds`.
pub fn scenario(seconds: u32) -> Scenario {
    let packets_per_message = 4;
    let rate = 4_000;
    let collective = Collective {
        exchange: Exchange {
            pattern: Pattern::Ring,
            qps_per_connection: 16,
            message_bytes: packets_per_message * crate::testbed::ROCE_MTU,
            mtu: crate::testbed::ROCE_MTU,
            messages: seconds * rate / packets_per_message,
            source_port_per_qp: false,
            small_messages: 0,
        },
        pace: Pace {
            rate_pps: Some(u64::from(rate)),
            gap: Duration::ZERO,
            spread: false,
        },
        senders: 2,
        leaf: Leaf::Started,
    };
    Scenario {
        name: "restart",
        shape: Shape {
            hosts: 2,
            spines: 4,
            ..Shape::default()
        },
        change: None,
        cross: None,
        flap: None,
        drain: None,
        collective,
        workload: format!(
            "ring of 2 senders, 16 QPs, 4-packet messages at {rate} packets/s each for {seconds} s"
        ),
    }
}

/// When the daemon is restarted during the run.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// Traffic before the first kill.
    pub settle: Duration,
    /// How long no daemon runs after the kill.
    pub down: Duration,
    /// From the second daemon's start to the upgrade.
    pub between: Duration,
}

impl Timing {
    pub const FULL: Self = Self {
        settle: Duration::from_secs(1),
        down: Duration::from_secs(2),
        between: Duration::from_secs(1),
    };
}

/// What one restart changed and kept, read from the kernel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Step {
    pub what: &'static str,
    /// The XDP program on h1 before and after: a new one swapped in.
    pub program_before: u32,
    pub program_after: u32,
    /// Whether the flowlet table and the verdict counters are the same
    /// maps (kernel map ids) after as before.
    pub flowlets_kept: bool,
    pub counters_kept: bool,
    /// Whether the spine group's 512 buckets hold the same next hops
    /// after as before: no ECMP flow moved.
    pub buckets_kept: bool,
}

/// One run through the restarts.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RestartRun {
    pub mode: String,
    pub sent: u64,
    pub received: u64,
    /// Sent and never received.
    pub lost: u64,
    /// Of `lost`, what the testbed's own links dropped (a loaded
    /// machine's); the rest is the restarts'.
    pub link_lost: u64,
    pub reordered_in_message: u64,
    /// Packets that broke their QP's PSN order.
    pub out_of_order: u64,
    /// Of `link_lost`, what the senders' own ports dropped: packets the
    /// leaf never saw.
    pub lost_before_leaf: u64,
    /// What the leaf's counters say it forwarded over the whole run, read
    /// from the last daemon: the counters carried across the restarts.
    pub forwarded: u64,
    pub steps: Vec<Step>,
}

/// The scenario's instance in the bpffs a user's daemon pins into (the
/// default `--bpffs`, which under `ip netns exec` is PID 1's), removed
/// when this drops, program and all.
pub struct HostInstance(PinDir);

impl HostInstance {
    /// Instance `instance` under the default bpffs.
    pub fn new(instance: &str) -> Self {
        Self(PinDir::new(Path::new(DEFAULT_BPFFS), instance))
    }

    pub fn pins(&self) -> &PinDir {
        &self.0
    }

    /// `fabriclb run`'s arguments for it: the default bpffs, said.
    pub fn args(&self) -> Vec<String> {
        let instance = self.0.dir().file_name().unwrap_or_default();
        vec![
            "--bpffs".into(),
            DEFAULT_BPFFS.into(),
            "--instance".into(),
            instance.to_string_lossy().into_owned(),
        ]
    }
}

impl Drop for HostInstance {
    fn drop(&mut self) {
        let _ = remove_instance(&self.0);
    }
}

/// The id of the XDP program on the leaf's `interface`.
pub fn program_on(bed: &Testbed, interface: &str) -> Result<u32> {
    let out = std::process::Command::new("ip")
        .args(["-n", &bed.ns("leaf"), "-d", "link", "show", interface])
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_once("prog/xdp id ")
        .and_then(|(_, rest)| rest.split_whitespace().next()?.parse().ok())
        .with_context(|| format!("no XDP program on {interface}: {text}"))
}

/// The kernel id of the map pinned as `name` in `pins`.
pub fn pinned_map_id(pins: &PinDir, name: &str) -> Result<u32> {
    let path = pins.map(name);
    let map = MapData::from_pin(&path).with_context(|| format!("opening {}", path.display()))?;
    Ok(map.info()?.id())
}

struct Ids {
    program: u32,
    flowlets: u32,
    verdicts: u32,
    buckets: Vec<u32>,
}

/// The buckets of group 0 (the testbed leaf's one group) in the pinned
/// bucket table.
fn buckets(pins: &PinDir) -> Result<Vec<u32>> {
    let map = MapData::from_pin(pins.map(names::BUCKETS))?;
    let table: Array<MapData, u32> = Array::try_from(Map::Array(map))?;
    (0..BUCKETS_PER_GROUP)
        .map(|i| Ok(table.get(&i, 0)?))
        .collect()
}

impl Ids {
    fn read(bed: &Testbed, pins: &PinDir) -> Result<Self> {
        Ok(Self {
            program: program_on(bed, "h1")?,
            flowlets: pinned_map_id(pins, names::FLOWLETS)?,
            verdicts: pinned_map_id(pins, names::VERDICTS)?,
            buckets: buckets(pins)?,
        })
    }

    fn step(self, what: &'static str, after: Self) -> Step {
        Step {
            what,
            program_before: self.program,
            program_after: after.program,
            flowlets_kept: self.flowlets == after.flowlets,
            counters_kept: self.verdicts == after.verdicts,
            buckets_kept: self.buckets == after.buckets,
        }
    }
}

/// The mode group keys set, `ecmp` by default.
fn group_mode(group: &str) -> &str {
    group
        .lines()
        .find_map(|l| l.trim().strip_prefix("mode = "))
        .map_or("ecmp", |m| m.trim_matches('"'))
}

/// `config` with another flowlet table size.
fn upgraded(config: &str) -> String {
    config.replacen(
        "[switch]\n",
        &format!("[switch]\nflowlet_table_size = {UPGRADED_FLOWLETS}\n"),
        1,
    )
}

/// Runs `scenario`'s collective on `bed` (built with its shape) with the
/// leaf's spine group keys `group`, killing and upgrading the daemon as
/// `timing` says.
pub fn measure(
    bed: &Testbed,
    fabriclb: &Path,
    workdir: &Path,
    scenario: &Scenario,
    group: &str,
    timing: Timing,
) -> Result<RestartRun> {
    // As a user runs it (ip netns exec, the default bpffs): pins that died
    // with the daemon's mount namespace once made a restart lose 0.8 s.
    let instance = HostInstance::new(&format!("{INSTANCE}-{}", bed.name()));
    let pins = instance.pins();
    let args = instance.args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // Without it the kernel forwards while no program runs, on a hash of
    // its own, and hides the gap.
    let leaf = bed.ns("leaf");
    let deleted = std::process::Command::new("ip")
        .args(["-n", &leaf, "route", "del", "198.19.0.0/16"])
        .status()?;
    ensure!(
        deleted.success(),
        "removing the leaf's route to the receivers"
    );
    let config = bed.leaf_config(group);
    let first = Daemon::start(bed, fabriclb, workdir, &config, &args)?;
    let collective = Collective {
        leaf: Leaf::Started,
        ..scenario.collective.clone()
    };
    let (report, (last, steps)) =
        run_collective_with(bed, fabriclb, workdir, &collective, &[], |_| {
            std::thread::sleep(timing.settle);
            let before = Ids::read(bed, pins)?;
            first.kill()?;
            std::thread::sleep(timing.down);
            let second = Daemon::start(bed, fabriclb, workdir, &config, &args)?;
            let killed = before.step("kill -9, then run again", Ids::read(bed, pins)?);
            std::thread::sleep(timing.between);
            let before = Ids::read(bed, pins)?;
            second.stop()?;
            let third = Daemon::start(bed, fabriclb, workdir, &upgraded(&config), &args)?;
            let upgrade = before.step("stop, then run a new map layout", Ids::read(bed, pins)?);
            Ok((third, vec![killed, upgrade]))
        })?;
    let leaf_counters = LeafCounters::from_metrics(bed, &last.stop()?)?;
    let lost = report.sent_packets - report.received.packets;
    Ok(RestartRun {
        mode: group_mode(group).to_owned(),
        sent: report.sent_packets,
        received: report.received.packets,
        lost,
        link_lost: report.drops.lost(),
        reordered_in_message: report.received.message_out_of_order,
        out_of_order: report.received.out_of_order,
        lost_before_leaf: report.drops.lost_in("h"),
        forwarded: leaf_counters.forwarded,
        steps,
    })
}

/// Builds testbed `bed_name`, runs the scenario, prints the result,
/// writes it to `json` if given, tears down (also on failure and Ctrl-C).
pub fn run(bed_name: &str, json: Option<&Path>) -> Result<()> {
    let scenario = scenario(SECONDS);
    let run = super::on_own_bed(bed_name, &scenario.shape, |bed, exe, workdir| {
        measure(bed, exe, workdir, &scenario, "", Timing::FULL)
    })
    .context("scenario restart")?;
    println!("restart: {}", scenario.workload);
    println!(
        "sent {}, received {}, lost {} ({} by the testbed's links), in-message reorders {}, \
         PSN-order breaks {}, forwarded by the leaf {}",
        run.sent,
        run.received,
        run.lost,
        run.link_lost,
        run.reordered_in_message,
        run.out_of_order,
        run.forwarded
    );
    for step in &run.steps {
        let kept = |yes: bool, no: &'static str| if yes { "kept" } else { no };
        println!(
            "{}: program {} -> {}, flowlet table {}, counters {}, buckets {}",
            step.what,
            step.program_before,
            step.program_after,
            kept(step.flowlets_kept, "replaced"),
            kept(step.counters_kept, "replaced"),
            kept(step.buckets_kept, "moved"),
        );
    }
    // One run per mode, as the other scenarios write it: here one, ECMP.
    super::write_runs("restart", &[run], json)
}
