//! Drains: an ECMP group that keeps flowlet state for a while, so that
//! its flows change next hop only where their flowlets end (after a
//! switch from a flowlet mode, or a change of its overrides), and the end
//! of that.

use std::time::{Duration, Instant};

use lb_common::abi::GroupEntry;
use lb_common::select::flowlet::MODE_ECMP;

use super::{GroupTable, Tables};
use crate::config::Mode;
use crate::dataplane::{Dataplane, DataplaneError};

/// How many flowlet gaps a group switched to ECMP drains for. A flow that
/// pauses within them moves at a flowlet boundary; one that never pauses
/// that long is hashed to its ECMP next hop when the drain ends, as it
/// would never have left a flowlet in flowlet mode either.
pub const DRAIN_GAPS: u32 = 8;

/// When a drain that starts `now` in a group whose gap is `gap_ns` ends.
pub(super) fn drain_end(gap_ns: u64, now: Instant) -> Instant {
    now + Duration::from_nanos(gap_ns) * DRAIN_GAPS
}

/// A group's drain after a reload from `old` to `mode`: it starts when a
/// flowlet mode switches to ECMP (busy flows finish their flowlets), goes
/// on through reloads that keep ECMP, and stops when a flowlet mode is
/// back. The mode drained from, and when the drain ends.
pub(super) fn drain(old: Option<&GroupTable>, mode: Mode, gap_us: u32) -> (u32, Option<Instant>) {
    let Some(old) = old.filter(|_| mode == Mode::Ecmp) else {
        return (MODE_ECMP, None);
    };
    if old.entry.mode != MODE_ECMP {
        let gap_ns = u64::from(gap_us) * 1000;
        (old.entry.mode, Some(drain_end(gap_ns, Instant::now())))
    } else {
        (old.entry.draining, old.drain_until)
    }
}

impl Tables {
    /// Ends the drains due by `now`, in the maps too; returns the groups'
    /// names. A group whose write fails stays draining, to be ended again.
    pub fn end_drains(
        &mut self,
        dp: &mut Dataplane,
        now: Instant,
    ) -> Result<Vec<String>, DataplaneError> {
        let mut ended = Vec::new();
        for group in &mut self.groups {
            let due = group.drain_until.is_some_and(|until| until <= now);
            if due && group.pending.is_none() {
                let entry = GroupEntry {
                    draining: MODE_ECMP,
                    ..group.entry
                };
                dp.set_group(group.id, entry)?;
                group.entry = entry;
                group.drain_until = None;
                ended.push(group.name.clone());
            }
        }
        Ok(ended)
    }
}
