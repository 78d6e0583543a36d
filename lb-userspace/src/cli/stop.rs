//! `fabriclb stop`: stops the daemon running an instance, which leaves
//! the program forwarding with its last tables; `--detach` also removes
//! the instance (links and maps) for good.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use fabriclb::dataplane::{holder, remove_instance};

use super::pins::PinArgs;

#[derive(clap::Args)]
pub struct StopArgs {
    #[command(flatten)]
    pins: PinArgs,
    /// Also take the program off every interface and remove the pinned
    /// maps.
    #[arg(long)]
    detach: bool,
}

/// How long the daemon gets to exit after SIGTERM.
const EXIT_WAIT: Duration = Duration::from_secs(10);

pub fn run(args: StopArgs) -> Result<()> {
    let pins = args.pins.dir();
    let dir = pins.dir();
    if !dir.is_dir() {
        bail!("no instance pinned at {}", dir.display());
    }
    if let Some(pid) = holder(dir) {
        let target = nix::unistd::Pid::from_raw(pid as i32);
        nix::sys::signal::kill(target, nix::sys::signal::Signal::SIGTERM)?;
        let deadline = Instant::now() + EXIT_WAIT;
        while holder(dir) == Some(pid) {
            if Instant::now() > deadline {
                bail!("fabriclb (pid {pid}) still runs {EXIT_WAIT:?} after SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        println!("stopped fabriclb (pid {pid})");
    }
    if args.detach {
        let removed = remove_instance(&pins)?;
        println!(
            "removed {} ({removed} pins): the program is detached",
            dir.display()
        );
    } else {
        println!("the program keeps forwarding from {}", dir.display());
    }
    Ok(())
}
