//! The box's own addresses into the route tables as their events come,
//! and read again on the refresh tick when events were lost.

use tracing::{error, warn};

use super::Running;
use crate::daemon::local::{LocalError, program, report_shadowed};
use crate::dataplane::Dataplane;
use crate::netlink::{AddressEvent, Netlink};

impl Running {
    /// Applies address events at once.
    pub(super) async fn address_events(
        &mut self,
        events: Option<Vec<AddressEvent>>,
        netlink: &Netlink,
        dp: &mut Dataplane,
    ) {
        let changed = self.local.take(events);
        if self.local.stale() {
            // Lost events: read now rather than wait for the tick.
            self.refresh_local(netlink, dp).await;
        } else if changed {
            self.write_local(dp);
        }
    }

    /// On the refresh tick: reads the addresses again if events failed or
    /// were lost, and tries to subscribe again.
    pub(super) async fn refresh_local(&mut self, netlink: &Netlink, dp: &mut Dataplane) {
        if !self.local.needs_read() {
            return;
        }
        match netlink.addresses().await {
            Ok(addresses) => {
                self.local.replace(addresses, true);
                self.write_local(dp);
            }
            Err(e) => warn!("{}", LocalError::from(e)),
        }
    }

    /// Writes what the local addresses changed in the route tries. On a
    /// failed write the tries are put back and the next read tries again.
    fn write_local(&mut self, dp: &mut Dataplane) {
        let previous = self.tables.clone();
        program(&self.local, &mut self.tables);
        if self.tables.local() == previous.local() {
            return;
        }
        match self.tables.write(dp, Some(&previous)) {
            Ok(()) => report_shadowed(Some(&previous), &self.tables),
            Err(e) => {
                let e = LocalError::from(e);
                error!("{e}; reading the addresses again at the next refresh");
                if let Err(undo) = previous.write(dp, Some(&self.tables)) {
                    error!("restoring the route tables: {undo}");
                }
                self.tables = previous;
                self.local.mark_stale();
            }
        }
    }
}
