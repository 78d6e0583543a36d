//! A new flowlet's choice, one member at a time: the program walks a
//! group's members in a `bpf_loop`, the simulator in a plain loop, both
//! through [`MemberWalk::visit`].

use crate::limits::NO_NEXTHOP;
use crate::select::choice::Drawn;
use crate::select::flowlet::{Candidate, PathChoice};

/// Of the usable members `drawn` admits, the one with the least recent
/// load per path quality; the flow's `current` slot is offered to stay.
#[derive(Clone, Copy, Debug)]
pub struct MemberWalk {
    drawn: Drawn,
    /// The flow's slot; [`NO_NEXTHOP`] for none.
    current: u32,
    choice: PathChoice,
    offered: Option<Candidate>,
}

impl MemberWalk {
    #[inline(always)]
    pub fn new(drawn: Drawn, current: Option<u32>) -> Self {
        Self {
            drawn,
            current: current.unwrap_or(NO_NEXTHOP),
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
        let drawn = self.drawn.admits(nh_id);
        let current = self.current == slot;
        if !usable || !(drawn || current) {
            return;
        }
        let (load, quality) = weigh();
        let candidate = Candidate {
            slot,
            load,
            quality,
        };
        if drawn {
            self.choice.consider(candidate);
        }
        if current {
            self.offered = Some(candidate);
        }
    }

    /// The slot the flowlet takes, given the flow's `own` recent load;
    /// `None` when no member was usable.
    #[inline(always)]
    pub fn decide(&self, own: u64) -> Option<u32> {
        self.choice.decide(self.offered, own)
    }
}
