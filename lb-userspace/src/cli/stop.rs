//! `fabriclb stop`: stops the daemon running an instance, which leaves
//! the program forwarding with its last tables; `--detach` also removes
//! the instance (links and maps) for good.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use fabriclb::config::format_mac;
use fabriclb::dataplane::pins::PinDir;
use fabriclb::dataplane::{holder, remove_instance};
use fabriclb::inspect::maps::MapSet;
use fabriclb::netlink::Netlink;

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
    } else {
        println!("no fabriclb daemon was running for {}", dir.display());
    }
    if args.detach {
        forget_dlb_macs(&pins);
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

/// Takes the DLB MAC the instance put on its ports' unicast addresses off
/// them again (the instance's port map records where). An instance that
/// kept no such map, or a port gone, leaves nothing to take off; a
/// failure is said and the instance still removed.
fn forget_dlb_macs(pins: &PinDir) {
    let Ok(maps) = MapSet::from_pins(pins) else {
        return;
    };
    let ports: Vec<_> = match maps.ports() {
        Ok(ports) => ports.into_iter().filter(|p| p.dlb != [0; 6]).collect(),
        Err(e) => {
            eprintln!("reading the instance's ports: {e}; the DLB MAC stays on them");
            return;
        }
    };
    if ports.is_empty() {
        return;
    }
    let forgotten = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(anyhow::Error::from)
        .and_then(|runtime| {
            runtime.block_on(async {
                let netlink = Netlink::connect()?;
                for port in ports {
                    if nix::net::if_::if_indextoname(port.ifindex).is_err() {
                        continue;
                    }
                    netlink.del_unicast(port.ifindex, port.dlb).await?;
                    println!(
                        "DLB MAC {} taken off ifindex {}",
                        format_mac(port.dlb),
                        port.ifindex
                    );
                }
                anyhow::Ok(())
            })
        });
    if let Err(e) = forgotten {
        eprintln!("taking the DLB MAC off the ports: {e:#}");
    }
}
