//! A packet's next hop once ECMP's bucket is read: a matched override,
//! then, in flowlet and per-packet groups and in an ECMP group still
//! draining them, the [`dynamic`] choice. The rules are here once; the
//! state they read and write is behind [`Maps`]: the XDP program's maps
//! (per CPU) in `lb-ebpf`, the simulator's in memory in `fabriclb
//! simulate`, so the two cannot choose differently from the same state.

mod dynamic;
mod walk;

pub use dynamic::{Decision, Packet, Spray, dynamic};
pub use walk::MemberWalk;

use crate::abi::{
    GroupEntry,
    events::{CAUSE_FAILOVER, EVENT_OVERRIDE_FALLBACK, PendingEvent},
};
use crate::limits::{MAX_NEXTHOPS_PER_GROUP, NO_NEXTHOP};
use crate::packet::parse::Bth;
use crate::route::Destination;
use crate::select::{
    choice::Drawn,
    flowlet::{FlowletState, MODE_ECMP, flowlet_rules, sprays},
};
use crate::verdict::Reason;

/// The state the choice reads and writes, one CPU's.
pub trait Maps {
    /// Whether next hop `nh_id` may take packets.
    fn usable(&self, nh_id: u32) -> bool;
    /// Next hop `nh_id`'s path quality toward `destination`'s class; 0
    /// (avoid) for an id past the table.
    fn quality(&self, destination: Destination, nh_id: u32) -> u32;
    /// The slot of next hop `nh_id` among `group`'s members.
    fn slot_of(&self, group: &GroupEntry, nh_id: u32) -> Option<u32>;
    /// A new flowlet's slot: the members of `group` walked in slot order
    /// through a [`MemberWalk`] (which weighs those `drawn` admits and
    /// offers `current`), decided with the flow's `own` load.
    fn choose(
        &self,
        group: &GroupEntry,
        destination: Destination,
        epoch: u64,
        current: Option<u32>,
        own: u64,
        drawn: Drawn,
    ) -> Option<u32>;
    /// The spray sequence's entry `index` of `destination`'s row.
    fn spray_entry(&self, destination: Destination, index: u32) -> Option<u32>;
    /// The cursor of `destination`'s spray row, moved on: where the next
    /// sprayed packet and the next drawn flowlet look, before this CPU's
    /// turn ([`crate::select::position::cpu_turn`]).
    fn next_position(&mut self, destination: Destination) -> Option<u64>;
    /// The CPU these maps are, as the kernel numbers it.
    fn cpu(&self) -> u32;
    /// Adds `len` to the bytes this CPU forwarded in dynamic groups and
    /// returns the load epoch they make.
    fn load_epoch(&mut self, len: u64) -> Option<u64>;
    /// The clock flowlet gaps are measured on, ns.
    fn now(&self) -> u64;
    fn flowlet_table_size(&self) -> u32;
    fn flowlet(&self, index: u32) -> Option<FlowletState>;
    fn set_flowlet(&mut self, index: u32, state: FlowletState);
    /// Moves a flow's recent `bytes` from next hop `from` to `to`.
    fn move_load(&mut self, from: u32, to: u32, epoch: u64, bytes: u64);
    /// Adds a packet of `len` bytes toward `destination` to its class's
    /// load over the member in `slot`, for a class above 0. Here, where
    /// the slot is known, not with the next hop's load at the verdict:
    /// an index carried there in the choice, a constant on some paths and
    /// computed on others, had the verifier check the program's tail
    /// apart for each (84k instructions more, twice the whole).
    fn add_class_load(&mut self, destination: Destination, slot: u32, epoch: u64, len: u64);
    /// Takes a moving flow's recent `bytes` toward `destination` off its
    /// class's load over the member in `slot` ([`Self::add_class_load`]
    /// puts them on the new one).
    fn remove_class_load(&mut self, destination: Destination, slot: u32, epoch: u64, bytes: u64);
    fn count(&mut self, group: u32, counted: Counted);
    /// Counts a packet of `len` bytes sent to override `index`'s member,
    /// or, with `fallback`, one that matched while it was unusable.
    fn count_override(&mut self, index: u32, len: u64, fallback: bool);
    /// Notes a flow event for the packet's verdict.
    fn note(&mut self, event: &PendingEvent);
    /// What [`dynamic`] decided, for a caller that explains it; the
    /// program's maps keep nothing, and the call compiles away.
    #[inline(always)]
    fn decided(&mut self, _decision: &Decision) {}
}

/// A group's per-CPU counters ([`crate::abi::GroupStats`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counted {
    Sprayed,
    /// A packet kept to a flowlet.
    Pinned,
    NewFlowlet,
    FlowletMove,
}

/// The next hop a packet takes, and what to account for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Choice {
    pub nh_id: u32,
    pub sprayed: bool,
    /// This CPU's load epoch, when the group tracks recent load.
    pub epoch: Option<u64>,
    /// The override that sent it there; `NO_NEXTHOP` for none.
    pub override_index: u32,
}

impl Choice {
    /// ECMP's choice: `nh_id`, nothing else to account.
    #[inline(always)]
    pub fn ecmp(nh_id: u32) -> Self {
        Self {
            nh_id,
            sprayed: false,
            epoch: None,
            override_index: NO_NEXTHOP,
        }
    }
}

/// A matched override: its index (its counters') and the member it pins;
/// [`Pin::NONE`] for none. Plain integers on every path, not an `Option`:
/// LLVM may copy an `Option`'s undefined payload before the branch that
/// makes it unused, which the verifier refuses (see
/// [`crate::route::table::lookup_entry`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pin {
    pub index: u32,
    pub slot: u32,
}

impl Pin {
    pub const NONE: Self = Self {
        index: NO_NEXTHOP,
        slot: NO_NEXTHOP,
    };

    #[inline(always)]
    pub fn is_some(self) -> bool {
        self.index != NO_NEXTHOP
    }
}

/// The next-hop id in `slot` of `group`, [`NO_NEXTHOP`] past its members.
#[inline(always)]
pub fn member(group: &GroupEntry, slot: u32) -> u32 {
    if slot >= group.member_count {
        return NO_NEXTHOP;
    }
    // A mask, not a comparison, bounds the index: the verifier sees it on
    // the register that indexes (member_count is at most the array size).
    group.members[slot as usize & (MAX_NEXTHOPS_PER_GROUP - 1)]
}

/// The next hop a packet of `len` bytes takes, into `choice`, which holds
/// ECMP's: kept in an ECMP group, the [`dynamic`] choice in the others
/// and in an ECMP group still draining its flowlets. A matched override
/// (`pin`) whose member is usable takes its place: at once in an ECMP
/// group, at the flow's next flowlet in the others; one whose member is
/// not counts a fallback. Never [`NO_NEXTHOP`].
// Fills `choice` in place: a returned `Result<Choice, _>` has LLVM lay out
// the program's `process` differently, 24 instructions longer.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn next_hop<M: Maps>(
    maps: &mut M,
    destination: Destination,
    group: &GroupEntry,
    hash: u32,
    len: u64,
    bth: Option<&Bth>,
    pin: Pin,
    choice: &mut Choice,
) -> Result<(), Reason> {
    let rules = flowlet_rules(group.mode, group.draining);
    let mut pinned = NO_NEXTHOP;
    if pin.is_some() {
        if maps.usable(member(group, pin.slot)) {
            pinned = pin.slot;
        } else {
            maps.count_override(pin.index, len, true);
            // Noted here, not once the choice is made: in the program, a
            // flag live across `dynamic` had the verifier check it twice
            // (30k instructions more). So only ECMP's next hop, which
            // `choice` holds now, is known to be where the packet goes.
            maps.note(&PendingEvent {
                gap_ns: 0,
                epoch: 0,
                kind: EVENT_OVERRIDE_FALLBACK,
                cause: CAUSE_FAILOVER,
                group: destination.group,
                class: destination.class,
                from: member(group, pin.slot),
                to: if rules == MODE_ECMP {
                    choice.nh_id
                } else {
                    NO_NEXTHOP
                },
                from_slot: pin.slot,
                to_slot: NO_NEXTHOP,
                hash,
                override_index: pin.index,
            });
        }
    }
    if rules != MODE_ECMP {
        let packet = Packet {
            destination,
            hash,
            ecmp_id: choice.nh_id,
            len,
            sprayable: sprays(rules, group.spray, bth),
            pinned,
        };
        dynamic(maps, &packet, group, choice)?;
    } else if pinned != NO_NEXTHOP {
        choice.nh_id = member(group, pinned);
    }
    if pinned != NO_NEXTHOP && choice.nh_id == member(group, pinned) {
        choice.override_index = pin.index;
    }
    if choice.nh_id == NO_NEXTHOP {
        return Err(Reason::NoNextHop);
    }
    Ok(())
}
