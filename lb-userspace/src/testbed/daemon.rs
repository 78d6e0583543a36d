//! `fabriclb run` as a child process inside the leaf namespace, its log
//! captured to a file so tests can wait for what it says it did.

use std::cell::Cell;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};

use super::Testbed;
use super::bpffs::Bpffs;
use super::netns::die_with_parent;
use crate::dataplane::pins::DEFAULT_INSTANCE;

/// How long [`Daemon::wait_for_log`] and start-up wait: far beyond what a
/// reload takes, so only a daemon that never gets there fails, however
/// loaded the machine.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// `fabriclb run` inside the leaf namespace, stopped with SIGTERM.
pub struct Daemon {
    child: Child,
    config_file: PathBuf,
    metrics_file: PathBuf,
    log_file: PathBuf,
    /// Where in the log [`Daemon::wait_for_log`] looks from.
    cursor: Cell<usize>,
    /// `fabriclb reload`'s arguments that reach this daemon.
    reload_args: Vec<String>,
    /// Dropped after the daemon is gone (fields drop after `drop`).
    _own_bpffs: Option<Bpffs>,
}

/// A new path in `workdir` starting with `prefix`: each daemon of a test
/// gets its own.
fn unique(workdir: &Path, prefix: &str) -> PathBuf {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    workdir.join(format!("{prefix}-{}", NEXT.fetch_add(1, Ordering::Relaxed)))
}

/// `reload`, then the `--instance` and `--run-dir` of `run`'s `args`.
fn reload_args<'a>(args: impl Iterator<Item = &'a str>) -> Vec<String> {
    let args: Vec<&str> = args.collect();
    let mut reload = vec!["reload".to_owned()];
    for flag in ["--instance", "--run-dir"] {
        if let Some(at) = args.iter().position(|&a| a == flag) {
            reload.extend(args[at..].iter().take(2).map(|&a| a.to_owned()));
        }
    }
    reload
}

impl Daemon {
    /// Writes `config` to `workdir`, starts the daemon with `fabriclb run`'s
    /// extra arguments `args` and waits until it is ready (its first
    /// metrics snapshot appears once the program is attached and next hops
    /// are resolved).
    ///
    /// The daemon logs to `leaf.log` in `workdir`, at `info` unless
    /// `RUST_LOG` says otherwise (the waits need fabriclb's `info` lines).
    pub fn start(
        bed: &Testbed,
        fabriclb: &Path,
        workdir: &Path,
        config: &str,
        args: &[&str],
    ) -> Result<Self> {
        Self::start_in(&bed.ns("leaf"), "leaf", fabriclb, workdir, config, args)
    }

    /// [`Self::start`] in namespace `ns`, its files in `workdir` named
    /// after `role` (`ROLE.toml`, `ROLE.prom`, `ROLE.log`): one of a
    /// fabric's leaves.
    pub fn start_in(
        ns: &str,
        role: &str,
        fabriclb: &Path,
        workdir: &Path,
        config: &str,
        args: &[&str],
    ) -> Result<Self> {
        let config_file = workdir.join(format!("{role}.toml"));
        let metrics_file = workdir.join(format!("{role}.prom"));
        let log_file = workdir.join(format!("{role}.log"));
        std::fs::write(&config_file, config)?;
        let _ = std::fs::remove_file(&metrics_file);
        let log = File::create(&log_file).context("creating the daemon's log")?;
        // Unless `args` name a bpffs, one of this daemon's own, gone with
        // it: each test starts from nothing, and leaves nothing pinned.
        let own_bpffs = match args.contains(&"--bpffs") {
            true => None,
            false => Some(Bpffs::at(&unique(workdir, "bpffs"))?),
        };
        let mut own_args = own_bpffs
            .as_ref()
            .map_or_else(Vec::new, |bpffs| bpffs.args(DEFAULT_INSTANCE));
        // A control socket of its own, in `workdir`: daemons of tests side
        // by side each answer their own `fabriclb reload`, and nothing is
        // left in the host's /run.
        if !args.contains(&"--run-dir") {
            own_args.push("--run-dir".into());
            own_args.push(unique(workdir, "run").display().to_string());
        }
        let reload_args = reload_args(
            args.iter()
                .copied()
                .chain(own_args.iter().map(String::as_str)),
        );
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", ns])
            .arg(fabriclb)
            .args(["run", "--metrics-interval-ms", "100", "--config"])
            .arg(&config_file)
            .arg("--metrics-file")
            .arg(&metrics_file)
            .args(args)
            .args(&own_args)
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        // SIGTERM: the daemon exits, leaving its pins, which go with the
        // bpffs when this process's end drops it.
        die_with_parent(&mut command, nix::sys::signal::Signal::SIGTERM);
        let child = command.spawn().context("starting fabriclb run")?;
        let mut daemon = Self {
            child,
            config_file,
            metrics_file,
            log_file,
            cursor: Cell::new(0),
            reload_args,
            _own_bpffs: own_bpffs,
        };
        let deadline = Instant::now() + PATIENCE;
        while !daemon.metrics_file.exists() {
            if let Some(status) = daemon.child.try_wait()? {
                bail!("fabriclb run exited early: {status}\n{}", daemon.tail());
            }
            ensure!(
                Instant::now() < deadline,
                "fabriclb run not ready after {PATIENCE:?}\n{}",
                daemon.tail()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(daemon)
    }

    /// `fabriclb reload`'s arguments for this daemon: its instance and
    /// run directory.
    pub fn reload_args(&self) -> &[String] {
        &self.reload_args
    }

    /// The daemon's process id (`ip netns exec` executes it in place).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn config_file(&self) -> &Path {
        &self.config_file
    }

    /// Replaces the config file atomically, as an editor saving it would,
    /// and moves the log cursor to the end: what the daemon says about the
    /// new file comes after.
    pub fn write_config(&self, config: &str) -> Result<()> {
        self.skip_log()?;
        let tmp = self.config_file.with_extension("toml.new");
        std::fs::write(&tmp, config)?;
        std::fs::rename(&tmp, &self.config_file)?;
        Ok(())
    }

    /// Sends SIGHUP.
    pub fn hangup(&self) -> Result<()> {
        self.signal(nix::sys::signal::Signal::SIGHUP)
    }

    /// Sends `signal` (SIGSTOP and SIGCONT: a daemon that notices nothing
    /// for a while).
    pub fn signal(&self, signal: nix::sys::signal::Signal) -> Result<()> {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, signal)?;
        Ok(())
    }

    /// [`Daemon::write_config`], then [`Daemon::hangup`]; returns when the
    /// signal went out.
    pub fn reconfigure(&self, config: &str) -> Result<Instant> {
        self.write_config(config)?;
        self.hangup()?;
        Ok(Instant::now())
    }

    /// The daemon's latest metrics snapshot.
    pub fn metrics(&self) -> Result<String> {
        Ok(std::fs::read_to_string(&self.metrics_file)?)
    }

    /// Everything the daemon logged so far.
    pub fn log(&self) -> Result<String> {
        std::fs::read_to_string(&self.log_file).context("reading the daemon's log")
    }

    /// Moves the log cursor past everything logged so far.
    pub fn skip_log(&self) -> Result<()> {
        self.cursor.set(self.log()?.len());
        Ok(())
    }

    /// Waits, up to [`PATIENCE`], for a line containing `needle` after the
    /// log cursor; moves the cursor past it and returns the log from the
    /// old cursor through that line.
    pub fn wait_for_log(&self, needle: &str) -> Result<String> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let log = self.log()?;
            let from = self.cursor.get().min(log.len());
            let mut end = from;
            for line in log[from..].split_inclusive('\n') {
                end += line.len();
                // A line still being written is read again next time.
                if line.ends_with('\n') && line.contains(needle) {
                    self.cursor.set(end);
                    return Ok(log[from..end].to_owned());
                }
            }
            if Instant::now() > deadline {
                bail!(
                    "fabriclb logged no {needle:?} within {PATIENCE:?}; since the cursor:\n{}",
                    &log[from..]
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The log's last lines, for errors.
    fn tail(&self) -> String {
        let log = self.log().unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        let start = lines.len().saturating_sub(20);
        format!("fabriclb's log ends:\n{}", lines[start..].join("\n"))
    }

    /// Kills the daemon with SIGKILL, as a crash would, and reaps it.
    pub fn kill(mut self) -> Result<()> {
        self.child.kill()?;
        self.child.wait()?;
        Ok(())
    }

    /// Stops the daemon and returns its final metrics.
    pub fn stop(mut self) -> Result<String> {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM)?;
        let status = self.child.wait()?;
        ensure!(
            status.success(),
            "fabriclb run exited with {status}\n{}",
            self.tail()
        );
        Ok(std::fs::read_to_string(&self.metrics_file)?)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
