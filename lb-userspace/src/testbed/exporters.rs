//! node_exporter on every spine, exporting the spine's qdiscs for the
//! `remote` telemetry source: spine `j`'s queue toward the far leaf is
//! `node_qdisc_backlog{device="fleaf"}` at [`Exporters::url`]`(j)`, on the
//! spine's address on its link to the leaf, where the daemon (in the leaf
//! namespace) reaches it. On a [`Fabric`], spine `j`'s queue toward leaf
//! `m` is device `lm`, on the spine's management address alone.

use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};

use super::fabric::{Fabric, Router, mgmt_addr};
use super::netns::{die_with_parent, in_netns};
use super::topology::{SHAPED_DEVICE, spine_addr};
use super::{PATIENCE, Testbed};
use crate::telemetry::remote::{Remote, Target};
use crate::telemetry::{Source, TelemetryError};

/// The port node_exporter listens on.
pub const PORT: u16 = 9100;
/// The spine's device toward the far leaf: the queue a path through the
/// spine waits in.
pub const DEVICE: &str = SHAPED_DEVICE;

/// `prometheus-node-exporter` in every spine namespace, killed and reaped
/// on drop.
pub struct Exporters {
    /// Spine index, the process, its log.
    exporters: Vec<(usize, Child, PathBuf)>,
    /// Where they are started and checked from.
    place: Place,
}

/// Where a set of exporters runs: the spines' namespaces, the address
/// each listens on, and the namespace and targets that show it answers.
struct Place {
    /// The testbed's name, for log files.
    bed: String,
    /// By spine index: namespace and listen address.
    spines: Vec<(String, String)>,
    reader: String,
    /// By spine index: what the reader scrapes.
    targets: Vec<Target>,
}

impl Exporters {
    /// Starts an exporter in each spine of `bed` and returns once every one
    /// answers from the leaf namespace with its `fleaf` queue (up to
    /// [`PATIENCE`]).
    ///
    /// The exporters get SIGKILL if the thread that started them exits first
    /// (as [`super::Daemon`]'s process does), so start them from the thread
    /// that holds the testbed.
    pub fn start(bed: &Testbed) -> Result<Exporters> {
        let spines = 1..=bed.shape().spines;
        Self::start_at(Place {
            bed: bed.name().to_owned(),
            spines: (spines.clone())
                .map(|j| {
                    (
                        bed.ns(&format!("s{j}")),
                        format!("{}:{PORT}", spine_addr(j)),
                    )
                })
                .collect(),
            reader: bed.ns("leaf"),
            targets: spines.map(Self::target).collect(),
        })
    }

    /// Starts an exporter in each spine of `fabric`, listening on its
    /// management address only (so no scrape crosses a link it reports
    /// on), and returns once every one answers leaf 1 with its queue
    /// toward leaf 2.
    pub fn start_fabric(fabric: &Fabric) -> Result<Exporters> {
        let spines = 1..=fabric.shape().spines;
        Self::start_at(Place {
            bed: fabric.name().to_owned(),
            spines: (spines.clone())
                .map(|j| {
                    (
                        fabric.ns(&format!("s{j}")),
                        format!("{}:{PORT}", mgmt_addr(Router::Spine(j))),
                    )
                })
                .collect(),
            reader: fabric.ns("l1"),
            targets: spines
                .map(|j| Target {
                    url: Self::fabric_url(j),
                    device: "l2".to_owned(),
                })
                .collect(),
        })
    }

    /// Where a fabric's spine `j` (1-based) exporter answers.
    pub fn fabric_url(j: usize) -> String {
        format!("http://{}:{PORT}/metrics", mgmt_addr(Router::Spine(j)))
    }

    fn start_at(place: Place) -> Result<Exporters> {
        let mut exporters = Self {
            exporters: Vec::new(),
            place,
        };
        for j in 1..=exporters.place.spines.len() {
            let spawned = exporters.spawn(j)?;
            exporters.exporters.push(spawned);
        }
        exporters.wait_ready()?;
        Ok(exporters)
    }

    /// Kills spine `j`'s exporter (1-based), as a crashed one goes: its
    /// source falls silent.
    pub fn kill(&mut self, j: usize) -> Result<()> {
        let (_, child, log) = self
            .exporters
            .iter_mut()
            .find(|(spine, _, _)| *spine == j)
            .with_context(|| format!("no exporter on spine {j}"))?;
        child.kill()?;
        child.wait()?;
        let _ = std::fs::remove_file(log);
        Ok(())
    }

    /// Starts spine `j`'s exporter again after [`Self::kill`]; returns once
    /// every exporter answers.
    pub fn restart(&mut self, j: usize) -> Result<()> {
        let fresh = self.spawn(j)?;
        match self.exporters.iter_mut().find(|(spine, _, _)| *spine == j) {
            Some(slot) => *slot = fresh,
            None => self.exporters.push(fresh),
        }
        self.wait_ready()
    }

    /// Where spine `j`'s (1-based) exporter answers.
    pub fn url(j: usize) -> String {
        format!("http://{}:{PORT}/metrics", spine_addr(j))
    }

    /// The `remote` source's target for spine `j`'s queue toward the far
    /// leaf.
    pub fn target(j: usize) -> Target {
        Target {
            url: Self::url(j),
            device: DEVICE.to_owned(),
        }
    }

    /// A target per spine, in spine order.
    pub fn targets(&self) -> Vec<Target> {
        self.place.targets.clone()
    }

    /// The exporters' process ids, in spine order.
    pub fn pids(&self) -> Vec<u32> {
        self.exporters.iter().map(|(_, c, _)| c.id()).collect()
    }

    /// The CPU time (user and system) the exporters used so far, summed.
    pub fn cpu_time(&self) -> Result<Duration> {
        self.pids().into_iter().map(cpu_time).sum()
    }

    /// Waits until each exporter says it listens (so that an exporter that
    /// failed to bind is not mistaken for another answering at its
    /// address) and every spine's queue reads from the leaf.
    fn wait_ready(&self) -> Result<()> {
        let targets = self.place.targets.clone();
        let exporters: Vec<(u32, PathBuf)> = self
            .exporters
            .iter()
            .map(|(_, child, log)| (child.id(), log.clone()))
            .collect();
        let waited = in_netns(&self.place.reader, move || -> Result<(), String> {
            let mut remote = Remote::new(targets, Duration::from_millis(500));
            let deadline = Instant::now() + PATIENCE;
            loop {
                if let Some((pid, _)) = exporters.iter().find(|(pid, _)| exited(*pid)) {
                    return Err(format!("node_exporter {pid} exited"));
                }
                let listening = exporters.iter().all(|(_, log)| {
                    std::fs::read_to_string(log).is_ok_and(|l| l.contains("Listening on"))
                });
                let readings = remote.poll();
                if listening && readings.iter().all(Result::is_ok) {
                    return Ok(());
                }
                if Instant::now() > deadline {
                    let errors: Vec<String> = readings
                        .iter()
                        .filter_map(|r| r.as_ref().err().map(TelemetryError::to_string))
                        .collect();
                    return Err(format!(
                        "not every exporter listens and answers after {PATIENCE:?}: {}",
                        errors.join("; ")
                    ));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })?;
        if let Err(why) = waited {
            bail!("{why}\n{}", self.logs());
        }
        Ok(())
    }

    /// Every exporter's log, for errors.
    fn logs(&self) -> String {
        self.exporters
            .iter()
            .map(|(j, _, log)| {
                let text = std::fs::read_to_string(log).unwrap_or_default();
                format!("s{j}'s node_exporter logged:\n{}", text.trim_end())
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Exporters {
    /// Starts spine `j`'s exporter, its log a file of its own.
    fn spawn(&self, j: usize) -> Result<(usize, Child, PathBuf)> {
        // Logs of their own, should two run on one testbed's spine.
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, Ordering::Relaxed);
        let log_file = std::env::temp_dir().join(format!(
            "{}-s{j}-node-exporter-{}-{n}.log",
            self.place.bed,
            std::process::id()
        ));
        let (ns, listen) = &self.place.spines[j - 1];
        spawn(ns, listen, log_file).map(|(child, log)| (j, child, log))
    }
}

/// Starts an exporter in namespace `ns` listening on `listen`, logging to
/// `log_file`.
fn spawn(ns: &str, listen: &str, log_file: PathBuf) -> Result<(Child, PathBuf)> {
    let log = File::create(&log_file).context("creating node_exporter's log")?;
    // Removed with the exporter, or by the signal watcher on Ctrl-C.
    super::leftovers::hold(&log_file);
    let mut command = Command::new("ip");
    command
        .args(["netns", "exec", ns])
        .arg("prometheus-node-exporter")
        .args([
            "--collector.disable-defaults",
            "--collector.qdisc",
            "--web.disable-exporter-metrics",
        ])
        // No device filter: node_exporter 1.5 accepts
        // `--collector.qdisk.device-include` but filters nothing with it
        // (and `device-exclude` alone drops every device), so all three of
        // the spine's devices are exported.
        .arg(format!("--web.listen-address={listen}"))
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    die_with_parent(&mut command, nix::sys::signal::Signal::SIGKILL);
    match command.spawn() {
        Ok(child) => Ok((child, log_file)),
        Err(error) => {
            super::leftovers::remove(&log_file);
            Err(error).context("starting prometheus-node-exporter")
        }
    }
}

impl Drop for Exporters {
    fn drop(&mut self) {
        for (_, child, log) in &mut self.exporters {
            let _ = child.kill();
            let _ = child.wait();
            super::leftovers::remove(log);
        }
    }
}

/// A process's fields after its name in `/proc/<pid>/stat` (the name may
/// hold blanks and parentheses; it ends at the last `)`), from the state
/// (field 3) on.
fn stat_fields(pid: u32) -> Result<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    let (_, after_name) = stat
        .rsplit_once(')')
        .with_context(|| format!("/proc/{pid}/stat has no name: {stat:?}"))?;
    Ok(after_name.split_whitespace().map(str::to_owned).collect())
}

/// utime plus stime (fields 14 and 15) of process `pid`.
pub fn cpu_time(pid: u32) -> Result<Duration> {
    let fields = stat_fields(pid)?;
    ensure!(fields.len() > 12, "/proc/{pid}/stat is short: {fields:?}");
    let ticks: u64 = fields[11].parse::<u64>()? + fields[12].parse::<u64>()?;
    // SAFETY: sysconf only reads a system constant.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    ensure!(per_second > 0, "sysconf(_SC_CLK_TCK) failed");
    Ok(Duration::from_secs_f64(ticks as f64 / per_second as f64))
}

/// Whether `pid` has exited (a zombie waiting to be reaped, or gone).
fn exited(pid: u32) -> bool {
    stat_fields(pid).map_or(true, |f| f.first().is_none_or(|s| s == "Z" || s == "X"))
}
