//! The forwarding path: the stages in order, one verdict at the end.

use aya_ebpf::{bindings::xdp_action, programs::XdpContext};
use lb_common::{
    abi::NEXTHOP_USABLE,
    limits::NO_NEXTHOP,
    steer::{Choice, Pin},
    verdict::Reason,
};

use crate::{
    count,
    maps::{FL_DEVMAP, FL_GROUPS, FL_NEXTHOPS, FL_SCRATCH},
    parse::parse_frame,
    ports::addressed_to_us,
    report,
    rewrite::rewrite,
    route::route,
    select,
};

/// How far [`run`] goes: production runs every stage; the benchmark's
/// ablations stop after one, so each stage's cost is the difference of two
/// programs built from this one path.
pub mod stage {
    /// Scratch slot and headers, and whether the frame is for this box.
    pub const PARSE: u8 = 1;
    /// Route lookup, TTL check, the group's entry.
    pub const ROUTE: u8 = 2;
    /// ECMP's hash and bucket.
    pub const HASH: u8 = 3;
    /// The mode's choice and the next hop's entry.
    pub const SELECT: u8 = 4;
    pub const REDIRECT: u8 = 5;
    pub const REWRITE: u8 = 6;
    /// Everything, counters included: production.
    pub const ALL: u8 = 7;
}

/// Forwards the packet or leaves it to the kernel, counts the verdict and
/// returns its XDP action.
// Not inlined: the benchmark wrapper calls it too, and each BPF function
// gets its own stack frame, which keeps the wrapper under the 512-byte limit.
#[inline(never)]
pub fn process(ctx: &XdpContext) -> u32 {
    run::<{ stage::ALL }>(ctx)
}

/// [`process`] up to stage `UNTIL`. A cut short run that got through its
/// stages returns the forwarded verdict without counting it, so the
/// benchmark checks every ablation as it checks the whole path.
#[inline(always)]
pub fn run<const UNTIL: u8>(ctx: &XdpContext) -> u32 {
    let reason = match forward::<UNTIL>(ctx) {
        Ok(()) => Reason::Forwarded,
        Err(reason) => reason,
    };
    if UNTIL == stage::ALL {
        // The length as the program leaves the frame: taken before the
        // program ran, it stayed live across the whole path and nearly
        // tripled the verifier's work (72,519 to 207,921 instructions).
        count::verdict(&reason, (ctx.data_end() - ctx.data()) as u64);
        report::flush();
    }
    reason.xdp_action()
}

#[inline(always)]
fn forward<const UNTIL: u8>(ctx: &XdpContext) -> Result<(), Reason> {
    let parsed = FL_SCRATCH.get_ptr_mut(0).ok_or(Reason::Unsupported)?;
    // SAFETY: this CPU's slot; XDP does not nest on a CPU.
    let parsed = unsafe { &mut *parsed };
    parse_frame(ctx.data(), ctx.data_end(), parsed)?;
    let ingress = ctx.ingress_ifindex() as u32;
    if !addressed_to_us(ctx.data(), ctx.data_end(), ingress) {
        return Err(Reason::OtherHost);
    }
    if UNTIL == stage::PARSE {
        return Ok(());
    }
    let destination = route(parsed)?;
    let group_id = destination.group;
    if parsed.ttl <= 1 {
        return Err(Reason::TtlExpired);
    }
    let group = FL_GROUPS.get(group_id).ok_or(Reason::NoRoute)?;
    if UNTIL == stage::ROUTE {
        return Ok(());
    }
    // A packet a per-packet group sprays goes by the spray sequence: no
    // hash, no bucket.
    let (hash, ecmp_id) = if select::sprayed_by_mode(group, parsed) {
        (0, NO_NEXTHOP)
    } else {
        let hash = select::hash(group, parsed);
        (hash, select::bucket(group_id, hash)?)
    };
    if UNTIL == stage::HASH {
        return Ok(());
    }
    let len = (ctx.data_end() - ctx.data()) as u64;
    let pin = if group.override_count != 0 {
        select::pin::pinned(group_id, group, &parsed.flow, ingress)
    } else {
        Pin::NONE
    };
    let mut choice = Choice::ecmp(ecmp_id);
    select::next_hop(destination, group, hash, len, parsed, pin, &mut choice)?;
    let nh = FL_NEXTHOPS.get(choice.nh_id).ok_or(Reason::NoNextHop)?;
    if nh.flags & NEXTHOP_USABLE == 0 {
        return Err(Reason::NoNextHop);
    }
    if UNTIL == stage::SELECT {
        return Ok(());
    }
    // Redirect first: it only records the target, and a port missing from
    // the devmap must leave the packet untouched for the kernel.
    FL_DEVMAP
        .redirect(nh.ifindex, xdp_action::XDP_PASS as u64)
        .map_err(|_| Reason::NoNextHop)?;
    if UNTIL == stage::REDIRECT {
        return Ok(());
    }
    rewrite(ctx, parsed, nh)?;
    if UNTIL == stage::REWRITE {
        return Ok(());
    }
    count::forwarded(&choice, len);
    Ok(())
}
