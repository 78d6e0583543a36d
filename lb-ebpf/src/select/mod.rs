//! Stage 3: the next hop within the group. ECMP's bucket here; the rest
//! (overrides, spraying, flowlets) is `lb_common::steer`'s, over this
//! CPU's maps ([`cpu_maps::CpuMaps`]).

mod cpu_maps;
pub mod pin;

use aya_ebpf::helpers::bpf_ktime_get_ns;
use lb_common::{
    abi::GroupEntry,
    limits::BUCKETS_PER_GROUP,
    packet::parse::Parsed,
    route::Destination,
    select::{
        flowlet::{MODE_PER_PACKET, sprays},
        hash::{HashFields, flow_hash},
    },
    steer::{self, Choice, Pin},
    verdict::Reason,
};

use crate::maps::FL_BUCKETS;
use cpu_maps::CpuMaps;
pub(crate) use cpu_maps::{quality, weighed_load};

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
/// ECMP's ([`steer::next_hop`] over this CPU's maps).
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
    steer::next_hop(
        &mut CpuMaps,
        destination,
        group,
        hash,
        len,
        parsed.bth.as_ref(),
        pin,
        choice,
    )
}
