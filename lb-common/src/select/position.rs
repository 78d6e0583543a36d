//! Where in its spray sequence a drawn flowlet or a sprayed packet looks:
//! the destination's cursor on this CPU, turned by the CPU's share of the
//! members, stepped by the destination's own stride, from the switch's
//! seed (or the flow's hash, for `two-choices`).

use crate::limits::{BUCKETS_PER_GROUP, MAX_NEXTHOPS_PER_GROUP};
#[cfg(doc)]
use crate::select::choice::draw_flow_mask;

/// Flowlets per extra step of the draw's position (see
/// [`draw_positions`]): more than a sequence of a few equal members turns
/// in, so turns stay smooth between steps.
pub const PHASE_STEP: u64 = 16;

/// Where in the spray sequence a flowlet of flow `hash` draws its two
/// candidates under its group's rule, its destination's cursor on this CPU at
/// `cursor`, turned by the CPU's `turn` ([`cpu_turn`]): consecutive
/// entries, which name two different members
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
pub fn draw_positions(
    flow_mask: u32,
    hash: u32,
    seed: u32,
    class: u32,
    cursor: u64,
    turn: u64,
) -> [u32; 2] {
    let from = (hash & flow_mask) | (seed & !flow_mask);
    let steps = cursor.wrapping_add(cursor / PHASE_STEP).wrapping_add(turn) as u32;
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

/// How far CPU `cpu`'s spray cursors are turned ahead in a group of
/// `members`: `cpu`'s low six bits reversed, as a fraction of 64, of the
/// members (CPUs 0 and 1 over 16 members 0 and 8; CPUs 0-3 0, 8, 4 and
/// 12). Six bits, as a group has 64 members at most.
///
/// Every CPU's cursors start at 0, and in a collective they move at one
/// pace: RSS gives each CPU as many flows, and each flow starts a flowlet
/// a round. Unturned, every CPU drew the same entries at the same draws,
/// round after round, so two flows on two CPUs were offered the same
/// path in the same round and moved onto it together. Turned by half the
/// members' span for two CPUs (a quarter for four), the CPUs' draws of a
/// round are consecutive stretches of one run, which among equal members
/// names each once, as one CPU's run does.
#[inline(always)]
pub fn cpu_turn(cpu: u32, members: u32) -> u64 {
    const _: () = assert!(MAX_NEXTHOPS_PER_GROUP <= 1 << TURN_BITS);
    (u64::from(cpu.reverse_bits() >> (32 - TURN_BITS)) * u64::from(members)) >> TURN_BITS
}

/// The bits of the CPU number [`cpu_turn`] spreads.
const TURN_BITS: u32 = 6;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::select::buckets::{SprayLayout, spray_sequence};
    use crate::select::choice::{CHOICE_TWO, CHOICE_WEIGHTED, draw_flow_mask};

    const TWO: u32 = draw_flow_mask(CHOICE_TWO);
    const WEIGHTED: u32 = draw_flow_mask(CHOICE_WEIGHTED);

    /// A sequence of `members` (`(id, weight)`) in the group's round robin.
    fn round_robin(members: &[(u32, u32)]) -> [u32; BUCKETS_PER_GROUP as usize] {
        let mut sequence = [0u32; BUCKETS_PER_GROUP as usize];
        spray_sequence(&mut sequence, members, SprayLayout::RoundRobin);
        sequence
    }

    #[test]
    fn positions_wrap_within_the_sequence_and_move_with_the_cursor() {
        assert_eq!(draw_positions(TWO, 0, 9, 0, 0, 0), [0, 1]);
        assert_eq!(draw_positions(TWO, 511, 9, 0, 0, 0), [511, 0]);
        assert_eq!(draw_positions(TWO, u32::MAX, 9, 0, 2, 0), [1, 2]);
        assert_ne!(
            draw_positions(TWO, 5, 9, 0, 0, 0),
            draw_positions(TWO, 5, 9, 0, 1, 0)
        );
        // Weighted: the cursor from the seed, whatever the flow.
        assert_eq!(draw_positions(WEIGHTED, 77, 0, 0, 3, 0), [3, 4]);
        assert_eq!(draw_positions(WEIGHTED, 5, 0, 0, 3, 0), [3, 4]);
        assert_eq!(draw_positions(WEIGHTED, 5, 513, 0, 3, 0), [4, 5]);
        // One entry further every sixteen flowlets.
        assert_eq!(draw_positions(WEIGHTED, 5, 0, 0, 15, 0), [15, 16]);
        assert_eq!(draw_positions(WEIGHTED, 5, 0, 0, 16, 0), [17, 18]);
        assert_eq!(draw_positions(WEIGHTED, 5, 0, 0, 511, 0), [30, 31]);
    }

    /// Over equal members, every draw is two different ones, and over a
    /// full turn of the cursor each member is drawn equally often; over a
    /// member of half the weight, it is drawn half as often.
    #[test]
    fn draws_follow_the_sequence_weights() {
        let mut sequence = round_robin(&[(10, 4), (11, 4), (12, 4), (13, 4)]);
        let mut drawn = [0u32; 4];
        for cursor in 0..BUCKETS_PER_GROUP as u64 {
            let [a, b] = draw_positions(TWO, 77, 0, 0, cursor, 0).map(|p| sequence[p as usize]);
            assert_ne!(a, b, "cursor {cursor}");
            for id in [a, b] {
                drawn[(id - 10) as usize] += 1;
            }
        }
        assert_eq!(drawn, [256; 4]);
        sequence = round_robin(&[(10, 2), (11, 4), (12, 4), (13, 4)]);
        let mut drawn = [0u32; 4];
        for cursor in 0..BUCKETS_PER_GROUP as u64 {
            for p in draw_positions(TWO, 77, 0, 0, cursor, 0) {
                drawn[(sequence[p as usize] - 10) as usize] += 1;
            }
        }
        let third = f64::from(drawn[0]) / f64::from(drawn[1]);
        assert!((third - 0.5).abs() < 0.02, "{drawn:?}");
    }

    /// Weighted takes the sequence in turn: four successive flowlets over
    /// four equal members take each once, whatever their flows, but where
    /// they straddle a phase step.
    #[test]
    fn weighted_flowlets_take_equal_members_in_turn() {
        let sequence = round_robin(&[(10, 4), (11, 4), (12, 4), (13, 4)]);
        for start in [0u64, 3, 16, 508] {
            let mut taken: Vec<u32> = (start..start + 4)
                .map(|cursor| {
                    let [a, _] = draw_positions(WEIGHTED, cursor as u32 * 7919, 5, 0, cursor, 0);
                    sequence[a as usize]
                })
                .collect();
            taken.sort_unstable();
            assert_eq!(taken, [10, 11, 12, 13], "from cursor {start}");
        }
    }

    #[test]
    fn a_cpu_is_turned_by_its_low_bits_reversed_as_a_share_of_the_members() {
        let turns = |members| (0..5).map(|cpu| cpu_turn(cpu, members)).collect::<Vec<_>>();
        assert_eq!(turns(16), [0, 8, 4, 12, 2]);
        assert_eq!(turns(13), [0, 6, 3, 9, 1]);
        assert_eq!(turns(4), [0, 2, 1, 3, 0]);
        assert_eq!(turns(3), [0, 1, 0, 2, 0]);
        assert_eq!(turns(64), [0, 32, 16, 48, 8]);
        assert_eq!(cpu_turn(65, 64), 32);
        assert_eq!(turns(1), [0; 5]);
        assert_eq!(turns(0), [0; 5]);
    }

    /// Two or four CPUs, each drawing its share of a round (as many
    /// flowlets in all as equal members), together name each member once
    /// a round, in the group's round robin and in a destination's points;
    /// unturned, every CPU drew the same members, so a round named only
    /// one CPU's share of them.
    #[test]
    fn cpus_turned_apart_draw_each_equal_member_once_a_round() {
        use crate::select::buckets::sequence_phase;
        let seed = 0x5eed_0003;
        let layouts = [
            (SprayLayout::RoundRobin, 0),
            (
                SprayLayout::Points {
                    phase: sequence_phase(seed),
                },
                0,
            ),
            (
                SprayLayout::Points {
                    phase: sequence_phase(seed),
                },
                3,
            ),
        ];
        let mut sequence = [0u32; BUCKETS_PER_GROUP as usize];
        for n in [4u32, 8, 16] {
            let members: Vec<(u32, u32)> = (0..n).map(|id| (id, 1)).collect();
            for (layout, class) in layouts {
                spray_sequence(&mut sequence, &members, layout);
                for cpus in [2u32, 4].into_iter().filter(|&cpus| cpus <= n) {
                    let share = u64::from(n / cpus);
                    let round = |r: u64, turned: bool| {
                        let mut named: Vec<u32> = (0..cpus)
                            .flat_map(|cpu| {
                                let turn = if turned { cpu_turn(cpu, n) } else { 0 };
                                (r * share..(r + 1) * share).map(move |cursor| {
                                    draw_positions(WEIGHTED, 0, seed, class, cursor, turn)[0]
                                })
                            })
                            .map(|at| sequence[at as usize])
                            .collect();
                        named.sort_unstable();
                        named.dedup();
                        named.len()
                    };
                    for r in 0..64 {
                        let at = format!("{n} members, {cpus} CPUs, {layout:?}, round {r}");
                        assert_eq!(round(r, true), n as usize, "{at}");
                        assert_eq!(round(r, false), share as usize, "unturned: {at}");
                    }
                }
            }
        }
    }

    /// A flow that is every second (or fourth, or eighth) flowlet of its
    /// CPU draws every one of four equal members within 64 of its own
    /// flowlets, whichever flowlet it starts at; without the phase step
    /// it drew two (or one).
    #[test]
    fn a_flow_in_step_with_the_cursor_still_draws_every_member() {
        let sequence = round_robin(&[(10, 4), (11, 4), (12, 4), (13, 4)]);
        for every in [2u64, 4, 8] {
            for first in 0..every {
                let mut seen = [false; 4];
                for k in 0..64 {
                    let [a, _] = draw_positions(WEIGHTED, 0, 5, 0, first + k * every, 0);
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
            sequence[draw_positions(WEIGHTED, 0, seed, class, cursor, 0)[0] as usize]
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
