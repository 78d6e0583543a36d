//! Flowlet and per-packet modes: spray what may be sprayed, keep the rest
//! on flowlets. An ECMP group draining from them follows the same flowlets
//! to their end.

use lb_common::{
    abi::{
        GroupEntry,
        events::{EVENT_MOVE, PendingEvent, move_cause},
    },
    limits::{BUCKETS_PER_GROUP, NO_NEXTHOP},
    route::Destination,
    select::{
        choice::{Drawn, draw_positions, drawn, draws},
        flowlet::{
            FlowletState, FlowletStep, MODE_ECMP, drain, flowlet_index, starts_on_ecmp, step,
        },
        load::load_epoch,
        placement::{Placement, placement},
    },
    verdict::Reason,
};

use super::{
    Choice, flowlet_clock,
    members::{choose, member, move_load, quality, slot_of, usable},
};
use crate::maps::{
    FL_FLOWLETS, FL_GROUP_STATS, FL_LOAD_CLOCK, FL_SPRAY, FL_SPRAY_CURSOR, flowlet_table_size,
};
use crate::report;

/// What [`dynamic`] needs to know of a packet.
pub(super) struct Packet {
    /// Its group, and the class whose qualities it is steered by.
    pub destination: Destination,
    /// Its flow hash, which finds its flowlet.
    pub hash: u32,
    /// The next hop ECMP would pick.
    pub ecmp_id: u32,
    pub len: u64,
    pub sprayable: bool,
    /// The member a matched override pins the flow to, usable;
    /// `NO_NEXTHOP` for none.
    pub pinned: u32,
}

/// Flowlet and per-packet modes: spray what may be sprayed, keep the rest
/// on flowlets; a draining ECMP group ends each flowlet on its ECMP next
/// hop. A pinned flow's packets all go to its member, its flowlets moving
/// there at their next start. Never chooses a next hop that is down.
// Not inlined: its own stack frame keeps `process` under 512 bytes. BPF
// calls take at most five arguments, hence `Packet` and `out`.
#[inline(never)]
pub(super) fn dynamic(packet: &Packet, group: &GroupEntry, out: &mut Choice) -> Result<(), Reason> {
    let Packet {
        destination,
        hash,
        ecmp_id,
        len,
        sprayable,
        pinned,
    } = *packet;
    let group_id = destination.group;
    let stats = FL_GROUP_STATS
        .get_ptr_mut(group_id)
        .ok_or(Reason::NoNextHop)?;
    let clock = FL_LOAD_CLOCK.get_ptr_mut(0).ok_or(Reason::NoNextHop)?;
    // SAFETY: per-CPU slots, no concurrent writer.
    let (stats, epoch) = unsafe {
        *clock += len;
        (&mut *stats, load_epoch(*clock))
    };

    let draining = group.mode == MODE_ECMP;
    let is_pinned = pinned != NO_NEXTHOP;
    if sprayable && is_pinned {
        *out = Choice {
            nh_id: member(group, pinned),
            sprayed: false,
            epoch: Some(epoch),
            override_index: NO_NEXTHOP,
        };
        return Ok(());
    }
    if sprayable && draining {
        *out = Choice::ecmp(ecmp_id);
        return Ok(());
    }
    if sprayable {
        let index = (next_position(destination)? as u32) & (BUCKETS_PER_GROUP - 1);
        let listed = *FL_SPRAY
            .get(destination.spray_row() * BUCKETS_PER_GROUP + index)
            .ok_or(Reason::NoNextHop)?;
        // The sequence can name a next hop that went down moments before
        // the daemon rewrote it; the least loaded usable one stands in.
        let nh_id = if usable(listed) {
            listed
        } else {
            member(
                group,
                choose(group, destination, epoch, None, 0, Drawn::ALL)?,
            )
        };
        stats.sprayed += 1;
        *out = Choice {
            nh_id,
            sprayed: true,
            epoch: Some(epoch),
            override_index: NO_NEXTHOP,
        };
        return Ok(());
    }

    stats.pinned += 1;
    let now = flowlet_clock();
    let index = flowlet_index(group_id, hash, flowlet_table_size());
    let state = FL_FLOWLETS.get_ptr_mut(index).ok_or(Reason::NoNextHop)?;
    // SAFETY: this CPU's value; no concurrent writer.
    let previous = unsafe { *state };
    let next = step(
        Some(&previous),
        now,
        group.flowlet_gap_ns,
        group.generation,
        group.member_count,
    );
    let previous_own = previous.load.at(epoch);
    let ecmp_start = || {
        slot_of(group, ecmp_id)
            .filter(|_| starts_on_ecmp(usable(ecmp_id), quality(destination, ecmp_id)))
    };
    let usable_slot = |slot| usable(member(group, slot));
    let slot = if draining {
        // ECMP's buckets hold members only; a bucket written before its
        // group entry stands in without flowlet state.
        let target = if is_pinned {
            Some(pinned)
        } else {
            slot_of(group, ecmp_id)
        };
        let Some(target) = target else {
            *out = Choice::ecmp(ecmp_id);
            return Ok(());
        };
        drain(next, usable_slot, target)
    } else if is_pinned {
        // Onto the pin at a flowlet's start, never mid-burst.
        match next {
            FlowletStep::Continue(slot) if usable_slot(slot) => slot,
            _ => pinned,
        }
    } else {
        match placement(next, usable_slot, ecmp_start) {
            Placement::Slot(slot) => slot,
            Placement::LeastCost { offered } => {
                let drawn = draw(group, destination, hash)?;
                match choose(group, destination, epoch, offered, previous_own, drawn) {
                    // Neither drawn member usable (a sequence the daemon
                    // has not rewritten yet): every member is weighed.
                    Err(_) if !drawn.is_all() => {
                        choose(group, destination, epoch, offered, previous_own, Drawn::ALL)?
                    }
                    chosen => chosen?,
                }
            }
        }
    };
    let chosen = Choice {
        nh_id: member(group, slot),
        sprayed: false,
        epoch: Some(epoch),
        override_index: NO_NEXTHOP,
    };
    // The flow's own load moves with it; a first flowlet has none yet.
    let (own, from) = match next {
        FlowletStep::Continue(slot) => (previous_own, Some(slot)),
        FlowletStep::Choose { current } => (previous_own, current),
        FlowletStep::Start => (0, None),
        FlowletStep::Occupied => {
            *out = chosen;
            return Ok(());
        }
    };
    if !matches!(next, FlowletStep::Continue(s) if s == slot) {
        stats.new_flowlets += 1;
    }
    if let Some(from) = from.filter(|&from| from != slot) {
        stats.flowlet_moves += 1;
        let from_id = member(group, from);
        report::note(&PendingEvent {
            gap_ns: now.wrapping_sub(previous.last_seen_ns),
            epoch,
            kind: EVENT_MOVE,
            cause: move_cause(usable(from_id), is_pinned, draining),
            group: group_id,
            class: destination.class,
            from: from_id,
            to: chosen.nh_id,
            hash,
            override_index: NO_NEXTHOP,
        });
        // The flow's recent bytes go with it, so the next flowlet to
        // choose sees where the load is now, not where it was.
        move_load(from_id, chosen.nh_id, epoch, own);
    }
    let mut load = match next {
        FlowletStep::Start => Default::default(),
        _ => previous.load,
    };
    load.add(epoch, len);
    let updated = FlowletState {
        last_seen_ns: now,
        load,
        slot,
        generation: group.generation,
    };
    // SAFETY: as above.
    unsafe { *state = updated };
    *out = chosen;
    Ok(())
}

/// This CPU's cursor in `destination`'s spray sequence, moved on.
#[inline(always)]
fn next_position(destination: Destination) -> Result<u64, Reason> {
    let cursor = FL_SPRAY_CURSOR
        .get_ptr_mut(destination.spray_row())
        .ok_or(Reason::NoNextHop)?;
    // SAFETY: a per-CPU slot, no concurrent writer.
    unsafe {
        let at = *cursor;
        *cursor = at.wrapping_add(1);
        Ok(at)
    }
}

/// The members a new flowlet of flow `hash` weighs: for a rule that
/// draws, those drawn from the spray sequence of `destination` at its
/// cursor, which moves on; every member otherwise.
#[inline(always)]
fn draw(group: &GroupEntry, destination: Destination, hash: u32) -> Result<Drawn, Reason> {
    if !draws(group.choice) {
        return Ok(Drawn::ALL);
    }
    let [a, b] = draw_positions(
        group.draw_flow_mask,
        hash,
        group.hash_seed,
        next_position(destination)?,
    );
    let row = destination.spray_row() * BUCKETS_PER_GROUP;
    Ok(drawn(
        group.choice,
        FL_SPRAY.get(row + a).copied(),
        FL_SPRAY.get(row + b).copied(),
    ))
}
