//! A group's members as [`super::dynamic`] sees them: which are usable,
//! which carries the least load, and moving a flow's load between them.

use aya_ebpf::{cty::c_void, helpers::bpf_loop};
use lb_common::{
    abi::{GroupEntry, NEXTHOP_USABLE},
    limits::{MAX_NEXTHOPS_PER_GROUP, NO_NEXTHOP},
    route::Destination,
    select::{
        choice::Drawn,
        flowlet::{Candidate, PathChoice},
        load::member_load,
    },
    verdict::Reason,
};

use crate::maps::{FL_NEXTHOPS, FL_NH_PEER_LOAD, FL_NH_STATS, FL_PATH_QUALITY};

/// The next-hop id in `slot` of `group`, [`NO_NEXTHOP`] past its members.
#[inline(always)]
pub(super) fn member(group: &GroupEntry, slot: u32) -> u32 {
    if slot >= group.member_count {
        return NO_NEXTHOP;
    }
    // A mask, not a comparison, bounds the index: the verifier sees it on
    // the register that indexes (member_count is at most the array size).
    group.members[slot as usize & (MAX_NEXTHOPS_PER_GROUP - 1)]
}

#[inline(always)]
pub(super) fn usable(nh_id: u32) -> bool {
    FL_NEXTHOPS
        .get(nh_id)
        .is_some_and(|nh| nh.flags & NEXTHOP_USABLE != 0)
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

/// Next hop `nh_id`'s recent load as a choice weighs it: this CPU's at
/// `epoch` and what the other CPUs' flows put there.
#[inline(always)]
pub(crate) fn load(nh_id: u32, epoch: u64) -> u64 {
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
/// the path and checks it once per slot (an unrolled [`slot_of`] made it
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

/// The slot of next hop `nh_id` in `group`.
#[inline(always)]
pub(super) fn slot_of(group: &GroupEntry, nh_id: u32) -> Option<u32> {
    let mut search = SlotSearch {
        group,
        nh_id,
        found: NO_NEXTHOP,
    };
    over_slots(&mut search, find_slot);
    (search.found != NO_NEXTHOP).then_some(search.found)
}

/// State of [`slot_of`]'s search.
struct SlotSearch<'a> {
    group: &'a GroupEntry,
    nh_id: u32,
    found: u32,
}

/// One slot for [`slot_of`]; returns 1 to stop at the match or past the
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

/// A new flowlet's slot: of the usable members `drawn` admits, the one
/// with the least recent load (this CPU's and its peers') per path quality
/// toward `destination`'s class, or `current` when the gain is marginal.
#[inline(always)]
pub(super) fn choose(
    group: &GroupEntry,
    destination: Destination,
    epoch: u64,
    current: Option<u32>,
    own: u64,
    drawn: Drawn,
) -> Result<u32, Reason> {
    let mut walk = MemberWalk {
        group,
        destination,
        drawn,
        epoch,
        current: current.unwrap_or(NO_NEXTHOP),
        choice: PathChoice::default(),
        offered: None,
    };
    over_slots(&mut walk, consider_member);
    walk.choice
        .decide(walk.offered, own)
        .ok_or(Reason::NoNextHop)
}

/// State of [`choose`]'s walk over a group's members.
struct MemberWalk<'a> {
    group: &'a GroupEntry,
    destination: Destination,
    drawn: Drawn,
    epoch: u64,
    /// The flow's slot, offered to stay; [`NO_NEXTHOP`] for none.
    current: u32,
    choice: PathChoice,
    offered: Option<Candidate>,
}

/// One member for [`choose`]; returns 1 to stop after the last member.
extern "C" fn consider_member(index: u64, walk: *mut c_void) -> i64 {
    // SAFETY: `walk` is the `MemberWalk` `choose` passed to bpf_loop.
    let walk = unsafe { &mut *walk.cast::<MemberWalk>() };
    let slot = index as u32;
    let nh_id = member(walk.group, slot);
    if nh_id == NO_NEXTHOP {
        return 1;
    }
    let drawn = walk.drawn.admits(nh_id);
    if !usable(nh_id) || !(drawn || walk.current == slot) {
        return 0;
    }
    let candidate = Candidate {
        slot,
        load: load(nh_id, walk.epoch),
        quality: quality(walk.destination, nh_id),
    };
    if drawn {
        walk.choice.consider(candidate);
    }
    if walk.current == slot {
        walk.offered = Some(candidate);
    }
    0
}

#[inline(always)]
pub(super) fn move_load(from: u32, to: u32, epoch: u64, bytes: u64) {
    if let Some(stats) = FL_NH_STATS.get_ptr_mut(from) {
        // SAFETY: per-CPU slot, no concurrent writer.
        unsafe { (*stats).load.remove(epoch, bytes) };
    }
    if let Some(stats) = FL_NH_STATS.get_ptr_mut(to) {
        // SAFETY: as above.
        unsafe { (*stats).load.add(epoch, bytes) };
    }
}
