//! The testbed's receiver object: counts what arrives, forwards nothing.
#![no_std]
#![no_main]

mod qps;

use aya_ebpf::{macros::xdp, programs::XdpContext};

#[xdp]
pub fn fabriclb_sink(ctx: XdpContext) -> u32 {
    qps::receive(&ctx)
}
