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
//! through by its own stride, [`row_stride`]), so each
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

use crate::limits::{BUCKETS_PER_GROUP, MAX_NEXTHOPS, NO_NEXTHOP};
use crate::select::flowlet::{LOAD_BIAS, PATH_QUALITY_MAX};

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

/// Flowlets per extra step of the draw's position (see
/// [`draw_positions`]): more than a sequence of a few equal members turns
/// in, so turns stay smooth between steps.
pub const PHASE_STEP: u64 = 16;

/// Where in the spray sequence a flowlet of flow `hash` draws its two
/// candidates under its group's rule, its destination's cursor on this CPU at
/// `cursor`: consecutive entries, which name two different members
/// unless one outweighs the others (in the group's round robin, all of
/// them together; in a destination's points, a quarter of the line apart
/// or more, one whose stretch spans both). For `two-choices` from a
/// position the flow and the cursor set, so that one flow's successive
/// flowlets, other flows and other leaves draw other pairs; for
/// `weighted` (which takes the first) at the cursor from an offset of the
/// switch's `seed`, so that successive flowlets take the sequence in
/// turn. Switches that start together (every leaf of a fabric at a
/// collective's first step, with the same qualities) do not take it in
/// step: their sequences are turned apart by their seeds
/// ([`crate::select::buckets::sequence_phase`]). Which of the two is the
/// group's [`draw_flow_mask`] (`flow_mask`).
///
/// The position moves [`row_stride`] entries per flowlet (one in the
/// group's own row) and as many more every [`PHASE_STEP`] flowlets. In
/// plain turns, a flow whose flowlets come in step with the cursor (every
/// second flowlet of its CPU, as two senders sharing a core make them)
/// would only ever see every second entry, which over equal members is
/// half of them, so a flow started on a crowded path might never draw the
/// one with room (the likely cause of 16 flows over 4 paths ending 1.30x
/// the mean on the busiest in about one CI run in ten, which never showed
/// on an idle machine). The extra step turns such a flow's phase through
/// every entry; four successive flowlets still take four different
/// members but where they straddle it.
#[inline(always)]
pub fn draw_positions(flow_mask: u32, hash: u32, seed: u32, class: u32, cursor: u64) -> [u32; 2] {
    let from = (hash & flow_mask) | (seed & !flow_mask);
    let steps = cursor.wrapping_add(cursor / PHASE_STEP) as u32;
    let at = from.wrapping_add(steps.wrapping_mul(row_stride(class)));
    [
        at & (BUCKETS_PER_GROUP - 1),
        at.wrapping_add(1) & (BUCKETS_PER_GROUP - 1),
    ]
}

/// How many entries a destination of `class`'s cursor moves per draw or
/// sprayed packet: a different odd number for each destination, 1 for the
/// group's own row.
///
/// A leaf's destinations' rows hold the same sequence wherever their
/// qualities agree, and their cursors, all starting at the leaf's seed,
/// move at about the same pace (a collective sends toward each
/// destination in turn). In steps of one they met a path's entries at the
/// same draws: in `fabric-herd` each leaf moved a flowlet of every
/// destination onto the slowed spine in the same round and none for the
/// next few rounds (a trace of every leaf's moves), so the spine's share
/// of what the leaves sent swung between 0 and 19% of 10 ms windows
/// around its 7.7% while the qualities every leaf wrote held it at 7.7%.
/// Different strides meet a path's entries at different draws. An odd
/// stride keeps what the layout promises of a run: `2^k` draws in a row
/// visit every residue modulo `2^k` once, so they still hold one point in
/// each `2^-k` of the line, and equal members still take strict turns.
/// Strided, that share swings 1.7-2.5 points over 50 ms spans (4.5-5.9 in
/// steps of one, five runs each), and with every packet sprayed 0.1
/// (0.4-0.7). What the steered rows lose (0.01-0.05%, 0.00-0.05% before)
/// now all falls in the reaction: in step, the leaves had happened to
/// hold their first flowlets after the change off the slowed spine.
#[inline(always)]
pub const fn row_stride(class: u32) -> u32 {
    class.wrapping_mul(2) | 1
}

/// The entry of its destination's spray sequence that the sprayed packet
/// at `cursor` takes: [`row_stride`] entries on from the one before.
#[inline(always)]
pub const fn spray_position(class: u32, cursor: u64) -> u32 {
    (cursor as u32).wrapping_mul(row_stride(class)) & (BUCKETS_PER_GROUP - 1)
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
    use crate::select::buckets::{SprayLayout, spray_sequence};

    const TWO: u32 = draw_flow_mask(CHOICE_TWO);
    const WEIGHTED: u32 = draw_flow_mask(CHOICE_WEIGHTED);

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

    #[test]
    fn positions_wrap_within_the_sequence_and_move_with_the_cursor() {
        assert_eq!(draw_positions(TWO, 0, 9, 0, 0), [0, 1]);
        assert_eq!(draw_positions(TWO, 511, 9, 0, 0), [511, 0]);
        assert_eq!(draw_positions(TWO, u32::MAX, 9, 0, 2), [1, 2]);
        assert_ne!(
            draw_positions(TWO, 5, 9, 0, 0),
            draw_positions(TWO, 5, 9, 0, 1)
        );
        // Weighted: the cursor from the seed, whatever the flow.
        assert_eq!(draw_positions(WEIGHTED, 77, 0, 0, 3), [3, 4]);
        assert_eq!(draw_positions(WEIGHTED, 5, 0, 0, 3), [3, 4]);
        assert_eq!(draw_positions(WEIGHTED, 5, 513, 0, 3), [4, 5]);
        // One entry further every sixteen flowlets.
        assert_eq!(draw_positions(WEIGHTED, 5, 0, 0, 15), [15, 16]);
        assert_eq!(draw_positions(WEIGHTED, 5, 0, 0, 16), [17, 18]);
        assert_eq!(draw_positions(WEIGHTED, 5, 0, 0, 511), [30, 31]);
    }

    /// Over equal members, every draw is two different ones, and over a
    /// full turn of the cursor each member is drawn equally often; over a
    /// member of half the weight, it is drawn half as often.
    #[test]
    fn draws_follow_the_sequence_weights() {
        let mut sequence = [0u32; BUCKETS_PER_GROUP as usize];
        spray_sequence(
            &mut sequence,
            &[(10, 4), (11, 4), (12, 4), (13, 4)],
            SprayLayout::RoundRobin,
        );
        let mut drawn = [0u32; 4];
        for cursor in 0..BUCKETS_PER_GROUP as u64 {
            let [a, b] = draw_positions(TWO, 77, 0, 0, cursor).map(|p| sequence[p as usize]);
            assert_ne!(a, b, "cursor {cursor}");
            for id in [a, b] {
                drawn[(id - 10) as usize] += 1;
            }
        }
        assert_eq!(drawn, [256; 4]);
        spray_sequence(
            &mut sequence,
            &[(10, 2), (11, 4), (12, 4), (13, 4)],
            SprayLayout::RoundRobin,
        );
        let mut drawn = [0u32; 4];
        for cursor in 0..BUCKETS_PER_GROUP as u64 {
            for p in draw_positions(TWO, 77, 0, 0, cursor) {
                drawn[(sequence[p as usize] - 10) as usize] += 1;
            }
        }
        let third = f64::from(drawn[0]) / f64::from(drawn[1]);
        assert!((third - 0.5).abs() < 0.02, "{drawn:?}");
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

    /// Weighted takes the sequence in turn: four successive flowlets over
    /// four equal members take each once, whatever their flows, but where
    /// they straddle a phase step.
    #[test]
    fn weighted_flowlets_take_equal_members_in_turn() {
        let mut sequence = [0u32; BUCKETS_PER_GROUP as usize];
        spray_sequence(
            &mut sequence,
            &[(10, 4), (11, 4), (12, 4), (13, 4)],
            SprayLayout::RoundRobin,
        );
        for start in [0u64, 3, 16, 508] {
            let mut taken: Vec<u32> = (start..start + 4)
                .map(|cursor| {
                    let [a, _] = draw_positions(WEIGHTED, cursor as u32 * 7919, 5, 0, cursor);
                    sequence[a as usize]
                })
                .collect();
            taken.sort_unstable();
            assert_eq!(taken, [10, 11, 12, 13], "from cursor {start}");
        }
    }

    /// A flow that is every second (or fourth, or eighth) flowlet of its
    /// CPU draws every one of four equal members within 64 of its own
    /// flowlets, whichever flowlet it starts at; without the phase step
    /// it drew two (or one).
    #[test]
    fn a_flow_in_step_with_the_cursor_still_draws_every_member() {
        let mut sequence = [0u32; BUCKETS_PER_GROUP as usize];
        spray_sequence(
            &mut sequence,
            &[(10, 4), (11, 4), (12, 4), (13, 4)],
            SprayLayout::RoundRobin,
        );
        for every in [2u64, 4, 8] {
            for first in 0..every {
                let mut seen = [false; 4];
                for k in 0..64 {
                    let [a, _] = draw_positions(WEIGHTED, 0, 5, 0, first + k * every);
                    seen[(sequence[a as usize] - 10) as usize] = true;
                }
                assert_eq!(seen, [true; 4], "every {every} from {first}");
            }
        }
    }

    /// A leaf's destinations whose rows hold the same sequence, drawing
    /// in step (two flowlets a round each, as a collective sends them):
    /// by their strides they meet a small member's entries at different
    /// rounds, where in steps of one all three met it in the same round;
    /// each still draws its share, and among equal members takes strict
    /// turns.
    #[test]
    fn destinations_drawing_in_step_meet_a_path_at_different_rounds() {
        use crate::select::buckets::sequence_phase;
        let seed = 0x5eed_0001;
        let points = SprayLayout::Points {
            phase: sequence_phase(seed),
        };
        let mut sequence = [0u32; BUCKETS_PER_GROUP as usize];
        spray_sequence(
            &mut sequence,
            &[(10, 1024), (11, 1024), (12, 1024), (13, 256)],
            points,
        );
        let draw = |sequence: &[u32], class: u32, cursor: u64| {
            sequence[draw_positions(WEIGHTED, 0, seed, class, cursor)[0] as usize]
        };
        let drawn = |class, cursor| draw(&sequence, class, cursor);
        // Per round, how many of the three rows' six draws took member 13.
        let rounds = |classes: [u32; 3]| -> Vec<usize> {
            (0..256u64)
                .map(|round| {
                    (classes.iter())
                        .flat_map(|&class| [2 * round, 2 * round + 1].map(|c| drawn(class, c)))
                        .filter(|&id| id == 13)
                        .count()
                })
                .collect()
        };
        let stepping_alike = rounds([0, 0, 0]);
        let strided = rounds([1, 2, 3]);
        let all_three = |per_round: &[usize]| per_round.iter().filter(|&&n| n >= 3).count();
        assert_eq!(all_three(&stepping_alike), 38);
        assert_eq!(all_three(&strided), 0, "{strided:?}");
        // Both draw the member's share, 6 * 256 * 256 / 3328 = 118.
        for per_round in [&stepping_alike, &strided] {
            let sum: usize = per_round.iter().sum();
            assert!((114..=122).contains(&sum), "{sum}");
        }
        for class in 1..=8 {
            // Its share, 512 * 256 / 3328 = 39.4, over 512 draws.
            let held = (0..512).filter(|&c| drawn(class, c) == 13).count();
            assert!((38..=41).contains(&held), "class {class}: {held}");
        }
        let mut equal = [0u32; BUCKETS_PER_GROUP as usize];
        spray_sequence(&mut equal, &[(10, 4), (11, 4), (12, 4), (13, 4)], points);
        for class in 1..=8 {
            for start in [0u64, 3, 17, 508] {
                let mut taken: Vec<u32> =
                    (start..start + 4).map(|c| draw(&equal, class, c)).collect();
                taken.sort_unstable();
                assert_eq!(taken, [10, 11, 12, 13], "class {class} from {start}");
            }
        }
    }

    /// A sprayed packet's entry moves on by its row's stride: every entry
    /// once in a turn of the cursor, in order in the group's own row. Three
    /// destinations spraying in step, 20 packets each per window, hold a
    /// small member's share closer in every window strided than in steps
    /// of one, where their shortfalls and excesses fell together.
    #[test]
    fn sprayed_packets_of_destinations_in_step_spread_a_paths_entries() {
        use crate::select::buckets::sequence_phase;
        for class in 0..8 {
            let mut seen = [false; BUCKETS_PER_GROUP as usize];
            for cursor in 0..u64::from(BUCKETS_PER_GROUP) {
                seen[spray_position(class, cursor) as usize] = true;
            }
            assert!(seen.iter().all(|&s| s), "class {class}");
        }
        assert_eq!(spray_position(0, 7), 7);
        assert_eq!(spray_position(0, 513), 1);
        assert_eq!(spray_position(2, 3), 15);

        let mut sequence = [0u32; BUCKETS_PER_GROUP as usize];
        spray_sequence(
            &mut sequence,
            &[(10, 1024), (11, 1024), (12, 1024), (13, 256)],
            SprayLayout::Points {
                phase: sequence_phase(0x5eed_0001),
            },
        );
        let share = 60.0 * 256.0 / 3328.0;
        let worst = |classes: [u32; 3]| -> f64 {
            (0..512u64)
                .map(|from| {
                    let held = (classes.iter())
                        .flat_map(|&class| (from..from + 20).map(move |c| spray_position(class, c)))
                        .filter(|&p| sequence[p as usize] == 13)
                        .count();
                    (held as f64 - share).abs()
                })
                .fold(0.0, f64::max)
        };
        let (alike, strided) = (worst([0, 0, 0]), worst([1, 2, 3]));
        // 4.4 packets off the share at worst in steps of one, 1.6 strided.
        assert!(alike > 4.0 && strided < 2.0, "{alike} {strided}");
    }
}
