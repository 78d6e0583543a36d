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

/// Fills `sequence` with the ids of `members` (`(id, weight)`), each as
/// often as its weight's share says and spread out (smooth weighted
/// round-robin), so a cursor stepping through it sprays evenly over any
/// stretch, not only over the whole table. Weight 0 takes no share unless
/// every weight is 0, which counts as all equal; with no members, every
/// entry is [`NO_NEXTHOP`].
pub fn spray_sequence(sequence: &mut [u32], members: &[(u32, u32)]) {
    let members = &members[..members.len().min(MAX_NEXTHOPS_PER_GROUP)];
    if members.is_empty() {
        sequence.fill(NO_NEXTHOP);
        return;
    }
    let all_zero = members.iter().all(|&(_, w)| w == 0);
    let weight = |w: u32| i64::from(if all_zero { 1 } else { w });
    let total: i64 = members.iter().map(|&(_, w)| weight(w)).sum();
    let mut current = [0i64; MAX_NEXTHOPS_PER_GROUP];
    for entry in sequence.iter_mut() {
        let mut pick = 0;
        for (i, &(_, w)) in members.iter().enumerate() {
            current[i] += weight(w);
            if current[i] > current[pick] {
                pick = i;
            }
        }
        current[pick] -= total;
        *entry = members[pick].0;
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
        spray_sequence(&mut s, &[(7, 1), (8, 1), (9, 1), (10, 1)]);
        assert_eq!(counts(&s, &[7, 8, 9, 10]), [128; 4]);
        assert_eq!(&s[..8], &[7, 8, 9, 10, 7, 8, 9, 10]);

        spray_sequence(&mut s, &[(1, 3), (2, 1)]);
        assert_eq!(counts(&s, &[1, 2]), [384, 128]);
        assert_eq!(&s[..4], &[1, 1, 2, 1]);

        spray_sequence(&mut s, &[(1, 0), (2, 5)]);
        assert_eq!(counts(&s, &[1, 2]), [0, N]);
        spray_sequence(&mut s, &[(1, 0), (2, 0)]);
        assert_eq!(counts(&s, &[1, 2]), [256, 256]);
        spray_sequence(&mut s, &[]);
        assert!(s.iter().all(|&x| x == NO_NEXTHOP));
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
