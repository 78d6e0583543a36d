//! Flowlet and per-packet modes: spray what may be sprayed, keep the rest
//! on flowlets. An ECMP group draining from them follows the same flowlets
//! to their end.

use super::{Choice, Counted, Maps, member};
use crate::abi::{
    GroupEntry,
    events::{EVENT_MOVE, PendingEvent, move_cause},
};
use crate::limits::NO_NEXTHOP;
use crate::route::Destination;
use crate::select::{
    choice::{Drawn, drawn, draws, flowlet_mix, weighs_peers, weighs_staying},
    flowlet::{FlowletState, FlowletStep, MODE_ECMP, drain, flowlet_index, starts_on_ecmp, step},
    placement::{Placement, placement},
    position::{cpu_turn, draw_positions, spray_position},
};
use crate::verdict::Reason;

/// What [`dynamic`] needs to know of a packet.
#[derive(Clone, Copy, Debug)]
pub struct Packet {
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

/// A sprayed packet's draw: the sequence's entry `index` named `listed`
/// (`NO_NEXTHOP` past the map); `stand_in` the slot taken instead when
/// that one was not usable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spray {
    pub index: u32,
    pub listed: u32,
    pub stand_in: Option<u32>,
}

/// What [`dynamic`] decided for a packet ([`Maps::decided`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Sprayed(Spray),
    /// Kept to flowlets: the flow's entry `index` in the flowlet table,
    /// its `step`, the `slot` it takes (`None`: none usable, or ECMP's
    /// next hop without state in a draining group), its `own` recent load
    /// at `epoch` and the members a new flowlet `drawn`.
    Flowlet {
        index: u32,
        step: FlowletStep,
        slot: Option<u32>,
        own: u64,
        epoch: u64,
        drawn: Drawn,
    },
}

/// Flowlet and per-packet modes: spray what may be sprayed, keep the rest
/// on flowlets; a draining ECMP group ends each flowlet on its ECMP next
/// hop. A pinned flow's packets all go to its member, its flowlets moving
/// there at their next start. Never chooses a next hop that is down.
// Not inlined: in the program, its own stack frame keeps `process` under
// 512 bytes. BPF calls take at most five arguments, hence `Packet` and
// `out`.
#[inline(never)]
pub fn dynamic<M: Maps>(
    maps: &mut M,
    packet: &Packet,
    group: &GroupEntry,
    out: &mut Choice,
) -> Result<(), Reason> {
    let Packet {
        destination,
        hash,
        ecmp_id,
        len,
        sprayable,
        pinned,
    } = *packet;
    let group_id = destination.group;
    let epoch = maps.load_epoch(len).ok_or(Reason::NoNextHop)?;

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
        let (cursor, turn) = next_position(maps, group, destination)?;
        let index = spray_position(destination.class, cursor.wrapping_add(turn));
        let Some(listed) = maps.spray_entry(destination, index) else {
            maps.decided(&Decision::Sprayed(Spray {
                index,
                listed: NO_NEXTHOP,
                stand_in: None,
            }));
            return Err(Reason::NoNextHop);
        };
        // The sequence can name a next hop that went down moments before
        // the daemon rewrote it; the least loaded usable one stands in.
        let listed_usable = maps.usable(listed);
        let stand_in = match listed_usable {
            true => None,
            false => maps.choose(group, destination, epoch, None, 0, Drawn::ALL),
        };
        maps.decided(&Decision::Sprayed(Spray {
            index,
            listed,
            stand_in,
        }));
        let nh_id = match stand_in {
            Some(slot) => member(group, slot),
            None if listed_usable => listed,
            None => return Err(Reason::NoNextHop),
        };
        // Sprayed packets add to the next hops' loads only, not to their
        // class's: a listed next hop's slot is not known without a walk
        // over the members, which every sprayed packet would pay. The
        // sequence splits them by quality, so each path of a class
        // carries about its share of them, and flowlet choices lose little
        // by not seeing them.
        maps.count(group_id, Counted::Sprayed);
        *out = Choice {
            nh_id,
            sprayed: true,
            epoch: Some(epoch),
            override_index: NO_NEXTHOP,
        };
        return Ok(());
    }

    maps.count(group_id, Counted::Pinned);
    let now = maps.now();
    let index = flowlet_index(group_id, hash, maps.flowlet_table_size());
    let previous = maps.flowlet(index).ok_or(Reason::NoNextHop)?;
    let next = step(
        Some(&previous),
        now,
        group.flowlet_gap_ns,
        group.generation,
        group.member_count,
    );
    let previous_own = previous.load.at(epoch);
    let flowlet = |slot, drawn| Decision::Flowlet {
        index,
        step: next,
        slot,
        own: previous_own,
        epoch,
        drawn,
    };
    let mut drawn_for = Drawn::ALL;
    let slot = if draining {
        // ECMP's buckets hold members only; a bucket written before its
        // group entry stands in without flowlet state.
        let target = if is_pinned {
            Some(pinned)
        } else {
            maps.slot_of(group, ecmp_id)
        };
        let Some(target) = target else {
            maps.decided(&flowlet(None, Drawn::ALL));
            *out = Choice::ecmp(ecmp_id);
            return Ok(());
        };
        drain(next, |slot| maps.usable(member(group, slot)), target)
    } else if is_pinned {
        // Onto the pin at a flowlet's start, never mid-burst.
        match next {
            FlowletStep::Continue(slot) if maps.usable(member(group, slot)) => slot,
            _ => pinned,
        }
    } else {
        let ecmp_start = || {
            maps.slot_of(group, ecmp_id).filter(|_| {
                starts_on_ecmp(maps.usable(ecmp_id), maps.quality(destination, ecmp_id))
            })
        };
        match placement(next, |slot| maps.usable(member(group, slot)), ecmp_start) {
            Placement::Slot(slot) => slot,
            Placement::LeastCost { offered } => {
                let offered = offered.filter(|_| weighs_staying(group.choice, destination.class));
                let drawn = draw(maps, group, destination, hash, offered)?;
                drawn_for = drawn;
                let chosen = maps.choose(group, destination, epoch, offered, previous_own, drawn);
                let chosen = match chosen {
                    // Neither drawn member usable (a sequence the daemon
                    // has not rewritten yet): every member is weighed.
                    None if !drawn.is_all() => {
                        maps.choose(group, destination, epoch, offered, previous_own, Drawn::ALL)
                    }
                    chosen => chosen,
                };
                let Some(slot) = chosen else {
                    maps.decided(&flowlet(None, drawn));
                    return Err(Reason::NoNextHop);
                };
                slot
            }
        }
    };
    maps.decided(&flowlet(Some(slot), drawn_for));
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
        // Another generation's flow holds the entry: this one keeps no
        // state, and its bytes count in the next hop's load only.
        FlowletStep::Occupied => {
            *out = chosen;
            return Ok(());
        }
    };
    if !matches!(next, FlowletStep::Continue(s) if s == slot) {
        maps.count(group_id, Counted::NewFlowlet);
    }
    let mut moved = 0;
    if let Some(from) = from.filter(|&from| from != slot) {
        maps.count(group_id, Counted::FlowletMove);
        let from_id = member(group, from);
        maps.note(&PendingEvent {
            gap_ns: now.wrapping_sub(previous.last_seen_ns),
            epoch,
            kind: EVENT_MOVE,
            cause: move_cause(maps.usable(from_id), is_pinned, draining),
            group: group_id,
            class: destination.class,
            from: from_id,
            to: chosen.nh_id,
            from_slot: from,
            to_slot: slot,
            hash,
            override_index: NO_NEXTHOP,
        });
        // The flow's recent bytes go with it, so the next flowlet to
        // choose sees where the load is now, not where it was.
        maps.move_load(from_id, chosen.nh_id, epoch, own);
        maps.remove_class_load(destination, from, epoch, own);
        moved = own;
    }
    // The packet and the bytes that moved here, in one write.
    maps.add_class_load(destination, slot, epoch, len + moved);
    let mut load = match next {
        FlowletStep::Start => Default::default(),
        _ => previous.load,
    };
    load.add(epoch, len);
    maps.set_flowlet(
        index,
        FlowletState {
            last_seen_ns: now,
            load,
            slot,
            generation: group.generation,
        },
    );
    *out = chosen;
    Ok(())
}

/// Where this CPU's next draw or sprayed packet toward `destination`
/// looks: its cursor, moved on, and this CPU's [`cpu_turn`].
#[inline(always)]
fn next_position<M: Maps>(
    maps: &mut M,
    group: &GroupEntry,
    destination: Destination,
) -> Result<(u64, u64), Reason> {
    // The turn first: a cursor read before it stayed live across the
    // helper call that names the CPU, which grew `dynamic`'s frame by 8
    // bytes, past the 512 the benchmark object's call chain allows.
    let turn = cpu_turn(maps.cpu(), group.member_count);
    let cursor = maps.next_position(destination).ok_or(Reason::NoNextHop)?;
    Ok((cursor, turn))
}

/// The members a new flowlet of flow `hash` weighs: for a rule that
/// draws, those drawn from the spray sequence of `destination` at its
/// cursor, which moves on, and by the coin the idle peers of the flow's
/// `offered` slot; every member otherwise.
#[inline(always)]
fn draw<M: Maps>(
    maps: &mut M,
    group: &GroupEntry,
    destination: Destination,
    hash: u32,
    offered: Option<u32>,
) -> Result<Drawn, Reason> {
    if !draws(group.choice) {
        return Ok(Drawn::ALL);
    }
    let (cursor, turn) = next_position(maps, group, destination)?;
    let [a, b] = draw_positions(
        group.draw_flow_mask,
        hash,
        group.hash_seed,
        destination.class,
        cursor,
        turn,
    );
    let drawn = drawn(
        group.choice,
        maps.spray_entry(destination, a),
        maps.spray_entry(destination, b),
    );
    // By [`weighs_peers`] a drawn flowlet also weighs the idle peers of
    // the path it is on: a flow that shares its path with another finds
    // the one left idle among equals at once, instead of when the turns
    // come to it (`choice::IDLE_PEER_SHARE`).
    let mix = flowlet_mix(hash, cursor.wrapping_add(turn));
    Ok(match offered {
        Some(slot) if !drawn.is_all() && weighs_peers(destination.class, mix) => {
            drawn.with_peers_of(maps.quality(destination, member(group, slot)), mix)
        }
        _ => drawn,
    })
}
