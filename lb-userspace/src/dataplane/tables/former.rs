//! Next hops that leave a group's set and come back: a BGP session that
//! drops takes its spine out of the learned group (its buckets' homes go
//! to the others), and when it is back the spine takes back exactly the
//! buckets that were its homes, so only its own flows move, out and back,
//! rather than a fresh share cut from everyone's.

use lb_common::limits::MAX_NEXTHOPS_PER_GROUP;

use super::GroupTable;
use crate::config::NextHopSpec;

/// Next hops that left, oldest first, with the buckets that were their
/// homes when they left.
pub type Former = Vec<(NextHopSpec, Vec<u16>)>;

/// The record of next hops that left the group `old` was, now that its
/// next hops are `specs` (ids `members`, same order): those that left now
/// are added, and one that is back gets its former buckets as homes in
/// `home`, for the weighted rebalance that follows to keep (they are its
/// share, taken back from whoever was given them).
pub(super) fn remember(
    old: Option<&GroupTable>,
    specs: &[NextHopSpec],
    members: &[u32],
    home: &mut [u32],
) -> Former {
    let Some(old) = old else {
        return Former::new();
    };
    let mut former = old.former.clone();
    for (spec, &id) in old.specs.iter().zip(&old.members) {
        if specs.contains(spec) {
            continue;
        }
        let buckets = (0..home.len())
            .filter(|&b| old.home[b] == id)
            .map(|b| b as u16)
            .collect();
        former.retain(|(s, _)| s != spec);
        former.push((spec.clone(), buckets));
    }
    for (spec, &id) in specs.iter().zip(members) {
        if old.specs.contains(spec) {
            continue;
        }
        if let Some(at) = former.iter().position(|(s, _)| s == spec) {
            let (_, buckets) = former.remove(at);
            for b in buckets {
                if let Some(h) = home.get_mut(usize::from(b)) {
                    *h = id;
                }
            }
        }
    }
    let excess = former.len().saturating_sub(MAX_NEXTHOPS_PER_GROUP);
    former.drain(..excess);
    former
}
