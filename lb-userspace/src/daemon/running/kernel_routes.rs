//! Routes learned from the kernel (or APPL_DB) into the tables, a burst at
//! a time, and read again when events were lost.

use super::Running;
use crate::config::Config;
use crate::daemon::links::Snapshot;
use crate::dataplane::Dataplane;
use crate::netlink::Netlink;
use anyhow::Result;
use tracing::{info, warn};

impl Running {
    /// Writes a burst of kernel route events: learns what they changed
    /// and moves the tables to it; dumps again first if events were lost.
    pub(super) async fn kernel_routes(&mut self, netlink: &Netlink, dp: &mut Dataplane) {
        let first = self.kernel.take_pending();
        let burst = first.map(|first| first.elapsed());
        let changed = match self.relearn(netlink, dp).await {
            Ok(changed) => changed,
            Err(e) => {
                warn!("kernel routes: {e:#}; retrying at the next event or refresh");
                self.kernel.mark_stale();
                return;
            }
        };
        if let (Some(first), Some(burst), true) = (first, burst, changed) {
            info!(
                event_to_write_us = first.elapsed().as_micros() as u64,
                burst_us = burst.as_micros() as u64,
                groups = self.tables.groups.len(),
                routes = self.tables.routes.len(),
                "kernel routes in the maps"
            );
        }
    }

    /// Reads the kernel's routes again if they went stale (lost events, a
    /// failed stream); at each refresh.
    pub(super) async fn refresh_kernel_routes(&mut self, netlink: &Netlink, dp: &mut Dataplane) {
        if self.kernel.stale() {
            self.kernel_routes(netlink, dp).await;
        }
    }

    /// Learns again, and moves the tables to what was learned; returns
    /// whether they changed.
    pub(super) async fn relearn(&mut self, netlink: &Netlink, dp: &mut Dataplane) -> Result<bool> {
        let file = self.file.clone();
        let report = self.kernel.relearn(&file, netlink).await?;
        let config = self.effective(&file);
        if config == self.config {
            return Ok(false);
        }
        let known = |c: &Config, name: &str| {
            c.groups
                .iter()
                .flat_map(|g| &g.next_hops)
                .any(|s| s.interface == name)
        };
        let new_port = config
            .groups
            .iter()
            .flat_map(|g| &g.next_hops)
            .any(|s| !known(&self.config, &s.interface));
        if new_port {
            self.links.view = Snapshot::take(netlink, &config, &mut self.ongoing).await?;
        }
        self.links
            .view
            .solicit_unconfirmed(&config, &mut self.ongoing);
        let tables = self.switch_tables(&config, dp, &report.splits)?;
        self.tables = tables;
        self.config = config;
        self.telemetry_follow(dp);
        Ok(true)
    }
}
