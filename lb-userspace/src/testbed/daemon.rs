//! `fabriclb run` as a child process inside the leaf namespace.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};

use super::Testbed;

/// `fabriclb run` inside the leaf namespace, stopped with SIGTERM.
pub struct Daemon {
    child: Child,
    config_file: PathBuf,
    metrics_file: PathBuf,
}

impl Daemon {
    /// Writes `config` to `workdir`, starts the daemon with `fabriclb run`'s
    /// extra arguments `args` and waits until it is ready (its first
    /// metrics snapshot appears once the program is attached and next hops
    /// are resolved).
    pub fn start(
        bed: &Testbed,
        fabriclb: &Path,
        workdir: &Path,
        config: &str,
        args: &[&str],
    ) -> Result<Self> {
        let config_file = workdir.join("leaf.toml");
        let metrics_file = workdir.join("leaf.prom");
        std::fs::write(&config_file, config)?;
        let _ = std::fs::remove_file(&metrics_file);
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &bed.ns("leaf")])
            .arg(fabriclb)
            .args(["run", "--metrics-interval-ms", "100", "--config"])
            .arg(&config_file)
            .arg("--metrics-file")
            .arg(&metrics_file)
            .args(args)
            // Its start-up and shutdown lines would cut through reports.
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::null());
        // SAFETY: prctl and sigprocmask are async-signal-safe. If this
        // process dies without stopping the daemon (killed, or exiting from
        // the testbed's signal watcher), the kernel stops the daemon too;
        // the setting survives `ip netns exec`'s exec. The signal mask is
        // inherited: the watcher's blocked SIGINT/SIGTERM must not reach
        // the daemon, or it could never be stopped.
        unsafe {
            command.pre_exec(|| {
                use nix::sys::signal::{SigSet, SigmaskHow, Signal, sigprocmask};
                sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)?;
                nix::sys::prctl::set_pdeathsig(Signal::SIGTERM)?;
                Ok(())
            });
        }
        let child = command.spawn().context("starting fabriclb run")?;
        let mut daemon = Self {
            child,
            config_file,
            metrics_file,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !daemon.metrics_file.exists() {
            if let Some(status) = daemon.child.try_wait()? {
                bail!("fabriclb run exited early: {status}");
            }
            ensure!(
                Instant::now() < deadline,
                "fabriclb run not ready after 20 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(daemon)
    }

    /// Replaces the config file (atomically, as an editor saving it would)
    /// and sends SIGHUP; returns when the signal went out.
    pub fn reconfigure(&self, config: &str) -> Result<Instant> {
        let tmp = self.config_file.with_extension("toml.new");
        std::fs::write(&tmp, config)?;
        std::fs::rename(&tmp, &self.config_file)?;
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP)?;
        Ok(Instant::now())
    }

    /// The daemon's latest metrics snapshot.
    pub fn metrics(&self) -> Result<String> {
        Ok(std::fs::read_to_string(&self.metrics_file)?)
    }

    /// Stops the daemon and returns its final metrics.
    pub fn stop(mut self) -> Result<String> {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM)?;
        let status = self.child.wait()?;
        ensure!(status.success(), "fabriclb run exited with {status}");
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
