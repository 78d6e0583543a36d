//! How a new flowlet picks its next hop among the group's usable members.
//!
//! `least-cost` takes the member with the least recent load per path
//! quality. Every leaf of a fabric reads the same spines' queues, so when
//! one spine's queue toward a leaf builds, every leaf's next flowlets
//! leave it for the same few others at once, and those fill in turn: the
//! herding a greedy choice on shared, stale information is known for
//! (Mitzenmacher 2000; LCMP's "simultaneous flow decision collision").
//!
//! `two-choices` draws two candidates from the group's spray sequence,
//! which holds each member as often as its quality says, and takes the
//! cheaper of the two by the same cost: paths are drawn in proportion to
//! their quality, and load still breaks the draw, but flowlets of one
//! leaf, and different leaves, weigh different pairs (DRILL's and
//! Mitzenmacher's power of two choices).
//!
//! `weighted` takes the next member of the spray sequence at the group's
//! cursor, whatever the load: a weighted round robin of flowlets (each
//! member's entries spread evenly; a destination's kept in place as the
//! weights change, [`crate::select::buckets::SprayLayout`], and stepped
//! through by its own stride, [`row_stride`](crate::select::position::row_stride)), so each
//! path gets new flowlets in proportion to its quality (LetFlow's
//! flowlets, weighted, in turn rather than at random: among equal paths a
//! random draw left 16 flows over 4 paths 1.36x the mean on the busiest,
//! turns leave them even), and a path rated down loses only its share of
//! the quality, not every new flowlet of every leaf at once. In the
//! group's own row a flow still stays where it is unless the turn's member
//! is cheaper by the hysteresis margin; in a destination's row it takes
//! the turn ([`weighs_staying`]).
//!
//! In the group's own row both drawing rules also weigh the idle peers
//! of the path a flow is on (members of at least three quarters of its
//! quality that carry under a quarter of the flow's own load,
//! [`IDLE_PEER_SHARE`]), at three flowlets in four ([`weighs_peers`]):
//! with as many fat flows as equal paths, flows start where ECMP's hash
//! puts them, two to some paths, and a flow sharing one was offered the
//! idle path only when the turns came to it, one candidate per flowlet:
//! 8 flows over 8 spines ended up to 1.25x the mean on the busiest, 1.025
//! with the idle peers weighed. Idle, because a fabric leaf's uplinks
//! each carry several destinations' flows: weighing every peer there
//! balanced those loads and moved each destination's flowlets onto single
//! spine ports (`fabric-herd` lost 3-5%, the `linux` rows, which are the
//! group's own, put a third of their drops on fast ports); idle uplinks
//! are rare on a fabric, and those rows stayed as they were.

use crate::limits::{MAX_NEXTHOPS, NO_NEXTHOP};
use crate::select::flowlet::{LOAD_BIAS, PATH_QUALITY_MAX};
#[cfg(doc)]
use crate::select::position::draw_positions;

/// Least recent load per path quality over every usable member.
pub const CHOICE_LEAST_COST: u32 = 0;
/// The cheaper of two members drawn from the spray sequence.
pub const CHOICE_TWO: u32 = 1;
/// The next member of the spray sequence.
pub const CHOICE_WEIGHTED: u32 = 2;

/// The next hops a choice weighs: two drawn ones, or every member; and
/// with a floor, every member at least as good as it too.
///
/// Eight bytes, as two next-hop ids, a floor and a salt fit (ids are
/// below [`MAX_NEXTHOPS`], a floor at most three quarters of
/// [`PATH_QUALITY_MAX`]): the program copies it in one word, and a wider
/// one cost the verifier half as many instructions again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Drawn {
    ids: [u16; 2],
    /// The least quality of a member weighed besides the named ones;
    /// [`NO_FLOOR`] for none.
    floor: u16,
    /// Draws the idle peers' loads for this flowlet ([`Drawn::idle_load`]).
    salt: u16,
}

/// A [`Drawn`] that weighs only the members it names.
const NO_FLOOR: u16 = u16::MAX;

/// [`NO_NEXTHOP`] in a [`Drawn`]'s ids: every member.
const EVERY: u16 = u16::MAX;

/// What an id past the table narrows to: no member's.
const NONE: u16 = u16::MAX - 1;

const _: () = assert!(MAX_NEXTHOPS <= NONE as u32);

impl Drawn {
    /// Every member.
    pub const ALL: Self = Self {
        ids: [EVERY; 2],
        floor: NO_FLOOR,
        salt: 0,
    };

    /// Next hops `a` and `b`, read from the spray sequence at
    /// [`draw_positions`].
    #[inline(always)]
    pub const fn pair(a: u32, b: u32) -> Self {
        Self {
            ids: [narrow(a), narrow(b)],
            floor: NO_FLOOR,
            salt: 0,
        }
    }

    /// These, and every member whose quality is at least three quarters
    /// of `current`'s, the quality of the path the flow is on: its peers,
    /// weighed for this flowlet as `mix` draws ([`flowlet_mix`],
    /// [`Drawn::idle_load`]).
    #[inline(always)]
    pub const fn with_peers_of(self, current: u32, mix: u32) -> Self {
        let current = if current > PATH_QUALITY_MAX {
            PATH_QUALITY_MAX
        } else {
            current
        };
        Self {
            floor: (current - current / 4) as u16,
            // Bits the coin of `weighs_peers` (the top two) leaves.
            salt: (mix >> 14) as u16,
            ..self
        }
    }

    /// The load an idle peer in `slot` is weighed at for this flowlet:
    /// one drawn under [`LOAD_BIAS`], different from flowlet to flowlet,
    /// instead of what flows gone left on it. Flows that leave paths at
    /// once on different CPUs (a collective's steps start together, and
    /// CPUs hear each other's loads only every 10 ms) each take an idle
    /// path of their own, where by its leftovers the least loaded one,
    /// the same for all, put them together again. With the bias the
    /// draws span up to twice the cost, as a peer of half the quality
    /// would: among peers of about one quality the draw decides.
    #[inline(always)]
    pub fn idle_load(&self, slot: u32) -> u64 {
        ((slot ^ self.salt as u32).wrapping_mul(GOLDEN) >> (32 - LOAD_BIAS.trailing_zeros())) as u64
    }

    /// Whether next hop `nh_id` is weighed whatever its quality.
    #[inline(always)]
    pub fn admits(&self, nh_id: u32) -> bool {
        let id = narrow(nh_id);
        self.ids[0] == EVERY || self.ids[0] == id || self.ids[1] == id
    }

    /// Whether a member is weighed for its quality alone: some are.
    #[inline(always)]
    pub fn has_floor(&self) -> bool {
        self.floor != NO_FLOOR
    }

    /// The least quality of a member weighed for it; `None` when only
    /// the named ones are.
    pub fn floor(&self) -> Option<u32> {
        self.has_floor().then_some(self.floor as u32)
    }

    /// Whether a member of `quality` is weighed for it.
    #[inline(always)]
    pub fn admits_quality(&self, quality: u32) -> bool {
        quality >= self.floor as u32
    }

    pub fn is_all(&self) -> bool {
        self.ids[0] == EVERY
    }

    pub fn ids(&self) -> [u32; 2] {
        self.ids.map(widen)
    }
}

/// A next-hop id as a [`Drawn`] keeps it; an id past the table names no
/// member.
#[inline(always)]
const fn narrow(id: u32) -> u16 {
    if id >= MAX_NEXTHOPS { NONE } else { id as u16 }
}

#[inline(always)]
const fn widen(id: u16) -> u32 {
    if id == EVERY { NO_NEXTHOP } else { id as u32 }
}

/// What a group choosing by `choice` weighs, given the sequence's
/// entries `a` and `b` at [`draw_positions`] (`None` past the map).
#[inline(always)]
pub fn drawn(choice: u32, a: Option<u32>, b: Option<u32>) -> Drawn {
    match (choice, a, b) {
        (CHOICE_TWO, Some(a), Some(b)) => Drawn::pair(a, b),
        (CHOICE_WEIGHTED, Some(a), _) => Drawn::pair(a, a),
        _ => Drawn::ALL,
    }
}

/// The bits of the flow hash a group choosing by `choice` draws at (see
/// [`draw_positions`]).
pub const fn draw_flow_mask(choice: u32) -> u32 {
    if choice == CHOICE_WEIGHTED {
        0
    } else {
        u32::MAX
    }
}

/// Whether a group choosing by `choice` draws from its sequence.
#[inline(always)]
pub fn draws(choice: u32) -> bool {
    choice == CHOICE_TWO || choice == CHOICE_WEIGHTED
}

/// A peer of the flow's path ([`Drawn::with_peers_of`]) is weighed only
/// while it carries under one `IDLE_PEER_SHARE`th of the flow's own load:
/// an idle path, not one whose flow is between messages. On a fabric
/// every uplink carries several destinations' flows, so a leaf's uplinks
/// are seldom idle and the peers seldom weighed: weighing them whatever
/// their load balanced those loads and moved each destination's flowlets
/// onto single spine ports (`fabric-herd` lost 3-5%, the `linux` rows put
/// a third of their drops on fast ports).
pub const IDLE_PEER_SHARE: u64 = 4;

/// Whether a path carrying `load` is idle to a flow whose own recent load
/// is `own`: under one [`IDLE_PEER_SHARE`]th of it.
#[inline(always)]
pub fn idle_to(load: u64, own: u64) -> bool {
    load * IDLE_PEER_SHARE < own
}

/// Whether a flowlet toward a destination of `class`, mixed as
/// [`flowlet_mix`], also weighs its path's idle peers.
///
/// At three flowlets in four, by a coin of the flow and the cursor. Two
/// flows sharing a path whose flowlets start together (a collective's
/// steps) on two CPUs each see the idle peers before the other's move
/// reached them (the CPUs hear each other's loads every 10 ms). When both
/// took the least loaded, the same for both, they met there and came
/// back together: 30 moves each way in one run over 16 paths. A coin at
/// every second flowlet parted them in half the rounds, but left a pair
/// together for a round as often as not, and with three pairs over 16
/// paths some pair for two or three (the busiest spine 1.05-1.15 times
/// the mean in some runs). Now each flowlet weighs the idle peers at
/// loads of its own drawing ([`Drawn::idle_load`]), so two that leave at
/// once mostly part, and a pair stays together for a round only one time
/// in sixteen.
///
/// Only in the group's own row (class 0). A destination's row is a
/// fabric's: its flows wait at the next switch's port toward that
/// destination, which the other leaves fill too, and this leaf's idle
/// uplink says nothing of it. There the rule made a slowed spine's share
/// swing about twice as much (`fabric-herd`'s oscillation 6.0 points
/// against 3.3, nine runs each).
#[inline(always)]
pub fn weighs_peers(class: u32, mix: u32) -> bool {
    class == 0 && mix >> 30 != 0
}

/// The flowlet of flow `hash` drawn at cursor `position`, mixed: the
/// top two bits are [`weighs_peers`]'s coin and the next sixteen draw
/// the idle peers' loads ([`Drawn::idle_load`]).
///
/// A flow's flowlets meet the cursor a stride apart, the number of
/// flowlets its CPU draws in a round, and the golden ratio's multiply
/// alone spreads only consecutive cursors well: at a stride of 8, 13 or
/// 16 (multiples near whole numbers of 2^32) its top bits drift a little
/// a round, and a flow's coin came up as in the round before in up to
/// 89% of rounds at a stride of 8 (93% at 13) instead of 62.5%. Two
/// flows sharing a path on two CPUs then both weighed the idle path, or
/// both did not, round after round: a pair went back and forth between
/// two spines eight times and then stayed together for four rounds
/// (`equal-paths-16`, the busiest spine 1.1 times the mean). Murmur3's
/// finalizer mixes every input bit into the top ones, so every stride
/// tosses afresh.
#[inline(always)]
pub fn flowlet_mix(hash: u32, position: u64) -> u32 {
    let mixed = (hash ^ position as u32).wrapping_mul(GOLDEN);
    let mixed = (mixed ^ (mixed >> 16)).wrapping_mul(0x85EB_CA6B);
    let mixed = (mixed ^ (mixed >> 13)).wrapping_mul(0xC2B2_AE35);
    mixed ^ (mixed >> 16)
}

/// 2^32 over the golden ratio: consecutive integers times it spread
/// evenly over the word.
const GOLDEN: u32 = 0x9E37_79B9;

/// Whether a new flowlet of a group choosing by `choice`, toward a
/// destination of `class`, may stay on its path when the draw offers
/// another that is not cheaper by the hysteresis margin
/// ([`crate::select::flowlet::PathChoice::decide`]).
///
/// Not for `weighted` in a destination's row: there every flowlet takes
/// its turn, so each leaf splits its flowlets toward a leaf over the
/// spines in proportion to their quality for that leaf. With the stay, a
/// flow left its path only for one lighter by this leaf's own loads, so
/// a spine's share was what the flows that happened to stay on it made
/// it, not its quality's: around a spine slowed to a quarter its share
/// swung between 2% and 20% in 10 ms windows against its 7.7%, and the
/// fast spines' ports toward one leaf filled to their limit in turn.
/// Taking the turns, the leaves move only their quality's share of
/// flowlets when a queue builds. In the group's own row the stay keeps a
/// flow alone on its path among equals, where the turns would move it
/// into a collision (`equal-paths-8` and `-16`).
#[inline(always)]
pub fn weighs_staying(choice: u32, class: u32) -> bool {
    class == 0 || choice != CHOICE_WEIGHTED
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_admits_every_member_and_a_pair_its_two() {
        assert!(Drawn::ALL.admits(7) && Drawn::ALL.is_all());
        let pair = Drawn::pair(3, 9);
        assert!(pair.admits(3) && pair.admits(9) && !pair.admits(4) && !pair.is_all());
        assert_eq!(pair.ids(), [3, 9]);
        assert_eq!(Drawn::ALL.ids(), [NO_NEXTHOP; 2]);
        // An id past the table names no member, not every one.
        let past = Drawn::pair(MAX_NEXTHOPS, MAX_NEXTHOPS);
        assert!(!past.is_all() && !past.admits(0) && !past.admits(MAX_NEXTHOPS - 1));
        // Peers: three quarters of the path's quality or more.
        assert_eq!(pair.floor(), None);
        let peers = pair.with_peers_of(1024, 0);
        assert_eq!(peers.floor(), Some(768));
        assert!(peers.admits_quality(768) && !peers.admits_quality(767));
        // A quality past the largest (a map written wrong) floors at the
        // largest's three quarters.
        let past = pair.with_peers_of(u32::MAX, 0).floor();
        assert_eq!(past, Some(PATH_QUALITY_MAX - PATH_QUALITY_MAX / 4));
    }

    #[test]
    fn each_rule_weighs_its_own() {
        assert_eq!(drawn(CHOICE_LEAST_COST, Some(3), Some(4)), Drawn::ALL);
        assert_eq!(drawn(CHOICE_TWO, Some(3), Some(4)), Drawn::pair(3, 4));
        assert_eq!(drawn(CHOICE_WEIGHTED, Some(3), Some(4)), Drawn::pair(3, 3));
        // A sequence entry past the map: every member.
        assert_eq!(drawn(CHOICE_TWO, Some(3), None), Drawn::ALL);
        assert!(draws(CHOICE_TWO) && draws(CHOICE_WEIGHTED) && !draws(CHOICE_LEAST_COST));
    }

    /// The coin: three flowlets of a flow in four, whatever its hash, and
    /// tossed afresh at every flowlet whatever the cursor's stride between
    /// a flow's flowlets (its CPU's flowlets a round): the same as the
    /// last in 62.5% of rounds, as independent coins are (at strides 8,
    /// 13 and 16 the golden multiply alone gave up to 89%, 93% and 78%).
    /// Two flows at one cursor (two CPUs' flowlets at once) toss apart.
    /// No coin in a destination's row.
    #[test]
    fn peers_are_weighed_at_three_flowlets_in_four() {
        for hash in [0u32, 1, 0xdead_beef, u32::MAX] {
            for stride in 1..=16u64 {
                let tosses: Vec<bool> = (0..4096u64)
                    .map(|round| weighs_peers(0, flowlet_mix(hash, round * stride)))
                    .collect();
                let heads = tosses.iter().filter(|&&t| t).count();
                assert!(
                    (2990..=3150).contains(&heads),
                    "hash {hash:#x}, stride {stride}: {heads}"
                );
                let same = tosses.windows(2).filter(|w| w[0] == w[1]).count();
                assert!(
                    (2400..=2720).contains(&same),
                    "hash {hash:#x}, stride {stride}: {same} of 4095 the same as the last"
                );
            }
        }
        let apart = (0..1024u64)
            .filter(|&at| {
                weighs_peers(0, flowlet_mix(0x1234_5678, at))
                    != weighs_peers(0, flowlet_mix(0x8765_4321, at))
            })
            .count();
        assert!((320..=448).contains(&apart), "{apart}");
        // Never in a destination's row.
        assert!((0..1024u64).all(|at| !weighs_peers(3, flowlet_mix(0xdead_beef, at))));
    }
}
