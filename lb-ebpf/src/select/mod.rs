//! Stage 3: the next hop within the group. ECMP's bucket first; flowlet and
//! per-packet groups then make their [`dynamic`] choice, which walks the
//! group's [`members`].

mod dynamic;
mod members;
pub mod pin;

use aya_ebpf::helpers::bpf_ktime_get_ns;
use lb_common::{
    abi::{
        GroupEntry,
        events::{CAUSE_FAILOVER, EVENT_OVERRIDE_FALLBACK, PendingEvent},
    },
    limits::{BUCKETS_PER_GROUP, NO_NEXTHOP},
    packet::parse::Parsed,
    route::Destination,
    select::{
        flowlet::{MODE_ECMP, MODE_PER_PACKET, flowlet_rules, sprays},
        hash::{HashFields, flow_hash},
    },
    verdict::Reason,
};

use crate::maps::FL_BUCKETS;
use dynamic::{Packet, dynamic};
pub(crate) use members::{load, quality};
use members::{member, usable};
use pin::Pin;

/// The next hop a packet takes, and what to account for it.
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

/// The clock flowlet gaps are measured on, in ns: read once by every
/// packet that keeps to a flowlet, and timed alone by the benchmark.
#[inline(always)]
pub fn flowlet_clock() -> u64 {
    // SAFETY: a helper without arguments.
    unsafe { bpf_ktime_get_ns() }
}

/// The flow hash of the packet `parsed` by group's fields and seed: its
/// ECMP bucket and its flowlet entry.
#[inline(always)]
pub fn hash(group: &GroupEntry, parsed: &Parsed) -> u32 {
    flow_hash(group.hash_seed, &parsed.flow, HashFields(group.hash_fields))
}

/// Whether `parsed` is a packet its per-packet group sprays: its next hop
/// comes from the spray sequence, not the flow hash.
#[inline(always)]
pub fn sprayed_by_mode(group: &GroupEntry, parsed: &Parsed) -> bool {
    group.mode == MODE_PER_PACKET && sprays(MODE_PER_PACKET, group.spray, parsed.bth.as_ref())
}

/// The next hop ECMP picks in group `group_id` for a flow hash.
#[inline(always)]
pub fn bucket(group_id: u32, hash: u32) -> Result<u32, Reason> {
    let bucket = group_id * BUCKETS_PER_GROUP + (hash & (BUCKETS_PER_GROUP - 1));
    Ok(*FL_BUCKETS.get(bucket).ok_or(Reason::NoNextHop)?)
}

/// The next hop a packet of `len` bytes takes, into `choice`, which holds
/// ECMP's: kept in an ECMP group, the [`dynamic`] choice in the others
/// and in an ECMP group still draining its flowlets. A matched override
/// (`pin`) whose member is usable takes its place: at once in an ECMP
/// group, at the flow's next flowlet in the others; one whose member is
/// not counts a fallback. Never [`NO_NEXTHOP`].
// Fills `choice` in place: a returned `Result<Choice, _>` has LLVM lay out
// `process` differently, 24 instructions longer.
#[inline(always)]
pub fn next_hop(
    destination: Destination,
    group: &GroupEntry,
    hash: u32,
    len: u64,
    parsed: &Parsed,
    pin: Pin,
    choice: &mut Choice,
) -> Result<(), Reason> {
    let rules = flowlet_rules(group.mode, group.draining);
    let mut pinned = NO_NEXTHOP;
    if pin.is_some() {
        if usable(member(group, pin.slot)) {
            pinned = pin.slot;
        } else {
            pin::count(pin.index, len, true);
            // Noted here, not once the choice is made: a flag live across
            // `dynamic` had the verifier check it twice (30k instructions
            // more). So only ECMP's next hop, which `choice` holds now, is
            // known to be where the packet goes.
            crate::report::note(&PendingEvent {
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
            sprayable: sprays(rules, group.spray, parsed.bth.as_ref()),
            pinned,
        };
        dynamic(&packet, group, choice)?;
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
