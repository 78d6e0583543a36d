//! Live reload: a new config is validated, then written into the maps in
//! place, entry by entry, without detaching; an invalid one changes nothing.

use std::path::Path;

use anyhow::{Context, Result};
use tracing::{error, info, warn};

use super::links::Snapshot;
use super::local;
use super::state::{Running, attach};
use crate::config::{self, Config};
use crate::dataplane::Dataplane;
use crate::dataplane::tables::Tables;
use crate::netlink::Netlink;

/// A file's modification time, size and inode: enough to notice an edit,
/// also one saved by renaming a new file over the old.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct FileVersion {
    modified: std::time::SystemTime,
    len: u64,
    inode: u64,
}

impl FileVersion {
    pub(super) fn of(path: &Path) -> Option<Self> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).ok()?;
        Some(Self {
            modified: meta.modified().ok()?,
            len: meta.len(),
            inode: meta.ino(),
        })
    }
}

impl Running {
    /// Reads the config again and, if it is valid, moves the data plane to
    /// it without detaching: maps are rewritten in place, entry by entry.
    /// An invalid config changes nothing.
    pub(super) async fn reload(&mut self, path: &Path, netlink: &Netlink, dp: &mut Dataplane) {
        self.version = FileVersion::of(path);
        let config = match config::load(path) {
            Ok(config) => {
                for warning in &config.warnings {
                    warn!("{warning}");
                }
                config
            }
            Err(e) => {
                error!("new config refused, the running one stays: {e}");
                return;
            }
        };
        if let Err(e) = self.apply(config, netlink, dp).await {
            error!("new config refused, the running one stays: {e:#}");
        }
    }

    async fn apply(&mut self, config: Config, netlink: &Netlink, dp: &mut Dataplane) -> Result<()> {
        let changes = config::changes(&self.config, &config);
        if changes.is_empty() {
            info!("config unchanged");
            return Ok(());
        }
        let old = &self.config.switch;
        if config.switch.flowlet_table_size != old.flowlet_table_size {
            warn!(
                "switch.flowlet_table_size {} -> {} takes effect at the next start; \
                 the table keeps its size until then",
                old.flowlet_table_size, config.switch.flowlet_table_size
            );
        }
        let snapshot = Snapshot::take(netlink, &config, &mut self.ongoing).await?;
        snapshot.solicit_missing(&config, &mut self.ongoing);
        let tables = Tables::build(&config, Some(&self.tables), |spec| snapshot.resolve(spec))?;
        if let Err(e) = tables.write(dp, Some(&self.tables)) {
            // Put back what was written so far: the old tables, diffed
            // against the new ones, touch exactly those entries.
            if let Err(undo) = self.tables.write(dp, Some(&tables)) {
                error!("restoring the running tables after a failed reload: {undo}");
            }
            return Err(e).context("programming the maps");
        }
        let old_tables = std::mem::replace(&mut self.tables, tables);
        local::report_shadowed(Some(&old_tables), &self.tables);

        let mut attached = Vec::new();
        for link in std::mem::take(&mut self.links) {
            if config.switch.interfaces.contains(&link.interface)
                && config.switch.xdp_mode == old.xdp_mode
            {
                attached.push(link);
            } else {
                let interface = link.interface;
                match dp.detach(link.link) {
                    Ok(()) => info!(interface, "detached"),
                    Err(e) => warn!(interface, "detaching: {e}"),
                }
            }
        }
        for interface in &config.switch.interfaces {
            if !attached.iter().any(|a| &a.interface == interface) {
                match attach(dp, interface, config.switch.xdp_mode) {
                    Ok(link) => attached.push(link),
                    Err(e) => error!(interface, "not attached: {e:#}"),
                }
            }
        }
        self.links = attached;
        for change in &changes {
            info!("config change: {change}");
        }
        self.config = config;
        self.telemetry_restart(dp);
        info!(changes = changes.len(), "config reloaded");
        Ok(())
    }
}
