//! The production object: the forwarding program and its maps, nothing
//! else. The benchmark's and the testbed's programs are objects of their
//! own (`src/bin/`).
#![no_std]
#![no_main]

use aya_ebpf::{macros::xdp, programs::XdpContext};
use lb_ebpf::forward::process;

#[xdp]
pub fn fabriclb(ctx: XdpContext) -> u32 {
    process(&ctx)
}
