//! Flowlet switching and per-packet spraying: when a packet may take a
//! different next hop than the one before it, and which one it takes.
//!
//! A flow may change path only after an idle gap longer than the group's
//! flowlet timer: by then its earlier packets have left every queue, so the
//! move cannot reorder it. Each new flowlet takes the next hop with the least
//! recent load per unit of path quality, unless its current next hop is
//! within [`HYSTERESIS_NUM`]/[`HYSTERESIS_DEN`] of that (a move for a marginal
//! gain only churns), or the move would leave the new next hop as loaded
//! as the old one while its quality is under twice the old one's
//! ([`MOVE_ONTO_LOAD_QUALITY`]). Per-packet mode sprays the packets that
//! carry their own placement and keeps the rest on flowlets.

use crate::packet::parse::Bth;
use crate::packet::roce;
use crate::select::choice::{IDLE_PEER_SHARE, idle_to};
use crate::select::load::RecentLoad;

/// [`crate::abi::GroupEntry::mode`]: hash every packet of a flow to one
/// next hop.
pub const MODE_ECMP: u32 = 0;
/// Flows move between next hops only at flowlet boundaries.
pub const MODE_FLOWLET: u32 = 1;
/// Sprayable packets pick a next hop each; the rest follow flowlets.
pub const MODE_PER_PACKET: u32 = 2;

/// [`crate::abi::GroupEntry::spray`]: spray only self-contained RoCEv2
/// packets ([`roce::self_contained`]).
pub const SPRAY_SELF_CONTAINED: u32 = 0;
/// Spray every RoCEv2 packet, for receivers that place out-of-order
/// packets themselves.
pub const SPRAY_ALL: u32 = 1;

/// Path quality a next hop has with no telemetry: all equal.
pub const PATH_QUALITY_DEFAULT: u32 = 1024;
/// Largest path quality; keeps `load * quality` within 64 bits.
pub const PATH_QUALITY_MAX: u32 = 1 << 16;
/// A new flowlet moves only if the best next hop's cost, with the flow's
/// own load added, is below `NUM/DEN` of the current one's.
pub const HYSTERESIS_NUM: u64 = 7;
pub const HYSTERESIS_DEN: u64 = 8;
/// A new flowlet moves onto a path that would then carry as much as its
/// current one does only if that path's quality is at least this many
/// times the current's ([`PathChoice::decide`]).
pub const MOVE_ONTO_LOAD_QUALITY: u64 = 2;

/// The flowlet table entry a flow of `group` with flow hash `hash` uses,
/// in a table of `size` entries. The table is an array indexed by hash, as
/// in switch ASICs: no key to hash again and compare, and a new flow costs
/// no insertion. Flows of a group whose hashes meet share an entry and
/// with it their flowlet, which is safe: its path changes only after a
/// gap in all of them, so none is reordered; they only move together.
/// The group is mixed in so that groups hashing alike do not meet in the
/// same entries ([`FlowletStep::Occupied`] covers the rare ones that do).
#[inline(always)]
pub fn flowlet_index(group: u32, hash: u32, size: u32) -> u32 {
    // Multiplying by the golden ratio spreads consecutive group ids over
    // the whole table.
    let mixed = hash ^ group.wrapping_mul(0x9E37_79B9);
    // The mixed hash scaled to 0..size (Lemire's multiply-shift): uniform
    // for a uniform hash, without the division a modulo costs. It reads
    // the hash's high bits, independent of the low ones ECMP's bucket uses.
    ((u64::from(mixed) * u64::from(size)) >> 32) as u32
}

/// One flow's state on one CPU. All zeros (a CPU that never saw the flow)
/// reads as no state, because group generations start at 1.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowletState {
    pub last_seen_ns: u64,
    /// The flow's own share of its next hop's recent load, moved with it.
    pub load: RecentLoad,
    /// Index into the group's members, not a next-hop id: a slot always
    /// names a next hop of this group, however the config changed.
    pub slot: u32,
    /// The group generation the state was made in; see
    /// [`crate::abi::GroupEntry::generation`].
    pub generation: u32,
}

/// What a flow's next packet does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowletStep {
    /// Inside a flowlet: same slot as the packet before.
    Continue(u32),
    /// A gap passed (or the slot went away): a new flowlet, which may move
    /// from `current`.
    Choose { current: Option<u32> },
    /// No state from this generation: start where ECMP would put the flow,
    /// so switching a group to flowlet mode moves no flow mid-burst, unless
    /// that next hop is down or degraded ([`starts_on_ecmp`]).
    Start,
    /// Another generation's flowlet is live in the entry: another group's
    /// flow hashed there, or this group's before its members changed.
    /// The packet goes where [`Self::Start`] puts it and leaves the entry
    /// alone, so that flowlet is not moved mid-burst; the entry is taken
    /// once it has been idle for a gap.
    Occupied,
}

/// Decides a packet's step from its flow's state at `now_ns`.
#[inline(always)]
pub fn step(
    state: Option<&FlowletState>,
    now_ns: u64,
    gap_ns: u64,
    generation: u32,
    members: u32,
) -> FlowletStep {
    let Some(state) = state.filter(|s| s.generation != 0) else {
        return FlowletStep::Start;
    };
    let idle = now_ns.wrapping_sub(state.last_seen_ns) > gap_ns;
    if state.generation != generation {
        return if idle {
            FlowletStep::Start
        } else {
            FlowletStep::Occupied
        };
    }
    if state.slot >= members {
        return FlowletStep::Choose { current: None };
    }
    if idle {
        FlowletStep::Choose {
            current: Some(state.slot),
        }
    } else {
        FlowletStep::Continue(state.slot)
    }
}

/// Whether a flow's first flowlet starts on its ECMP next hop: when that
/// one is usable and telemetry has not rated it below the default. A new
/// flow has nothing to reorder, so it need not start on a path known to be
/// congested or slow; only a flow ECMP was already forwarding (a group
/// just switched from ECMP) risks a reorder, and then only off a degraded
/// path, which is where it should not stay.
#[inline(always)]
pub fn starts_on_ecmp(usable: bool, quality: u32) -> bool {
    usable && quality >= PATH_QUALITY_DEFAULT
}

/// A usable next hop as a flowlet choice sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate {
    pub slot: u32,
    /// Recent load of the next hop, bytes.
    pub load: u64,
    /// Path quality; 0 reads as 1 (avoid, but still a path).
    pub quality: u32,
}

impl Candidate {
    #[inline(always)]
    fn quality(&self) -> u64 {
        self.quality.clamp(1, PATH_QUALITY_MAX) as u64
    }
}

/// Load every path is charged on top of its recent load, so quality still
/// ranks paths that are all idle, and quality 0 really means "avoid".
pub const LOAD_BIAS: u64 = 4096;

/// `(a_load + bias) / a_quality < (b_load + bias) / b_quality * num / den`,
/// without division.
#[inline(always)]
fn cheaper(a_load: u64, a_quality: u64, b_load: u64, b_quality: u64, num: u64, den: u64) -> bool {
    (a_load + LOAD_BIAS) * b_quality * den < (b_load + LOAD_BIAS) * a_quality * num
}

/// The cheapest usable next hop, built one candidate at a time (the data
/// plane walks the group's members in a bounded loop).
#[derive(Clone, Copy, Debug, Default)]
pub struct PathChoice {
    best: Option<Candidate>,
}

impl PathChoice {
    /// Takes `candidate` if it is cheaper than the best so far; the earlier
    /// slot wins ties, so a choice is deterministic.
    #[inline(always)]
    pub fn consider(&mut self, candidate: Candidate) {
        let better = match self.best {
            None => true,
            Some(best) => cheaper(
                candidate.load,
                candidate.quality(),
                best.load,
                best.quality(),
                1,
                1,
            ),
        };
        if better {
            self.best = Some(candidate);
        }
    }

    pub fn best(&self) -> Option<Candidate> {
        self.best
    }

    /// The slot a new flowlet takes: the best one, unless the flow's
    /// `current` next hop (still usable) costs less than the best's with
    /// the flow's `own` load added, by the hysteresis margin, or the best
    /// would then carry as much as the current one does while its quality
    /// is under [`MOVE_ONTO_LOAD_QUALITY`] times the current's. `None`
    /// when no next hop is usable.
    ///
    /// The second rule is for a path rated down by the queue its own
    /// flows built: two flows met on one of equal paths, its band rose,
    /// and the cost over that quality sent one of them onto a path that
    /// carried a flow already, where the two met again, and so on (16 fat
    /// flows over 16 equal spines steered by the spines' queues made
    /// 19-82 moves a run, the flowlets ending 1.125-1.225 times the mean
    /// on the busiest). A flow leaves such a path for one lighter than
    /// it, or for one clearly better: a path slowed to a half or less, or
    /// held at an eighth for a queue that stays.
    ///
    /// Lighter onto a path that carries a flow already (a quarter of this
    /// flow's load or more, [`IDLE_PEER_SHARE`]) means lighter by three
    /// quarters of the flow more: with flows of a size, a move onto such a
    /// path pays only if it carries two flows fewer than the flow's path,
    /// and the margin keeps a pair from moving onto a path whose single
    /// flow reads lighter (between messages, or in another CPU's units):
    /// it relocated the pair instead of parting it, and one flow went
    /// over four spines in 160 ms, two to a spine at each step but the
    /// last (`equal-paths-16`). An idle path needs no margin.
    #[inline(always)]
    pub fn decide(&self, current: Option<Candidate>, own: u64) -> Option<u32> {
        let best = self.best?;
        let Some(current) = current else {
            return Some(best.slot);
        };
        if best.slot == current.slot {
            return Some(current.slot);
        }
        let cheaper_enough = cheaper(
            best.load + own,
            best.quality(),
            current.load,
            current.quality(),
            HYSTERESIS_NUM,
            HYSTERESIS_DEN,
        );
        let margin = if idle_to(best.load, own) {
            0
        } else {
            own - own / IDLE_PEER_SHARE
        };
        let lighter = best.load + own + margin < current.load;
        let clearly_better = best.quality() >= MOVE_ONTO_LOAD_QUALITY * current.quality();
        let moves = cheaper_enough && (lighter || clearly_better);
        Some(if moves { best.slot } else { current.slot })
    }
}

/// The mode whose flowlet rules a group's packets follow: its own, or,
/// while an ECMP group drains, the flowlet mode it left. `MODE_ECMP` (a
/// plain ECMP group) costs the data plane no lookup beyond its bucket.
#[inline(always)]
pub fn flowlet_rules(mode: u32, draining: u32) -> u32 {
    if mode == MODE_ECMP { draining } else { mode }
}

/// The slot a packet of a group draining to ECMP takes, given its flowlet
/// `step` and its ECMP bucket's slot; `usable(slot)`: whether the member in
/// `slot` may be chosen. Hashing a busy flow straight to its ECMP next hop
/// could overtake its packets still queued on the flowlet's path, so a
/// flow keeps its flowlet while it is live (the step continues onto a
/// usable member) and takes its ECMP slot at the flowlet's end, a pause
/// longer than the gap, like any new flowlet. Once there it stays: the
/// state then names the ECMP slot.
///
/// Packets the mode left would have sprayed ([`sprays`] with the old
/// mode) take ECMP at once and never touch flowlet state: they were on no
/// single path, and a receiver places them on its own, so one more path
/// change is what spraying already did. With [`SPRAY_ALL`] that is every
/// RoCEv2 packet; with [`SPRAY_SELF_CONTAINED`] the multi-packet messages
/// in flight finish on their flowlets, since RoCEv2 packets stand alone
/// only at message boundaries.
#[inline(always)]
pub fn drain(step: FlowletStep, usable: impl Fn(u32) -> bool, ecmp_slot: u32) -> u32 {
    match step {
        FlowletStep::Continue(slot) if usable(slot) => slot,
        _ => ecmp_slot,
    }
}

/// Whether a packet of a group in `mode` with `spray` is sprayed: only in
/// per-packet mode, only RoCEv2, and with [`SPRAY_SELF_CONTAINED`] only
/// packets a receiver can place without those before them. Everything
/// else, non-RoCE traffic included, follows flowlets.
#[inline(always)]
pub fn sprays(mode: u32, spray: u32, bth: Option<&Bth>) -> bool {
    match bth {
        Some(bth) if mode == MODE_PER_PACKET => {
            spray == SPRAY_ALL || roce::self_contained(bth.opcode)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests;
