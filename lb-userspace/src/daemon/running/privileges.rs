//! The capabilities cut, after attaching, to what reloads use.

use super::Running;
use crate::daemon::privileges::{drop_to_kept, names};
use caps::Capability;
use tracing::{info, warn};

impl Running {
    /// Drops every capability but [`kept`] from this thread's effective,
    /// permitted, inheritable and ambient sets and from its bounding set,
    /// and sets no_new_privs, so nothing it runs can gain them back. Says
    /// what it kept, or why it could not drop them.
    ///
    /// Capabilities belong to threads: the telemetry pollers started
    /// before this are started again, from this thread, to run without
    /// them too.
    pub(super) fn drop_privileges(&mut self) {
        match drop_to_kept() {
            Ok(kept) => {
                let mut kept: Vec<Capability> = kept.into_iter().collect();
                kept.sort_by_key(Capability::index);
                info!(kept = %names(&kept), "capabilities dropped to what reloads use");
            }
            Err(e) => warn!("dropping capabilities, some may be kept: {e}"),
        }
        self.telemetry.restart(&self.config, &self.tables);
    }
}
