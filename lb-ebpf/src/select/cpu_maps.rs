//! This CPU's maps as `lb_common::steer` reads and writes them: which next
//! hops are usable, their qualities and loads, the flowlet table, the
//! spray cursors, the group's counters and the pending flow event.

use aya_ebpf::{
    cty::c_void,
    helpers::{bpf_get_smp_processor_id, bpf_loop},
};
use lb_common::{
    abi::{GroupEntry, NEXTHOP_USABLE, events::PendingEvent},
    limits::{BUCKETS_PER_GROUP, MAX_NEXTHOPS_PER_GROUP, NO_NEXTHOP},
    route::Destination,
    select::{
        choice::Drawn,
        flowlet::FlowletState,
        load::{load_epoch, member_load},
    },
    steer::{Counted, Maps, MemberWalk, member},
};

use super::{flowlet_clock, pin};
use crate::maps::{
    FL_CLASS_LOAD, FL_CLASS_PEERS, FL_FLOWLETS, FL_GROUP_STATS, FL_LOAD_CLOCK, FL_NEXTHOPS,
    FL_NH_PEER_LOAD, FL_NH_STATS, FL_PATH_QUALITY, FL_SPRAY, FL_SPRAY_CURSOR, flowlet_table_size,
};
use crate::report;

/// The maps, as seen from the CPU the program runs on.
pub(super) struct CpuMaps;

impl Maps for CpuMaps {
    #[inline(always)]
    fn usable(&self, nh_id: u32) -> bool {
        FL_NEXTHOPS
            .get(nh_id)
            .is_some_and(|nh| nh.flags & NEXTHOP_USABLE != 0)
    }

    #[inline(always)]
    fn quality(&self, destination: Destination, nh_id: u32) -> u32 {
        quality(destination, nh_id)
    }

    #[inline(always)]
    fn slot_of(&self, group: &GroupEntry, nh_id: u32) -> Option<u32> {
        let mut search = SlotSearch {
            group,
            nh_id,
            found: NO_NEXTHOP,
        };
        over_slots(&mut search, find_slot);
        (search.found != NO_NEXTHOP).then_some(search.found)
    }

    #[inline(always)]
    fn choose(
        &self,
        group: &GroupEntry,
        destination: Destination,
        epoch: u64,
        current: Option<u32>,
        own: u64,
        drawn: Drawn,
    ) -> Option<u32> {
        let mut walk = Walk {
            group,
            destination,
            epoch,
            walk: MemberWalk::new(drawn, current, own),
        };
        over_slots(&mut walk, consider_member);
        walk.walk.decide()
    }

    #[inline(always)]
    fn spray_entry(&self, destination: Destination, index: u32) -> Option<u32> {
        FL_SPRAY
            .get(destination.spray_row() * BUCKETS_PER_GROUP + index)
            .copied()
    }

    #[inline(always)]
    fn next_position(&mut self, destination: Destination) -> Option<u64> {
        let cursor = FL_SPRAY_CURSOR.get_ptr_mut(destination.spray_row())?;
        // SAFETY: a per-CPU slot, no concurrent writer.
        unsafe {
            let at = *cursor;
            *cursor = at.wrapping_add(1);
            Some(at)
        }
    }

    #[inline(always)]
    fn cpu(&self) -> u32 {
        // SAFETY: a helper without arguments or side effects.
        unsafe { bpf_get_smp_processor_id() }
    }

    #[inline(always)]
    fn load_epoch(&mut self, len: u64) -> Option<u64> {
        let clock = FL_LOAD_CLOCK.get_ptr_mut(0)?;
        // SAFETY: a per-CPU slot, no concurrent writer.
        unsafe {
            *clock += len;
            Some(load_epoch(*clock))
        }
    }

    #[inline(always)]
    fn now(&self) -> u64 {
        flowlet_clock()
    }

    #[inline(always)]
    fn flowlet_table_size(&self) -> u32 {
        flowlet_table_size()
    }

    #[inline(always)]
    fn flowlet(&self, index: u32) -> Option<FlowletState> {
        FL_FLOWLETS.get(index).copied()
    }

    #[inline(always)]
    fn set_flowlet(&mut self, index: u32, state: FlowletState) {
        if let Some(slot) = FL_FLOWLETS.get_ptr_mut(index) {
            // SAFETY: this CPU's value; no concurrent writer.
            unsafe { *slot = state };
        }
    }

    #[inline(always)]
    fn move_load(&mut self, from: u32, to: u32, epoch: u64, bytes: u64) {
        if let Some(stats) = FL_NH_STATS.get_ptr_mut(from) {
            // SAFETY: per-CPU slot, no concurrent writer.
            unsafe { (*stats).load.remove(epoch, bytes) };
        }
        if let Some(stats) = FL_NH_STATS.get_ptr_mut(to) {
            // SAFETY: as above.
            unsafe { (*stats).load.add(epoch, bytes) };
        }
    }

    #[inline(always)]
    fn add_class_load(&mut self, destination: Destination, slot: u32, epoch: u64, len: u64) {
        add_class_load(destination.class_load_index(slot), epoch, len);
    }

    #[inline(always)]
    fn remove_class_load(&mut self, destination: Destination, slot: u32, epoch: u64, bytes: u64) {
        remove_class_load(destination.class_load_index(slot), epoch, bytes);
    }

    #[inline(always)]
    fn count(&mut self, group: u32, counted: Counted) {
        let Some(stats) = FL_GROUP_STATS.get_ptr_mut(group) else {
            return;
        };
        // SAFETY: per-CPU slot, no concurrent writer.
        let stats = unsafe { &mut *stats };
        match counted {
            Counted::Sprayed => stats.sprayed += 1,
            Counted::Pinned => stats.pinned += 1,
            Counted::NewFlowlet => stats.new_flowlets += 1,
            Counted::FlowletMove => stats.flowlet_moves += 1,
        }
    }

    #[inline(always)]
    fn count_override(&mut self, index: u32, len: u64, fallback: bool) {
        pin::count(index, len, fallback);
    }

    #[inline(always)]
    fn note(&mut self, event: &PendingEvent) {
        report::note(event);
    }
}

/// Adds `len` bytes at `epoch` to class load `index`. Not inlined, nor
/// [`remove_class_load`]: in `dynamic` their lookups kept one more value
/// live and its frame grew 8 bytes, past what the benchmark object's call
/// chain allows (512 bytes in all).
#[inline(never)]
fn add_class_load(index: u32, epoch: u64, len: u64) {
    if let Some(load) = FL_CLASS_LOAD.get_ptr_mut(index) {
        // SAFETY: per-CPU slot, no concurrent writer.
        unsafe { (*load).add(epoch, len) };
    }
}

/// Takes `bytes` at `epoch` off class load `index`.
#[inline(never)]
fn remove_class_load(index: u32, epoch: u64, bytes: u64) {
    if let Some(load) = FL_CLASS_LOAD.get_ptr_mut(index) {
        // SAFETY: per-CPU slot, no concurrent writer.
        unsafe { (*load).remove(epoch, bytes) };
    }
}

/// Next hop `nh_id`'s path quality toward `destination`'s class; 0
/// (avoid) for an id past the map.
#[inline(always)]
pub(crate) fn quality(destination: Destination, nh_id: u32) -> u32 {
    FL_PATH_QUALITY
        .get(destination.quality_index(nh_id))
        .copied()
        .unwrap_or(0)
}

/// What a choice toward `destination` weighs of the member `nh_id` in
/// `slot`: for a class above 0, the load toward the class over it, else
/// the next hop's ([`load`]).
#[inline(always)]
pub(crate) fn weighed_load(destination: Destination, slot: u32, nh_id: u32, epoch: u64) -> u64 {
    let index = destination.class_load_index(slot);
    match FL_CLASS_LOAD.get(index) {
        Some(own) => member_load(own, epoch, FL_CLASS_PEERS.get(index).copied().unwrap_or(0)),
        None => load(nh_id, epoch),
    }
}

/// Next hop `nh_id`'s recent load: this CPU's at `epoch` and what the
/// other CPUs' flows put there.
#[inline(always)]
fn load(nh_id: u32, epoch: u64) -> u64 {
    member_load(
        &FL_NH_STATS
            .get(nh_id)
            .map_or_else(Default::default, |s| s.load),
        epoch,
        FL_NH_PEER_LOAD.get(nh_id).copied().unwrap_or(0),
    )
}

/// Calls `step` with each slot index and `state`, from 0, until it
/// returns 1 or the slots end. In a bpf_loop the verifier checks one
/// iteration with an unknown index. Unrolled over 64 slots, a walk would
/// branch its way past the verifier's budget, and each slot a search can
/// stop at would be a constant the verifier carries through the rest of
/// the path and checks it once per slot (an unrolled `slot_of` made it
/// 366k instructions verified, 0.8 s of every cold start, against 115k).
#[inline(always)]
fn over_slots<S>(state: &mut S, step: extern "C" fn(u64, *mut c_void) -> i64) {
    // SAFETY: `step` gets `state` back as the `S` it is, and only touches
    // it and the maps.
    unsafe {
        bpf_loop(
            MAX_NEXTHOPS_PER_GROUP as u32,
            step as *mut c_void,
            (state as *mut S).cast(),
            0,
        )
    };
}

/// State of `slot_of`'s search.
struct SlotSearch<'a> {
    group: &'a GroupEntry,
    nh_id: u32,
    found: u32,
}

/// One slot for `slot_of`; returns 1 to stop at the match or past the
/// last member.
extern "C" fn find_slot(index: u64, search: *mut c_void) -> i64 {
    // SAFETY: `search` is the `SlotSearch` `slot_of` passed to bpf_loop.
    let search = unsafe { &mut *search.cast::<SlotSearch>() };
    let nh_id = member(search.group, index as u32);
    if nh_id == NO_NEXTHOP {
        return 1;
    }
    if nh_id == search.nh_id {
        search.found = index as u32;
        return 1;
    }
    0
}

/// State of `choose`'s walk over a group's members.
struct Walk<'a> {
    group: &'a GroupEntry,
    destination: Destination,
    epoch: u64,
    walk: MemberWalk,
}

/// One member for `choose`; returns 1 to stop after the last member.
extern "C" fn consider_member(index: u64, walk: *mut c_void) -> i64 {
    // SAFETY: `walk` is the `Walk` `choose` passed to bpf_loop.
    let walk = unsafe { &mut *walk.cast::<Walk>() };
    let slot = index as u32;
    let nh_id = member(walk.group, slot);
    if nh_id == NO_NEXTHOP {
        return 1;
    }
    let (destination, epoch) = (walk.destination, walk.epoch);
    walk.walk.visit(slot, nh_id, CpuMaps.usable(nh_id), || {
        (
            weighed_load(destination, slot, nh_id, epoch),
            quality(destination, nh_id),
        )
    });
    0
}
