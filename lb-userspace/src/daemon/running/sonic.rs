//! SONiC's rows over the file's config, applied; counters offered to its
//! COUNTERS_DB.

use tracing::{error, info};

use super::Running;
use crate::config::{self, Config};
use crate::daemon::sonic::over_learned;
use crate::dataplane::Dataplane;
use crate::metrics::NextHopSample;
use crate::netlink::Netlink;
use crate::sonic::Rows;

impl Running {
    /// What the tables are built from: `file` with the learned groups in
    /// place, and under `--sonic` their ARS objects.
    pub(super) fn effective(&mut self, file: &Config) -> Config {
        over_learned(&mut self.sonic, self.kernel.effective(file))
    }

    /// SONiC's rows changed: the file's config with them over it is
    /// applied as a reload; if the file's groups stay as they were, the
    /// groups learned from APPL_DB's routes (or from the kernel's) are
    /// learned again, with the ARS objects their next hops lead to.
    pub(super) async fn sonic_rows(&mut self, rows: Rows, netlink: &Netlink, dp: &mut Dataplane) {
        let Some(sonic) = &mut self.sonic else {
            return;
        };
        let routes = sonic.take(&rows);
        let config = sonic.overlaid();
        let routes_changed = self.kernel.take_appl(routes);
        if config != self.file {
            info!("sonic: SONiC's settings changed: reloading");
            if let Err(e) = self.apply(config, netlink, dp).await {
                error!("SONiC's settings refused, the running config stays: {e:#}");
            }
        } else {
            // The file's groups stay: APPL_DB's routes, or the ARS objects
            // their learned groups take, may have changed.
            let old = self.config.clone();
            match self.relearn(netlink, dp).await {
                Ok(true) if routes_changed => info!(
                    groups = self.tables.groups.len(),
                    routes = self.tables.routes.len(),
                    "APPL_DB routes in the maps"
                ),
                Ok(true) => {
                    info!("sonic: SONiC's settings for the learned groups changed");
                    let changes = config::changes(&old, &self.config);
                    for change in &changes {
                        info!("config change: {change}");
                    }
                    info!(changes = changes.len(), "config reloaded");
                }
                Ok(false) => {}
                Err(e) => error!("SONiC's rows refused, the running tables stay: {e:#}"),
            }
        }
    }

    /// Offers the next hops' counters for COUNTERS_DB.
    pub(super) fn sonic_publish(&self, samples: &[NextHopSample<'_>]) {
        if let Some(sonic) = &self.sonic {
            sonic.publish(samples);
        }
    }
}
