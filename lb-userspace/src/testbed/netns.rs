//! Running commands in the testbed's namespaces, and threads inside them.

use std::fs::File;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use nix::sched::{CloneFlags, setns};

pub(super) fn run(cmd: &mut Command) -> Result<()> {
    output(cmd).map(drop)
}

/// Runs `cmd` and returns what it printed; an error with its stderr if it
/// failed.
pub(super) fn output(cmd: &mut Command) -> Result<String> {
    let output = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {cmd:?}"))?;
    if !output.status.success() {
        bail!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

pub(super) fn ip(args: &[&str]) -> Result<()> {
    run(Command::new("ip").args(args))
}

pub(super) fn ip_tc(ns: &str, args: &[&str]) -> Result<()> {
    run(Command::new("tc").args(["-n", ns]).args(args))
}

pub(super) fn ethtool(ns: &str, args: &[&str]) -> Result<()> {
    run(Command::new("ip")
        .args(["netns", "exec", ns, "ethtool"])
        .args(args))
}

/// Runs `f` on a thread that has entered network namespace `ns`; sockets it
/// opens live there.
pub fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> Result<T> {
    let file =
        File::open(format!("/run/netns/{ns}")).with_context(|| format!("opening netns {ns}"))?;
    std::thread::spawn(move || -> Result<T> {
        setns(&file, CloneFlags::CLONE_NEWNET).context("setns")?;
        Ok(f())
    })
    .join()
    .map_err(|_| anyhow::anyhow!("thread in netns panicked"))?
}

/// Runs `request` with an rtnetlink connection of namespace `ns`'s own,
/// on a runtime of its own, and returns what it returns.
pub fn rtnetlink_in<T, F, Fut>(ns: &str, request: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce(rtnetlink::Handle) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<T>>,
{
    in_netns(ns, move || -> Result<T> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(async {
            let (connection, handle, _) = rtnetlink::new_connection()?;
            tokio::spawn(connection);
            request(handle).await
        })
    })?
}

/// Makes `command`'s process die by `signal` when the thread that spawns
/// it exits without stopping it (killed, or exiting from the testbed's
/// signal watcher), and start with no signal blocked: it inherits the
/// watcher's blocked SIGINT/SIGTERM otherwise, and could never be stopped.
/// The setting survives `ip netns exec`'s exec.
pub(super) fn die_with_parent(command: &mut Command, signal: nix::sys::signal::Signal) {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: prctl and sigprocmask are async-signal-safe.
    unsafe {
        command.pre_exec(move || {
            use nix::sys::signal::{SigSet, SigmaskHow, sigprocmask};
            sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)?;
            nix::sys::prctl::set_pdeathsig(signal)?;
            Ok(())
        });
    }
}

/// Pins the calling thread to CPU `index` (modulo the CPUs there are).
pub(super) fn pin_to_cpu(index: usize) -> Result<()> {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let mut set = nix::sched::CpuSet::new();
    set.set(index % cpus)?;
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)?;
    Ok(())
}
