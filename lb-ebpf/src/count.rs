//! Stage 5: what the daemon reads back: packets and bytes per verdict,
//! and per next hop its packets, bytes and recent load.

use lb_common::verdict::Reason;

use lb_common::{limits::NO_NEXTHOP, steer::Choice};

use crate::{
    maps::{FL_NH_STATS, FL_VERDICTS},
    select::pin,
};

/// Counts the verdict `process` returns for a frame of `len` bytes.
// By reference: passed by value, the enum's known range has LLVM lay out
// `process` differently, 13 instructions longer.
#[inline(always)]
pub fn verdict(reason: &Reason, len: u64) {
    if let Some(count) = FL_VERDICTS.get_ptr_mut(*reason as u32) {
        // SAFETY: per-CPU slot, no concurrent writer.
        unsafe {
            (*count).packets += 1;
            (*count).bytes += len;
        }
    }
}

/// Accounts a forwarded packet of `len` bytes to the next hop it took.
#[inline(always)]
pub fn forwarded(choice: &Choice, len: u64) {
    if let Some(stats) = FL_NH_STATS.get_ptr_mut(choice.nh_id) {
        // SAFETY: per-CPU slot, no concurrent writer.
        unsafe {
            (*stats).packets += 1;
            (*stats).bytes += len;
            if choice.sprayed {
                (*stats).sprayed += 1;
            }
            if let Some(epoch) = choice.epoch {
                (*stats).load.add(epoch, len);
            }
        }
    }
    if choice.override_index != NO_NEXTHOP {
        pin::count(choice.override_index, len, false);
    }
}
