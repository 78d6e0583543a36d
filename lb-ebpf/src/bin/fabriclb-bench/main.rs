//! The benchmark's object: `fabriclb` as production has it, for balance
//! trials, and two entry points timed against each other behind the same
//! restore wrapper. All share the forwarding maps, so the tables the bench
//! writes serve every program.
#![no_std]
#![no_main]

mod restore;

use aya_ebpf::{macros::xdp, programs::XdpContext};
use lb_ebpf::forward::process;
use restore::{baseline, restoring};

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
