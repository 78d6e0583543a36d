//! The forwarding path: the stages in order, one verdict at the end.

use aya_ebpf::{bindings::xdp_action, programs::XdpContext};
use lb_common::{abi::NEXTHOP_USABLE, verdict::Reason};

use crate::{
    count,
    maps::{FL_DEVMAP, FL_GROUPS, FL_NEXTHOPS, FL_SCRATCH},
    parse::parse_frame,
    rewrite::rewrite,
    route::route,
    select::{self, Choice},
};

/// Forwards the packet or leaves it to the kernel, counts the verdict and
/// returns its XDP action.
// Not inlined: the benchmark wrapper calls it too, and each BPF function
// gets its own stack frame, which keeps the wrapper under the 512-byte limit.
#[inline(never)]
pub fn process(ctx: &XdpContext) -> u32 {
    let reason = match forward(ctx) {
        Ok(()) => Reason::Forwarded,
        Err(reason) => reason,
    };
    count::verdict(&reason);
    reason.xdp_action()
}

#[inline(always)]
fn forward(ctx: &XdpContext) -> Result<(), Reason> {
    let scratch = FL_SCRATCH.get_ptr_mut(0).ok_or(Reason::Unsupported)?;
    // SAFETY: this CPU's slot; XDP does not nest on a CPU.
    let scratch = unsafe { &mut *scratch };
    parse_frame(ctx.data(), ctx.data_end(), &mut scratch.parsed)?;
    let group_id = route(&scratch.parsed)?;
    if scratch.parsed.ttl <= 1 {
        return Err(Reason::TtlExpired);
    }
    let group = FL_GROUPS.get(group_id).ok_or(Reason::NoRoute)?;
    let ecmp_id = select::ecmp(group_id, group, scratch)?;
    let len = (ctx.data_end() - ctx.data()) as u64;
    let mut choice = Choice::ecmp(ecmp_id);
    select::next_hop(group_id, group, len, scratch, &mut choice)?;
    let nh = FL_NEXTHOPS.get(choice.nh_id).ok_or(Reason::NoNextHop)?;
    if nh.flags & NEXTHOP_USABLE == 0 {
        return Err(Reason::NoNextHop);
    }
    // Redirect first: it only records the target, and a port missing from
    // the devmap must leave the packet untouched for the kernel.
    FL_DEVMAP
        .redirect(nh.ifindex, xdp_action::XDP_PASS as u64)
        .map_err(|_| Reason::NoNextHop)?;
    rewrite(ctx, &scratch.parsed, nh)?;
    count::forwarded(&choice, len);
    Ok(())
}
