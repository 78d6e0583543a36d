//! What the running daemon holds, and attaching the program to a port.

use anyhow::Result;
use aya::programs::{XdpMode, xdp::XdpLinkId};
use tracing::{info, warn};

use super::config_file::ConfigWatch;
use super::ingress::Ingress;
use super::kernel_routes::KernelWatch;
use super::link_events::LinkWatch;
use super::links::Ongoing;
use super::local::Follower;
use super::sonic::Sonic;
use super::telemetry::Telemetry;
use crate::config::{Config, XdpModeSetting};
use crate::dataplane::tables::Tables;
use crate::dataplane::{Dataplane, occupant};

/// What the daemon runs on: the config in force, the tables it made, the
/// box's own addresses, where the program is attached, and the paths'
/// telemetry.
pub(super) struct Running {
    /// What the tables are built from: the file's config with the routes
    /// and groups learned from the kernel in place of the groups that
    /// follow it.
    pub(super) config: Config,
    /// The config as the file has it (with SONiC's settings over it under
    /// `--sonic`).
    pub(super) file: Config,
    /// The kernel's routes, for the groups that follow them.
    pub(super) kernel: KernelWatch,
    /// The config file's version in force, and a changed one settling.
    pub(super) watch: ConfigWatch,
    pub(super) tables: Tables,
    pub(super) local: Follower,
    /// Links and neighbours, followed by events.
    pub(super) links: LinkWatch,
    pub(super) ingress: Vec<Ingress>,
    pub(super) telemetry: Telemetry,
    /// What the refreshes keep finding wrong, logged once each.
    pub(super) ongoing: Ongoing,
    /// `run --sonic`: SONiC's settings, which `file` has over the config
    /// file's.
    pub(super) sonic: Option<Sonic>,
}

/// The program on one ingress interface that has it.
pub(super) struct Attached {
    pub(super) link: XdpLinkId,
    /// The device it went onto: one deleted and created again under the
    /// same name has another, and no program.
    pub(super) ifindex: u32,
}

pub(super) fn attach(
    dp: &mut Dataplane,
    interface: &str,
    setting: XdpModeSetting,
) -> Result<Attached> {
    if let Some(attached) = super::adopt::link(dp, interface, setting)? {
        return Ok(attached);
    }
    super::ports::note_port(dp, interface)?;
    let mut attach_in = |mode| {
        dp.attach(interface, mode)
            .map_err(|e| occupant::attach_error(interface, e))
    };
    let (link, mode) = match setting {
        XdpModeSetting::Driver => (attach_in(XdpMode::Driver)?, "driver"),
        XdpModeSetting::Generic => (attach_in(XdpMode::Skb)?, "generic"),
        XdpModeSetting::Auto => match attach_in(XdpMode::Driver) {
            Ok(link) => (link, "driver"),
            Err(e) if e.mode_refused() => {
                warn!(
                    interface,
                    "driver mode refused ({e}); falling back to generic mode, which is much slower"
                );
                (attach_in(XdpMode::Skb)?, "generic")
            }
            Err(e) => return Err(e.into()),
        },
    };
    info!(interface, mode, "attached");
    Ok(Attached {
        link,
        ifindex: ifindex(interface).unwrap_or(0),
    })
}

/// `interface`'s index now; `None` while no such interface exists.
pub(super) fn ifindex(interface: &str) -> Option<u32> {
    nix::net::if_::if_nametoindex(interface).ok()
}
