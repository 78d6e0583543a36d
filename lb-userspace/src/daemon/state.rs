//! What the running daemon holds, and attaching the program to a port.

use anyhow::Result;
use aya::programs::{XdpMode, xdp::XdpLinkId};
use tracing::{info, warn};

use super::links::Ongoing;
use super::local::Follower;
use super::reload::FileVersion;
use super::telemetry::Telemetry;
use crate::config::{Config, XdpModeSetting};
use crate::dataplane::Dataplane;
use crate::dataplane::tables::Tables;

/// What the daemon runs on: the config in force, the tables it made, the
/// box's own addresses, where the program is attached, and the paths'
/// telemetry.
pub(super) struct Running {
    pub(super) config: Config,
    /// The file's identity when `config` was read from it.
    pub(super) version: Option<FileVersion>,
    pub(super) tables: Tables,
    pub(super) local: Follower,
    pub(super) links: Vec<(String, XdpLinkId)>,
    pub(super) telemetry: Telemetry,
    /// What the refreshes keep finding wrong, logged once each.
    pub(super) ongoing: Ongoing,
}

pub(super) fn attach(
    dp: &mut Dataplane,
    interface: &str,
    setting: XdpModeSetting,
) -> Result<XdpLinkId> {
    let (link, mode) = match setting {
        XdpModeSetting::Driver => (dp.attach(interface, XdpMode::Driver)?, "driver"),
        XdpModeSetting::Generic => (dp.attach(interface, XdpMode::Skb)?, "generic"),
        XdpModeSetting::Auto => match dp.attach(interface, XdpMode::Driver) {
            Ok(link) => (link, "driver"),
            Err(e) => {
                warn!(
                    interface,
                    "driver mode refused ({e}); falling back to generic mode, which is much slower"
                );
                (dp.attach(interface, XdpMode::Skb)?, "generic")
            }
        },
    };
    info!(interface, mode, "attached");
    Ok(link)
}
