//! Start-up onto a pinned instance: the data plane loaded onto what
//! `<bpffs>/fabriclb/<instance>/` holds (a new instance pinned there, a
//! compatible one taken over, an incompatible one's maps replaced), and
//! the config's tables built against what the taken-over maps hold, so
//! that only what differs is written.

use std::path::Path;

use anyhow::{Context, Result};
use aya::programs::xdp::XdpLinkId;
use tracing::{info, warn};

use crate::config::{Config, NextHopSpec, XdpModeSetting};
use crate::dataplane::tables::Tables;
use crate::dataplane::{Dataplane, Pinned, occupant};
use lb_common::abi::NextHop;

/// Loads the program onto the instance `instance` under `bpffs`, saying
/// what it found there.
pub(super) fn load(bpffs: &Path, instance: &str, flowlet_table_size: u32) -> Result<Dataplane> {
    let pinned = Pinned::open(bpffs, instance, flowlet_table_size)?;
    let plan = pinned.plan();
    let dir = pinned.dir().display().to_string();
    if plan.reused.is_empty() {
        info!(pins = dir, "pinning a new instance");
    } else {
        info!(
            pins = dir,
            reused = plan.reused.len(),
            replaced = %plan.replaced.join(","),
            "taking over the pinned instance: its flowlet state and counters are kept"
        );
    }
    Dataplane::load_pinned(flowlet_table_size, pinned).context("loading the XDP program")
}

/// The config's tables, and what the maps hold when they were taken over
/// (`None` for a new instance): the tables are built against it, keeping
/// the buckets and flowlet generations the data plane has.
pub(super) fn tables(
    dp: &Dataplane,
    config: &Config,
    resolve: impl Fn(&NextHopSpec) -> NextHop,
) -> Result<(Tables, Option<Tables>)> {
    let fresh = Tables::build(config, None, &resolve)?;
    if !dp.took_over() {
        return Ok((fresh, None));
    }
    let held = Tables::read_back(dp, &fresh).context("reading the pinned maps back")?;
    let tables = Tables::build(config, Some(&held), &resolve)?;
    Ok((tables, Some(held)))
}

/// The program on `interface` through the link pinned for it, if one is.
/// The link keeps the mode it was made in: a config that asks for another
/// is told so, since changing it means detaching.
pub(super) fn link(
    dp: &mut Dataplane,
    interface: &str,
    setting: XdpModeSetting,
) -> Result<Option<XdpLinkId>> {
    let Some(link) = dp.adopt_link(interface)? else {
        return Ok(None);
    };
    let mode = occupant::on(interface).map_or("unknown", |o| o.mode);
    info!(
        interface,
        mode, "took over the pinned link: the new program swapped in, never detached"
    );
    let wanted = match setting {
        XdpModeSetting::Driver => Some("driver"),
        XdpModeSetting::Generic => Some("generic"),
        XdpModeSetting::Auto => None,
    };
    if let Some(wanted) = wanted.filter(|w| *w != mode) {
        warn!(
            interface,
            mode,
            "xdp_mode {wanted} applies once the program is attached anew: \
             fabriclb stop --detach, then run"
        );
    }
    Ok(Some(link))
}
