//! Bucket homes in proportion to next-hop weights (the kernel's `weight`
//! of a learned route), still resilient: `select::buckets::rebalance`
//! shares buckets equally among the ids it is given, so each next hop
//! stands for as many ids (slots) as its weight's share asks, and what it
//! held before is spread over its slots first. A next hop that leaves
//! frees only its own homes; one whose weight changes gives up or takes
//! only the difference.

use lb_common::limits::{MAX_NEXTHOPS_PER_GROUP, NO_NEXTHOP};
use lb_common::select::buckets::rebalance;

/// Slots per next hop: each slot is one id `rebalance` shares among.
const SLOTS: usize = MAX_NEXTHOPS_PER_GROUP;

/// Fits `home` (next-hop ids) to `members` with `weights` (same order;
/// empty, or all equal, shares equally). Weights whose reduced sum exceeds
/// [`SLOTS`] are scaled down to it, each keeping at least one slot, so
/// shares are then within a slot (1/64) of exact.
pub(super) fn rebalance_weighted(home: &mut [u32], members: &[u32], weights: &[u32]) {
    let slots = slots(weights);
    if weights.len() != members.len() || slots.iter().all(|&s| s == 1) {
        rebalance(home, members);
        return;
    }
    let virtual_id = |member: usize, slot: usize| (member * SLOTS + slot) as u32;
    let mut held = vec![0usize; members.len()];
    let mut by_slot: Vec<u32> = home
        .iter()
        .map(|h| match members.iter().position(|m| m == h) {
            Some(i) => {
                let slot = held[i] % slots[i];
                held[i] += 1;
                virtual_id(i, slot)
            }
            None => NO_NEXTHOP,
        })
        .collect();
    let live: Vec<u32> = (0..members.len())
        .flat_map(|i| (0..slots[i]).map(move |s| virtual_id(i, s)))
        .collect();
    rebalance(&mut by_slot, &live);
    for (h, v) in home.iter_mut().zip(by_slot) {
        *h = if v == NO_NEXTHOP {
            NO_NEXTHOP
        } else {
            members[v as usize / SLOTS]
        };
    }
}

/// Each weight's slots: the weights over their greatest common divisor,
/// scaled down to [`SLOTS`] in all when they sum to more.
fn slots(weights: &[u32]) -> Vec<usize> {
    let divisor = weights.iter().copied().fold(0, gcd).max(1);
    let reduced: Vec<u64> = weights.iter().map(|&w| u64::from(w / divisor)).collect();
    let sum: u64 = reduced.iter().sum();
    if sum <= SLOTS as u64 {
        return reduced.iter().map(|&w| (w as usize).max(1)).collect();
    }
    let mut slots: Vec<usize> = reduced
        .iter()
        .map(|&w| ((w * SLOTS as u64 + sum / 2) / sum).max(1) as usize)
        .collect();
    while slots.iter().sum::<usize>() > SLOTS {
        let Some(largest) = (0..slots.len()).max_by_key(|&i| slots[i]) else {
            break;
        };
        if slots[largest] == 1 {
            break;
        }
        slots[largest] -= 1;
    }
    slots
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 { a } else { gcd(b, a % b) }
}

#[cfg(test)]
mod tests {
    use lb_common::limits::BUCKETS_PER_GROUP;

    use super::*;

    fn share(home: &[u32], id: u32) -> usize {
        home.iter().filter(|&&h| h == id).count()
    }

    fn fresh() -> Vec<u32> {
        vec![NO_NEXTHOP; BUCKETS_PER_GROUP as usize]
    }

    #[test]
    fn shares_follow_the_weights() {
        let mut home = fresh();
        rebalance_weighted(&mut home, &[7, 8, 9], &[1, 2, 1]);
        assert_eq!(
            [share(&home, 7), share(&home, 8), share(&home, 9)],
            [128, 256, 128]
        );
        let mut home = fresh();
        rebalance_weighted(&mut home, &[7, 8], &[10, 30]);
        assert_eq!([share(&home, 7), share(&home, 8)], [128, 384]);
        let mut equal = fresh();
        rebalance_weighted(&mut equal, &[7, 8, 9], &[5, 5, 5]);
        let mut plain = fresh();
        rebalance(&mut plain, &[7, 8, 9]);
        assert_eq!(equal, plain, "equal weights are plain ECMP");
    }

    #[test]
    fn large_weights_scale_to_the_slots() {
        let mut home = fresh();
        rebalance_weighted(&mut home, &[1, 2], &[101, 155]);
        // 101:155 in 64 slots is 25:39, 8 buckets a slot.
        assert_eq!([share(&home, 1), share(&home, 2)], [200, 312]);
        let mut home = fresh();
        rebalance_weighted(&mut home, &[1, 2], &[100, 155]);
        // 20:31 over their common divisor: 51 slots, 10 buckets and some.
        assert_eq!([share(&home, 1), share(&home, 2)], [202, 310]);
    }

    #[test]
    fn a_leaving_next_hop_frees_only_its_own_homes() {
        let mut home = fresh();
        rebalance_weighted(&mut home, &[1, 2, 3, 4], &[1, 2, 1, 1]);
        let before = home.clone();
        rebalance_weighted(&mut home, &[1, 2, 3], &[1, 2, 1]);
        for (old, new) in before.iter().zip(&home) {
            if *old != 4 {
                assert_eq!(old, new, "a bucket of a next hop that stayed moved");
            }
        }
        assert_eq!(
            [share(&home, 1), share(&home, 2), share(&home, 3)],
            [128, 256, 128]
        );
        let again = home.clone();
        rebalance_weighted(&mut home, &[1, 2, 3], &[1, 2, 1]);
        assert_eq!(home, again, "unchanged weights move nothing");
    }

    #[test]
    fn a_lowered_weight_gives_up_only_the_difference() {
        let mut home = fresh();
        rebalance_weighted(&mut home, &[1, 2], &[1, 3]);
        let before = home.clone();
        rebalance_weighted(&mut home, &[1, 2], &[1, 1]);
        let moved = before.iter().zip(&home).filter(|(a, b)| a != b).count();
        assert_eq!(moved, 128, "next hop 2 gives up 384 - 256");
        assert!(
            before
                .iter()
                .zip(&home)
                .all(|(a, b)| a == b || (*a == 2 && *b == 1))
        );
    }
}
