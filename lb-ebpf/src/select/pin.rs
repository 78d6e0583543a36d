//! Traffic-engineering overrides: the first of the group's overrides the
//! packet matches (`lb_common::select::overrides`), and its counters.

use lb_common::{
    abi::GroupEntry,
    limits::MAX_OVERRIDES_PER_GROUP,
    packet::parse::FlowFields,
    select::overrides::{matches, override_index},
    steer::Pin,
};

use crate::maps::{FL_OVERRIDES, FL_OVR_STATS};

/// The first of `group`'s overrides a packet of `flow` from `ingress`
/// matches; the daemon writes them most specific first.
#[inline(always)]
pub fn pinned(group_id: u32, group: &GroupEntry, flow: &FlowFields, ingress: u32) -> Pin {
    for i in 0..MAX_OVERRIDES_PER_GROUP {
        if i >= group.override_count {
            break;
        }
        let index = override_index(group_id, group.override_half, i);
        let Some(entry) = FL_OVERRIDES.get(index) else {
            break;
        };
        if matches(entry, flow, ingress) {
            return Pin {
                index,
                slot: entry.slot,
            };
        }
    }
    Pin::NONE
}

/// Counts a packet of `len` bytes sent to override `index`'s member, or,
/// with `fallback`, one that matched while that member was unusable.
#[inline(always)]
pub fn count(index: u32, len: u64, fallback: bool) {
    if let Some(stats) = FL_OVR_STATS.get_ptr_mut(index) {
        // SAFETY: per-CPU slot, no concurrent writer.
        unsafe {
            if fallback {
                (*stats).fallbacks += 1;
            } else {
                (*stats).packets += 1;
                (*stats).bytes += len;
            }
        }
    }
}
