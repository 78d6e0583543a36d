//! Flow events: a packet that changed its flow's path, or found its
//! override's member unusable, notes it while its next hop is chosen;
//! at its verdict the note is sent into `FL_FLOW_EVENTS` within this
//! CPU's budget (`lb_common::abi::events`).

use aya_ebpf::helpers::{bpf_get_smp_processor_id, bpf_ktime_get_ns};
use lb_common::{
    abi::events::{EVENT_NONE, EventBudget, FlowEvent, PendingEvent},
    route::Destination,
};

use crate::maps::{FL_EVENT_BUDGET, FL_EVENT_CONFIG, FL_EVENT_PENDING, FL_FLOW_EVENTS, FL_SCRATCH};
use crate::select::{quality, weighed_load};

/// Notes `pending` for [`flush`] at the packet's verdict.
#[inline(always)]
pub fn note(pending: &PendingEvent) {
    if let Some(slot) = FL_EVENT_PENDING.get_ptr_mut(0) {
        // SAFETY: this CPU's slot, no concurrent writer.
        unsafe { *slot = *pending };
    }
}

/// Sends the packet's noted event, if any, when this CPU's budget admits
/// it. The check is inlined: a packet with nothing to report (nearly
/// every one) pays a load and a branch, not a call.
#[inline(always)]
pub fn flush() {
    let Some(pending) = FL_EVENT_PENDING.get_ptr_mut(0) else {
        return;
    };
    // SAFETY: this CPU's slot, no concurrent writer.
    let pending = unsafe { &mut *pending };
    if pending.kind != EVENT_NONE {
        send(pending);
    }
}

/// Sends `pending` and clears it. Written straight into the ring's slot:
/// an event built on the stack would take 120 of the call chain's 512
/// bytes.
// Not inlined: its own frame, out of the forwarding path's.
#[inline(never)]
fn send(pending: &mut PendingEvent) {
    let noted = *pending;
    pending.kind = EVENT_NONE;
    let (Some(config), Some(budget)) = (FL_EVENT_CONFIG.get(0), FL_EVENT_BUDGET.get_ptr_mut(0))
    else {
        return;
    };
    // SAFETY: a helper without arguments; this CPU's slot, no concurrent
    // writer.
    let (now, budget): (u64, &mut EventBudget) = unsafe { (bpf_ktime_get_ns(), &mut *budget) };
    if !budget.admit(config, noted.hash, now) {
        return;
    }
    let Some(mut slot) = FL_FLOW_EVENTS.reserve::<FlowEvent>(0) else {
        budget.ring_full += 1;
        return;
    };
    let event = slot.as_mut_ptr();
    let destination = Destination {
        group: noted.group,
        class: noted.class,
    };
    // SAFETY: `event` is the reserved slot, sized for a `FlowEvent`; every
    // field is written before it is submitted, each in place.
    unsafe {
        (*event).time_ns = now;
        (*event).gap_ns = noted.gap_ns;
        (*event).from.nh_id = noted.from;
        (*event).from.quality = quality(destination, noted.from);
        (*event).from.load = weighed_load(destination, noted.from_slot, noted.from, noted.epoch);
        (*event).to.nh_id = noted.to;
        (*event).to.quality = quality(destination, noted.to);
        (*event).to.load = weighed_load(destination, noted.to_slot, noted.to, noted.epoch);
        match FL_SCRATCH.get(0) {
            Some(parsed) => (*event).flow = parsed.flow,
            None => (*event).flow = Default::default(),
        }
        (*event).kind = noted.kind;
        (*event).cause = noted.cause;
        (*event).group = noted.group;
        (*event).class = noted.class;
        (*event).override_index = noted.override_index;
        (*event).cpu = bpf_get_smp_processor_id();
    }
    slot.submit(0);
    budget.sent += 1;
}
