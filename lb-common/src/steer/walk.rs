//! A new flowlet's choice, one member at a time: the program walks a
//! group's members in a `bpf_loop`, the simulator in a plain loop, both
//! through [`MemberWalk::visit`].

use crate::limits::NO_NEXTHOP;
use crate::select::choice::{Drawn, idle_to};
use crate::select::flowlet::{Candidate, PathChoice};

/// Of the usable members `drawn` admits, the one with the least recent
/// load per path quality, an idle one weighed at the load the flowlet
/// draws for it ([`Drawn::idle_load`]); the flow's `current` slot is
/// offered to stay.
#[derive(Clone, Copy, Debug)]
pub struct MemberWalk {
    drawn: Drawn,
    /// The flow's slot; [`NO_NEXTHOP`] for none.
    current: u32,
    /// The flow's own recent load.
    own: u64,
    choice: PathChoice,
    offered: Option<Candidate>,
}

impl MemberWalk {
    /// A walk for a flow on `current` whose own recent load is `own`.
    #[inline(always)]
    pub fn new(drawn: Drawn, current: Option<u32>, own: u64) -> Self {
        Self {
            drawn,
            current: current.unwrap_or(NO_NEXTHOP),
            own,
            choice: PathChoice::default(),
            offered: None,
        }
    }

    /// Member `nh_id` in `slot`, `usable` or not; `weigh` gives its load
    /// and quality, read only for a member the walk weighs.
    #[inline(always)]
    pub fn visit(
        &mut self,
        slot: u32,
        nh_id: u32,
        usable: bool,
        weigh: impl FnOnce() -> (u64, u32),
    ) {
        let named = self.drawn.admits(nh_id);
        let current = self.current == slot;
        if !usable || !(named || current || self.drawn.has_floor()) {
            return;
        }
        let (load, quality) = weigh();
        let idle_peer = self.drawn.admits_quality(quality) && idle_to(load, self.own);
        let candidate = Candidate {
            slot,
            load: if idle_peer {
                self.drawn.idle_load(slot)
            } else {
                load
            },
            quality,
        };
        if named || idle_peer {
            self.choice.consider(candidate);
        }
        if current {
            self.offered = Some(candidate);
        }
    }

    /// The slot the flowlet takes; `None` when no member was usable.
    #[inline(always)]
    pub fn decide(&self) -> Option<u32> {
        self.choice.decide(self.offered, self.own)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::select::choice::flowlet_mix;
    use crate::select::flowlet::PATH_QUALITY_DEFAULT;

    const FLOW: u64 = 1 << 20;

    /// Walks members 10..14 in slots 0..4, each `(load, quality)`.
    fn walk(drawn: Drawn, current: u32, members: [(u64, u32); 4]) -> Option<u32> {
        let mut walk = MemberWalk::new(drawn, Some(current), FLOW);
        for (slot, (load, quality)) in (0u32..).zip(members) {
            walk.visit(slot, 10 + slot, true, || (load, quality));
        }
        walk.decide()
    }

    /// A flow sharing slot 0 with another draws slot 1, which carries a
    /// flow too: it stays, unless the draw weighs the path's idle peers,
    /// where it finds slot 2. Slot 3, idle but worth less than three
    /// quarters of the flow's path, is a peer of none.
    #[test]
    fn a_flow_on_a_shared_path_finds_an_idle_peer() {
        let q = PATH_QUALITY_DEFAULT;
        let members = [(2 * FLOW, q), (FLOW, q), (0, q - q / 8), (0, q * 5 / 8)];
        let drawn = Drawn::pair(11, 11);
        assert_eq!(walk(drawn, 0, members), Some(0));
        assert_eq!(walk(drawn.with_peers_of(q, 0), 0, members), Some(2));
        let busy = [(2 * FLOW, q), (FLOW, q), (FLOW, q), (0, q * 5 / 8)];
        assert_eq!(walk(drawn.with_peers_of(q, 0), 0, busy), Some(0));
        // Drawn, the slower path is weighed, and cheaper per quality.
        assert_eq!(
            walk(Drawn::pair(13, 13).with_peers_of(q, 0), 0, busy),
            Some(3)
        );
        // A peer whose flow is between messages still carries a quarter
        // of the flow's load or more: not idle, not weighed.
        let members = [(2 * FLOW, q), (FLOW, q), (FLOW / 4, q), (0, q * 5 / 8)];
        assert_eq!(walk(drawn.with_peers_of(q, 0), 0, members), Some(0));
        let members = [(2 * FLOW, q), (FLOW, q), (FLOW / 4 - 1, q), (0, q * 5 / 8)];
        assert_eq!(walk(drawn.with_peers_of(q, 0), 0, members), Some(2));
        // Alone on its path, a flow leaves it for no idle peer.
        let members = [(FLOW, q), (FLOW, q), (0, q), (0, q * 5 / 8)];
        assert_eq!(walk(drawn.with_peers_of(q, 0), 0, members), Some(0));
    }

    /// Flows that leave a shared path at once take idle peers of their
    /// own: which is the flowlet's draw, not the least loaded, which is
    /// the same for every flow. Each is taken by about half the flowlets,
    /// the one with a little left of an earlier flow too.
    #[test]
    fn idle_peers_are_weighed_at_loads_the_flowlet_draws() {
        let q = PATH_QUALITY_DEFAULT;
        let members = [(2 * FLOW, q), (FLOW, q), (0, q), (FLOW / 8, q)];
        let drawn = Drawn::pair(11, 11);
        let mut taken = [0; 4];
        for hash in 0..256u32 {
            let peers = drawn.with_peers_of(q, flowlet_mix(hash.wrapping_mul(0x2545_f491), 7));
            if let Some(slot) = walk(peers, 0, members) {
                taken[slot as usize] += 1;
            }
        }
        assert_eq!(taken[0] + taken[1], 0, "{taken:?}");
        assert!((104..=152).contains(&taken[2]), "{taken:?}");
    }
}
