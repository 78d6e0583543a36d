//! Where a flowlet step puts a packet, before any walk over the group's
//! members: the data plane and `fabriclb explain` both decide it here, so
//! an explanation cannot tell another story than the program.

use crate::select::flowlet::FlowletStep;

/// What a packet of a flowlet or per-packet group that is not sprayed does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// This slot: the flowlet goes on, or a first one starts where ECMP
    /// puts the flow.
    Slot(u32),
    /// The least-cost usable member, which `offered` (the flow's slot,
    /// still usable) keeps unless another is cheaper by the hysteresis
    /// margin ([`crate::select::flowlet::PathChoice::decide`]).
    LeastCost { offered: Option<u32> },
}

/// The placement for `step`. `usable(slot)`: whether the member in `slot`
/// may be chosen. `ecmp_start()`: the slot of the flow's ECMP next hop if
/// a first flowlet may start there ([`crate::select::flowlet::starts_on_ecmp`]);
/// only asked for a flow without state, so the others pay nothing for it.
/// A flowlet whose slot became unusable takes the least-cost member at
/// once: staying would black-hole it, and an unusable path has nothing
/// left to reorder.
#[inline(always)]
pub fn placement(
    step: FlowletStep,
    usable: impl Fn(u32) -> bool,
    ecmp_start: impl FnOnce() -> Option<u32>,
) -> Placement {
    match step {
        FlowletStep::Continue(slot) if usable(slot) => Placement::Slot(slot),
        FlowletStep::Continue(_) => Placement::LeastCost { offered: None },
        FlowletStep::Choose { current } => Placement::LeastCost {
            offered: current.filter(|&slot| usable(slot)),
        },
        FlowletStep::Start | FlowletStep::Occupied => match ecmp_start() {
            Some(slot) => Placement::Slot(slot),
            None => Placement::LeastCost { offered: None },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SLOT_2_DOWN: fn(u32) -> bool = |slot| slot != 2;

    #[test]
    fn a_flowlet_stays_on_its_slot_while_usable() {
        let asked = core::cell::Cell::new(false);
        let ecmp = || {
            asked.set(true);
            Some(0)
        };
        assert_eq!(
            placement(FlowletStep::Continue(1), SLOT_2_DOWN, ecmp),
            Placement::Slot(1)
        );
        assert!(
            !asked.get(),
            "a flow with state never looks for ECMP's slot"
        );
        assert_eq!(
            placement(FlowletStep::Continue(2), SLOT_2_DOWN, || Some(0)),
            Placement::LeastCost { offered: None }
        );
    }

    #[test]
    fn a_new_flowlet_offers_its_slot_only_while_usable() {
        let choose = |current| placement(FlowletStep::Choose { current }, SLOT_2_DOWN, || None);
        assert_eq!(choose(Some(1)), Placement::LeastCost { offered: Some(1) });
        assert_eq!(choose(Some(2)), Placement::LeastCost { offered: None });
        assert_eq!(choose(None), Placement::LeastCost { offered: None });
    }

    #[test]
    fn a_first_flowlet_starts_on_ecmp_when_allowed() {
        assert_eq!(
            placement(FlowletStep::Start, SLOT_2_DOWN, || Some(3)),
            Placement::Slot(3)
        );
        assert_eq!(
            placement(FlowletStep::Start, SLOT_2_DOWN, || None),
            Placement::LeastCost { offered: None }
        );
    }
}
