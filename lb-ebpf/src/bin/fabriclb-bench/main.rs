//! The benchmark's object: `fabriclb` as production has it, for balance
//! trials, and entry points timed against each other behind the same
//! restore wrapper: the whole path, a baseline, nothing, the flowlet
//! clock's read alone, the path cut short after each stage, and the path on
//! a packet changed before each run. All share the forwarding maps, so the
//! tables the bench writes serve every program. Names in
//! `lb_common::abi::bench`.
#![no_std]
#![no_main]

mod restore;

use aya_ebpf::{macros::xdp, programs::XdpContext};
use lb_ebpf::forward::{process, run, stage};
use restore::{baseline, clock, empty, restoring, varied};

#[xdp]
pub fn fabriclb(ctx: XdpContext) -> u32 {
    process(&ctx)
}

/// The same work as `fabriclb`, leaving the packet as it found it.
#[xdp]
pub fn fabriclb_bench(ctx: XdpContext) -> u32 {
    restoring(&ctx, process)
}

/// The floor fabriclb's cost is measured against.
#[xdp]
pub fn fabriclb_baseline(ctx: XdpContext) -> u32 {
    restoring(&ctx, baseline)
}

/// The floor both are measured above.
#[xdp]
pub fn fabriclb_empty(ctx: XdpContext) -> u32 {
    restoring(&ctx, empty)
}

/// The clock read flowlets pay, above the floor.
#[xdp]
pub fn fabriclb_clock(ctx: XdpContext) -> u32 {
    restoring(&ctx, clock)
}

#[xdp]
pub fn fabriclb_vary(ctx: XdpContext) -> u32 {
    restoring(&ctx, varied)
}

/// The path up to stage `UNTIL`, in a frame of its own as `process` is.
#[inline(never)]
fn until<const UNTIL: u8>(ctx: &XdpContext) -> u32 {
    run::<UNTIL>(ctx)
}

#[xdp]
pub fn fabriclb_until_parse(ctx: XdpContext) -> u32 {
    restoring(&ctx, until::<{ stage::PARSE }>)
}

#[xdp]
pub fn fabriclb_until_route(ctx: XdpContext) -> u32 {
    restoring(&ctx, until::<{ stage::ROUTE }>)
}

#[xdp]
pub fn fabriclb_until_hash(ctx: XdpContext) -> u32 {
    restoring(&ctx, until::<{ stage::HASH }>)
}

#[xdp]
pub fn fabriclb_until_select(ctx: XdpContext) -> u32 {
    restoring(&ctx, until::<{ stage::SELECT }>)
}

#[xdp]
pub fn fabriclb_until_redirect(ctx: XdpContext) -> u32 {
    restoring(&ctx, until::<{ stage::REDIRECT }>)
}

#[xdp]
pub fn fabriclb_until_rewrite(ctx: XdpContext) -> u32 {
    restoring(&ctx, until::<{ stage::REWRITE }>)
}
