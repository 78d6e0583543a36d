//! Telemetry samples into path qualities and spray sequences; silent
//! paths back to the default; pollers following reloads.

use super::Running;
use crate::daemon::telemetry::Batch;
use crate::dataplane::Dataplane;
use std::time::Instant;
use tracing::warn;

impl Running {
    pub(super) fn telemetry_batch(&mut self, batch: Batch, dp: &mut Dataplane) {
        let changes = self.telemetry.apply(batch, &self.tables);
        self.write_qualities(&changes, dp);
    }

    pub(super) fn telemetry_expire(&mut self, dp: &mut Dataplane) {
        let changes = self.telemetry.expire(Instant::now(), &self.tables);
        self.write_qualities(&changes, dp);
    }

    /// After a reload or a change of learned next hops: the pollers of
    /// the new config (the running ones when it changed nothing they use),
    /// and the qualities of next hops that gained or lost a source.
    pub(super) fn telemetry_follow(&mut self, dp: &mut Dataplane) {
        self.telemetry.follow(&self.config, &self.tables);
        let changes = self.telemetry.changes(&self.tables);
        self.write_qualities(&changes, dp);
    }

    fn write_qualities(&mut self, changes: &[(u32, u32)], dp: &mut Dataplane) {
        if changes.is_empty() {
            return;
        }
        if let Err(e) = self.tables.write_qualities(dp, changes) {
            warn!("writing path qualities: {e}");
        }
    }
}
