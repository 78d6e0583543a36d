//! fabriclb's XDP programs, each a one-line wrapper: the forwarding path is
//! the `lb_ebpf` library, the benchmark's and the testbed's extras are
//! [`bench`] and [`sink`].
#![no_std]
#![no_main]

mod bench;
mod sink;

use aya_ebpf::{macros::xdp, programs::XdpContext};
use bench::{baseline, restoring};
use lb_ebpf::forward::process;

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

/// Testbed receiver.
#[xdp]
pub fn fabriclb_sink(ctx: XdpContext) -> u32 {
    sink::receive(&ctx)
}
