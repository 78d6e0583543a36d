//! The installed binary run briefly as the daemon it is: in a network
//! namespace of its own with a veth pair, pinned into a bpffs of its own,
//! until it is ready (this kernel's verifier took the program, it is on
//! its port, the maps are programmed); then `status` read from its pins,
//! `reload` answered over its control socket, SIGTERM, and `stop --detach`
//! taking the program off. The package's binary is built apart from the
//! one every other test runs (static, for musl), so this is where it
//! meets the kernel. Everything is removed again, also on failure.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};

use crate::{capture, run};

/// How long the daemon may take to be ready: its program's verification
/// is most of it (under a second here).
const READY_WAIT: Duration = Duration::from_secs(30);
const INSTANCE: &str = "package-check";

/// A namespace, a bpffs and a directory of the check's own, and the daemon
/// while it runs; dropped, all of them go.
struct Bed {
    ns: String,
    bpffs: PathBuf,
    dir: PathBuf,
    daemon: Option<Child>,
}

impl Bed {
    fn up(dir: &Path) -> Result<Self> {
        let bed = Self {
            ns: format!("fabriclb-pkg-{}", std::process::id()),
            bpffs: dir.join("bpffs"),
            dir: dir.to_owned(),
            daemon: None,
        };
        fs::create_dir_all(&bed.bpffs)?;
        run(Command::new("ip").args(["netns", "add", &bed.ns]))?;
        run(Command::new("mount")
            .args(["-t", "bpf", "bpf"])
            .arg(&bed.bpffs))?;
        for args in [
            &["link", "add", "in0", "type", "veth", "peer", "name", "out0"][..],
            &["link", "set", "in0", "up"],
            &["link", "set", "out0", "up"],
        ] {
            run(Command::new("ip").args(["-n", &bed.ns]).args(args))?;
        }
        Ok(bed)
    }

    /// `fabriclb ARGS` inside the namespace.
    fn fabriclb(&self, binary: &Path) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &self.ns]).arg(binary);
        command
    }

    fn pins(&self) -> Vec<String> {
        vec![
            "--bpffs".into(),
            self.bpffs.display().to_string(),
            "--instance".into(),
            INSTANCE.into(),
        ]
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        if let Some(mut daemon) = self.daemon.take() {
            let _ = daemon.kill();
            let _ = daemon.wait();
        }
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
        let _ = Command::new("umount").arg(&self.bpffs).status();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

pub fn run_daemon(binary: &Path, dir: &Path) -> Result<()> {
    if dir.exists() {
        fs::remove_dir_all(dir)?;
    }
    let mut bed = Bed::up(dir)?;
    let config = dir.join("fabriclb.toml");
    fs::write(
        &config,
        "[switch]\ninterfaces = [\"in0\"]\n\n[[group]]\nname = \"g\"\n\
         next_hops = [{ interface = \"out0\", mac = \"02:00:00:00:00:02\" }]\n\n\
         [[route]]\nprefix = \"10.0.0.0/8\"\ngroup = \"g\"\n",
    )?;
    let run_dir = dir.join("run");
    let log_path = dir.join("daemon.log");
    let mut command = bed.fabriclb(binary);
    command
        .args(["run", "--no-watch", "--config"])
        .arg(&config)
        .args(bed.pins())
        .arg("--run-dir")
        .arg(&run_dir)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stderr(fs::File::create(&log_path)?);
    bed.daemon = Some(command.spawn().context("starting the installed fabriclb")?);
    let log = || fs::read_to_string(&log_path).unwrap_or_default();
    let deadline = Instant::now() + READY_WAIT;
    while !log().contains(" ready version=") {
        if let Some(status) = bed
            .daemon
            .as_mut()
            .and_then(|d| d.try_wait().ok())
            .flatten()
        {
            bail!("the installed fabriclb run exited ({status}):\n{}", log());
        }
        ensure!(
            Instant::now() < deadline,
            "the installed fabriclb run not ready after {READY_WAIT:?}:\n{}",
            log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    let status = capture(
        bed.fabriclb(binary)
            .args(["status", "--config"])
            .arg(&config)
            .args(bed.pins()),
    )?;
    for said in ["group g (id 0): mode ecmp", "ingress ports: in0"] {
        ensure!(status.contains(said), "status lacks {said:?}:\n{status}");
    }
    let reload = capture(
        Command::new(binary)
            .args(["reload", "--instance", INSTANCE, "--run-dir"])
            .arg(&run_dir),
    )?;
    ensure!(
        reload.trim() == format!("{} unchanged", config.display()),
        "reload said {reload:?}"
    );

    let daemon = bed.daemon.take().context("the daemon")?;
    terminate(daemon.id())?;
    let exited = daemon.wait_with_output()?;
    ensure!(
        exited.status.success(),
        "SIGTERM: {}\n{}",
        exited.status,
        log()
    );
    run(bed
        .fabriclb(binary)
        .args(["stop", "--detach"])
        .args(bed.pins()))?;
    let link = capture(Command::new("ip").args(["-n", &bed.ns, "link", "show", "in0"]))?;
    ensure!(
        !link.contains("xdp"),
        "XDP left on in0 after stop --detach:\n{link}"
    );
    ensure!(
        !log().contains("WARN") && !log().contains("ERROR"),
        "the daemon warned:\n{}",
        log()
    );
    Ok(())
}

/// SIGTERM to `pid`, as systemd stops the unit.
fn terminate(pid: u32) -> Result<()> {
    run(Command::new("kill").args(["-TERM", &pid.to_string()]))
}
