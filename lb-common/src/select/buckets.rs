//! Resilient bucket assignment for a next-hop group.
//!
//! A flow hashes to a fixed bucket; the bucket names a next hop. Changing the
//! group rewrites as few buckets as possible: removing a next hop reassigns
//! only its own buckets, and adding one takes only its share, so flows on
//! the other next hops never move (the same contract as Linux resilient
//! next-hop groups, without the idle timer). [`fit`] keeps each bucket's
//! home, so that a next hop that went down and comes back takes back its
//! own buckets and no others.

use crate::limits::{MAX_NEXTHOPS_PER_GROUP, NO_NEXTHOP};

/// Reassigns `buckets` (next-hop ids, [`NO_NEXTHOP`] for empty) to the
/// next hops in `live`, each getting `len / live.len()` buckets, the
/// remainder going one each to the next hops that already hold the most.
/// Returns the number of buckets changed. `live` beyond
/// [`MAX_NEXTHOPS_PER_GROUP`] entries is ignored; with no live next hop,
/// every bucket becomes [`NO_NEXTHOP`].
pub fn rebalance(buckets: &mut [u32], live: &[u32]) -> usize {
    rebalance_where(buckets, live, |_| true)
}

/// Fits `buckets` to the `live` next hops, given each bucket's `home`: its
/// next hop while every member is up ([`rebalance`] over all members). A
/// bucket whose home is live is its home's; the others, whose home is
/// down, are shared out among the live next hops as [`rebalance`] shares a
/// table. So a next hop going down moves only its own buckets, and coming
/// back it takes back exactly those, leaving every other flow where it
/// is. Returns the number of buckets changed.
pub fn fit(buckets: &mut [u32], home: &[u32], live: &[u32]) -> usize {
    let live = &live[..live.len().min(MAX_NEXTHOPS_PER_GROUP)];
    let at_home = |i: usize| home.get(i).is_some_and(|h| live.contains(h));
    let mut changed = 0;
    for (i, b) in buckets.iter_mut().enumerate() {
        if at_home(i) && *b != home[i] {
            *b = home[i];
            changed += 1;
        }
    }
    changed + rebalance_where(buckets, live, |i| !at_home(i))
}

/// [`rebalance`] over the buckets whose index `within` accepts; the others
/// are left alone and not counted.
fn rebalance_where(buckets: &mut [u32], live: &[u32], within: impl Fn(usize) -> bool) -> usize {
    let live = &live[..live.len().min(MAX_NEXTHOPS_PER_GROUP)];
    let mut changed = 0;
    if live.is_empty() {
        for (_, b) in buckets
            .iter_mut()
            .enumerate()
            .filter(|(i, b)| within(*i) && **b != NO_NEXTHOP)
        {
            *b = NO_NEXTHOP;
            changed += 1;
        }
        return changed;
    }
    let slot = |id: u32| live.iter().position(|&l| l == id);

    // Buckets of next hops that left become free.
    let mut held = [0usize; MAX_NEXTHOPS_PER_GROUP];
    let mut len = 0;
    for (_, b) in buckets.iter_mut().enumerate().filter(|(i, _)| within(*i)) {
        len += 1;
        match slot(*b) {
            Some(i) => held[i] += 1,
            None => *b = NO_NEXTHOP,
        }
    }

    // Quotas: the remainder goes to those already holding the most, so a
    // balanced table stays untouched.
    let n = live.len();
    let base = len / n;
    let mut extra = len % n;
    let mut quota = [base; MAX_NEXTHOPS_PER_GROUP];
    let mut order: [usize; MAX_NEXTHOPS_PER_GROUP] = core::array::from_fn(|i| i);
    order[..n].sort_unstable_by(|&a, &b| held[b].cmp(&held[a]).then(a.cmp(&b)));
    for &i in &order[..n] {
        if extra == 0 {
            break;
        }
        quota[i] += 1;
        extra -= 1;
    }

    // Over-quota next hops give up their highest buckets.
    for (_, b) in buckets
        .iter_mut()
        .enumerate()
        .rev()
        .filter(|(i, _)| within(*i))
    {
        if let Some(i) = slot(*b)
            && held[i] > quota[i]
        {
            held[i] -= 1;
            *b = NO_NEXTHOP;
        }
    }

    // Every bucket freed above is refilled with a different next hop, so
    // the refills are exactly the changes. Free buckets go round-robin to
    // those under quota, which interleaves next hops across the table
    // instead of giving each a block.
    let mut next = 0;
    for (_, b) in buckets
        .iter_mut()
        .enumerate()
        .filter(|(i, b)| within(*i) && **b == NO_NEXTHOP)
    {
        while held[next % n] >= quota[next % n] {
            next += 1;
        }
        let i = next % n;
        *b = live[i];
        held[i] += 1;
        changed += 1;
        next += 1;
    }
    changed
}

/// The [`spray_sequence`] phase of a switch of `hash_seed`: its seed's
/// bits reversed, so switches whose seeds differ in their low bits
/// (leaves numbered in turn) are turned by halves, quarters, eighths of
/// the line, and the leaves' turns on a path fall at different draws.
/// With the leaves' sequences alike (the data plane's cursors start from
/// the seed, one entry apart), they met spine 4's entries within a draw
/// or two of each other, `fabric-herd`'s spine 4 took flowlets from every
/// leaf at once and then from none (its share swung between 0 and 22% of
/// 50 ms spans), and its ports lost 0-63 packets a row in seven runs;
/// turned apart, 0-12 in eleven. Also turning each destination's
/// sequence (by a golden ratio) lost 43-100 in six.
pub fn sequence_phase(hash_seed: u32) -> u32 {
    hash_seed.reverse_bits()
}

/// How a spray sequence lays its members out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SprayLayout {
    /// A smooth weighted round robin: any run of entries names each
    /// member as often as its weight says, to within one, whatever the
    /// weights. Rebuilt from its start when they change, which moves its
    /// entries under the cursors ([`SprayLayout::Points`] says what that cost
    /// a destination's row). The group's own row keeps it: there a flow
    /// stays on its path unless a turn offers a cheaper one, and with as
    /// many fat flows as equal paths, steered per-packet rows by points
    /// ended 16 flows over 16 spines 1.075-1.15x the mean on the busiest
    /// (four runs), by the round robin 1.025 (three); flowlet rows varied
    /// as much either way (1.025-1.175 against 1.025-1.225,
    /// `equal-paths-16`).
    RoundRobin,
    /// Entry `p` holds the member whose stretch of the weights, laid end
    /// to end over `[0, 1)` and turned by `phase` (in 2^-32 of the line),
    /// holds `p`'s bits reversed (van der Corput's sequence). Any `2^k`
    /// entries in a row hold one point in each `2^-k` of the line, so a
    /// member of share `s` holds about `s` of any run, and among 2, 4, 8
    /// or 16 equal members a run of as many names each once (the phase is
    /// rounded down to a whole `1/n`th of the line for `n` members, `n`
    /// rounded up to a power of two, which keeps that). What an entry
    /// names depends only on where its point falls: when the weights
    /// change, an entry changes only where a boundary crossed its point,
    /// and what a cursor draws next is still in proportion to the new
    /// weights.
    ///
    /// A destination's row takes it. Its flowlets take every turn, and a
    /// destination's cursor on one CPU moves a few entries per sample; the
    /// round robin, rebuilt at every sample while a path's quality moved,
    /// brought that path's entries toward the cursor several times as
    /// often as their share. Around a slowed spine, rated at a twentieth
    /// of its destination's flowlets, the leaves kept its port toward that
    /// leaf full for 300 ms at a time: `fabric-herd`'s steered rows lost
    /// 0.05-0.52% (18 runs, flowlet and per-packet rows), 0-163 packets
    /// of it after the reaction; with points, turned by
    /// [`sequence_phase`], 0.00-0.02% (eleven runs), 0-1 after it; each
    /// destination stepped through by its own stride since
    /// ([`crate::select::position::row_stride`]), 0.01-0.05% (five runs),
    /// all while the leaves react.
    Points { phase: u32 },
}

/// Fills `sequence` with the ids of `members` (`(id, weight)`), each as
/// often as its weight's share says and spread out as `layout` says, so
/// a cursor stepping through it sprays evenly over any stretch, not only
/// over the whole table. Weight 0 takes no share unless every weight is
/// 0, which counts as all equal; with no members, every entry is
/// [`NO_NEXTHOP`]. `sequence`'s length must be a power of two (the
/// map's, [`crate::limits::BUCKETS_PER_GROUP`]).
pub fn spray_sequence(sequence: &mut [u32], members: &[(u32, u32)], layout: SprayLayout) {
    let members = &members[..members.len().min(MAX_NEXTHOPS_PER_GROUP)];
    if members.is_empty() {
        sequence.fill(NO_NEXTHOP);
        return;
    }
    debug_assert!(sequence.len().is_power_of_two());
    let all_zero = members.iter().all(|&(_, w)| w == 0);
    let weight = |w: u32| u64::from(if all_zero { 1 } else { w });
    let total: u64 = members.iter().map(|&(_, w)| weight(w)).sum();
    match layout {
        SprayLayout::RoundRobin => {
            let mut current = [0i64; MAX_NEXTHOPS_PER_GROUP];
            for entry in sequence.iter_mut() {
                let mut pick = 0;
                for (i, &(_, w)) in members.iter().enumerate() {
                    current[i] += weight(w) as i64;
                    if current[i] > current[pick] {
                        pick = i;
                    }
                }
                current[pick] -= total as i64;
                *entry = members[pick].0;
            }
        }
        SprayLayout::Points { phase } => {
            let bits = sequence.len().trailing_zeros();
            let kept = members.len().next_power_of_two().trailing_zeros();
            let phase = phase & !u32::MAX.checked_shr(kept).unwrap_or(0);
            for (p, entry) in sequence.iter_mut().enumerate() {
                // The middle of the entry's 1/len of the line, turned, in
                // 2^-32 of the line, then in weight units.
                let middle =
                    (p as u32).reverse_bits() | (1u32 << 31).checked_shr(bits).unwrap_or(0);
                let point = (u64::from(middle.wrapping_add(phase)) * total) >> 32;
                let mut end = 0;
                *entry = members[members.len() - 1].0;
                for &(id, w) in members {
                    end += weight(w);
                    if point < end {
                        *entry = id;
                        break;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec;
    use std::vec::Vec;

    const N: usize = 512;

    fn counts(buckets: &[u32], ids: &[u32]) -> Vec<usize> {
        ids.iter()
            .map(|id| buckets.iter().filter(|b| *b == id).count())
            .collect()
    }

    #[test]
    fn spray_sequence_is_weighted_and_interleaved() {
        let mut s = vec![0; N];
        let points = SprayLayout::Points { phase: 0 };
        let four = [(7, 1), (8, 1), (9, 1), (10, 1)];
        spray_sequence(&mut s, &four, SprayLayout::RoundRobin);
        assert_eq!(counts(&s, &[7, 8, 9, 10]), [128; 4]);
        assert_eq!(&s[..8], &[7, 8, 9, 10, 7, 8, 9, 10]);
        spray_sequence(&mut s, &four, points);
        assert_eq!(counts(&s, &[7, 8, 9, 10]), [128; 4]);
        assert_eq!(&s[..8], &[7, 9, 8, 10, 7, 9, 8, 10]);

        spray_sequence(&mut s, &[(1, 3), (2, 1)], SprayLayout::RoundRobin);
        assert_eq!(counts(&s, &[1, 2]), [384, 128]);
        assert_eq!(&s[..4], &[1, 1, 2, 1]);
        spray_sequence(&mut s, &[(1, 3), (2, 1)], points);
        assert_eq!(counts(&s, &[1, 2]), [384, 128]);
        assert_eq!(&s[..8], &[1, 1, 1, 2, 1, 1, 1, 2]);

        for layout in [SprayLayout::RoundRobin, points] {
            spray_sequence(&mut s, &[(1, 0), (2, 5)], layout);
            assert_eq!(counts(&s, &[1, 2]), [0, N]);
            spray_sequence(&mut s, &[(1, 0), (2, 0)], layout);
            assert_eq!(counts(&s, &[1, 2]), [256, 256]);
            spray_sequence(&mut s, &[], layout);
            assert!(s.iter().all(|&x| x == NO_NEXTHOP));
        }
    }

    /// Among 4 or 16 equal members, any run of as many entries (from any
    /// entry, around the end) names each once, whatever the phase.
    #[test]
    fn a_run_of_entries_names_equal_members_once_each() {
        let mut s = vec![0; N];
        for n in [4u32, 16] {
            let members: Vec<(u32, u32)> = (0..n).map(|id| (id, 7)).collect();
            let all: Vec<u32> = (0..n).collect();
            for phase in [0, sequence_phase(0x5eed_0003), 0x1234_5678] {
                spray_sequence(&mut s, &members, SprayLayout::Points { phase });
                for from in 0..N {
                    let mut run: Vec<u32> = (0..n as usize).map(|i| s[(from + i) % N]).collect();
                    run.sort_unstable();
                    assert_eq!(run, all, "{n} from {from}, phase {phase:#x}");
                }
            }
        }
    }

    /// A recovering path's weight creeping up moves a few entries, not the
    /// whole sequence under a cursor, and any 64 entries in a row hold
    /// its share within one.
    #[test]
    fn entries_stay_in_place_as_weights_creep() {
        let points = SprayLayout::Points {
            phase: sequence_phase(0x5eed_0001),
        };
        let mut before = vec![0; N];
        let mut after = vec![0; N];
        spray_sequence(
            &mut before,
            &[(0, 1013), (1, 1024), (2, 1021), (3, 152)],
            points,
        );
        spray_sequence(
            &mut after,
            &[(0, 1015), (1, 1024), (2, 1021), (3, 155)],
            points,
        );
        let moved = before.iter().zip(&after).filter(|(a, b)| a != b).count();
        assert!(moved <= 2, "{moved} entries moved");
        let share = 155.0 * 64.0 / f64::from(1015 + 1024 + 1021 + 155);
        for from in 0..N {
            let held = (0..64).filter(|i| after[(from + i) % N] == 3).count() as f64;
            assert!((held - share).abs() <= 1.0, "{held} of 64 from {from}");
        }
    }

    /// Leaves numbered in turn are turned by halves, quarters, eighths.
    #[test]
    fn consecutive_seeds_turn_sequences_apart() {
        let eighths: Vec<u32> = (1..=4)
            .map(|k| sequence_phase(0x5eed_0000 + k) >> 29)
            .collect();
        assert_eq!(eighths, [4, 2, 6, 1]);
    }

    #[test]
    fn fresh_table_is_even_and_interleaved() {
        let mut b = vec![NO_NEXTHOP; N];
        assert_eq!(rebalance(&mut b, &[7, 8, 9, 10]), N);
        assert_eq!(counts(&b, &[7, 8, 9, 10]), [128; 4]);
        assert_eq!(&b[..5], &[7, 8, 9, 10, 7]);
    }

    #[test]
    fn uneven_split_differs_by_at_most_one() {
        let mut b = vec![NO_NEXTHOP; N];
        rebalance(&mut b, &[1, 2, 3]);
        let c = counts(&b, &[1, 2, 3]);
        assert_eq!(c.iter().sum::<usize>(), N);
        assert!(
            c.iter().max().unwrap() - c.iter().min().unwrap() <= 1,
            "{c:?}"
        );
    }

    #[test]
    fn removing_a_next_hop_moves_only_its_buckets() {
        let mut b = vec![NO_NEXTHOP; N];
        rebalance(&mut b, &[1, 2, 3, 4]);
        let before = b.clone();
        let changed = rebalance(&mut b, &[1, 2, 4]);
        assert_eq!(changed, 128);
        for (old, new) in before.iter().zip(&b) {
            if *old != 3 {
                assert_eq!(old, new);
            } else {
                assert_ne!(*new, 3);
            }
        }
        let c = counts(&b, &[1, 2, 4]);
        assert!(
            c.iter().max().unwrap() - c.iter().min().unwrap() <= 1,
            "{c:?}"
        );
    }

    #[test]
    fn adding_a_next_hop_moves_no_more_than_its_share() {
        let mut b = vec![NO_NEXTHOP; N];
        rebalance(&mut b, &[1, 2, 3]);
        let before = b.clone();
        let changed = rebalance(&mut b, &[1, 2, 3, 4]);
        assert_eq!(changed, N / 4);
        for (old, new) in before.iter().zip(&b) {
            assert!(old == new || *new == 4);
        }
        assert_eq!(counts(&b, &[1, 2, 3, 4]), [128; 4]);
    }

    #[test]
    fn unchanged_set_changes_nothing() {
        let mut b = vec![NO_NEXTHOP; N];
        rebalance(&mut b, &[5, 6, 7]);
        assert_eq!(rebalance(&mut b, &[5, 6, 7]), 0);
        assert_eq!(rebalance(&mut b, &[7, 5, 6]), 0);
    }

    #[test]
    fn no_live_next_hop_empties_the_table() {
        let mut b = vec![NO_NEXTHOP; N];
        rebalance(&mut b, &[1, 2]);
        assert_eq!(rebalance(&mut b, &[]), N);
        assert!(b.iter().all(|x| *x == NO_NEXTHOP));
    }

    /// Buckets 0..8 over 4 next hops, round-robin: 1 2 3 4 1 2 3 4.
    fn home() -> Vec<u32> {
        let mut home = vec![NO_NEXTHOP; 8];
        rebalance(&mut home, &[1, 2, 3, 4]);
        assert_eq!(home, [1, 2, 3, 4, 1, 2, 3, 4]);
        home
    }

    #[test]
    fn a_next_hop_down_gives_up_its_own_buckets_and_takes_back_exactly_those() {
        let home = home();
        let mut b = home.clone();
        assert_eq!(fit(&mut b, &home, &[1, 2, 3, 4]), 0);
        // 3 down: buckets 2 and 6 go to two different live next hops,
        // nothing else moves.
        assert_eq!(fit(&mut b, &home, &[1, 2, 4]), 2);
        assert_eq!(b, [1, 2, 1, 4, 1, 2, 2, 4]);
        // 2 down too: its buckets 1 and 5, and bucket 6 it had from 3.
        assert_eq!(fit(&mut b, &home, &[1, 4]), 3);
        assert_eq!(b, [1, 1, 1, 4, 1, 4, 4, 4]);
        // 3 back: buckets 2 and 6 only; 2's go on where they went.
        let before = b.clone();
        let changed = fit(&mut b, &home, &[1, 3, 4]);
        assert_eq!(b[2], 3);
        assert_eq!(b[6], 3);
        for i in [0, 3, 4, 7] {
            assert_eq!(b[i], before[i], "bucket {i} at home moved");
        }
        // 2's orphans (buckets 1 and 5) are shared over the three live
        // ones: at most one of them moves, to 3.
        assert!(changed <= 3, "{changed}: {before:?} -> {b:?}");
        assert!([b[1], b[5]].iter().all(|x| [1, 3, 4].contains(x)), "{b:?}");
        // Everything back: exactly the home table.
        fit(&mut b, &home, &[1, 2, 3, 4]);
        assert_eq!(b, home);
    }

    #[test]
    fn returning_next_hop_takes_no_bucket_that_was_not_its_own() {
        let mut home = vec![NO_NEXTHOP; N];
        rebalance(&mut home, &[1, 2, 3, 4]);
        let mut b = home.clone();
        fit(&mut b, &home, &[1, 2, 4]);
        let down = b.clone();
        assert_eq!(fit(&mut b, &home, &[1, 2, 3, 4]), N / 4);
        for (i, (was, now)) in down.iter().zip(&b).enumerate() {
            if home[i] == 3 {
                assert_eq!(*now, 3, "bucket {i}");
            } else {
                assert_eq!(now, was, "bucket {i} moved");
            }
        }
        // No next hop live: every bucket empty; one back: all its.
        assert_eq!(fit(&mut b, &home, &[]), N);
        assert!(b.iter().all(|&x| x == NO_NEXTHOP));
        fit(&mut b, &home, &[2]);
        assert!(b.iter().all(|&x| x == 2));
    }

    #[test]
    fn remove_then_restore_returns_to_balance() {
        let mut b = vec![NO_NEXTHOP; N];
        let ids: Vec<u32> = (0..16).collect();
        rebalance(&mut b, &ids);
        let without: Vec<u32> = ids.iter().copied().filter(|&i| i != 5).collect();
        rebalance(&mut b, &without);
        let changed = rebalance(&mut b, &ids);
        assert_eq!(changed, N / 16);
        assert_eq!(counts(&b, &ids), vec![N / 16; 16]);
    }
}
