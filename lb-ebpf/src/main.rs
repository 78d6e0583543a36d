//! The production object: the forwarding program and its maps, and the
//! tracepoints that count the frames it redirected that never left; nothing
//! else. The benchmark's and the testbed's programs are objects of their
//! own (`src/bin/`).
#![no_std]
#![no_main]

use aya_ebpf::{
    macros::{raw_tracepoint, xdp},
    programs::{RawTracePointContext, XdpContext},
};
use lb_ebpf::{forward::process, tx_errors};

#[xdp]
pub fn fabriclb(ctx: XdpContext) -> u32 {
    process(&ctx)
}

#[raw_tracepoint(tracepoint = "xdp_redirect_err")]
pub fn fabriclb_redirect_err(ctx: RawTracePointContext) -> i32 {
    tx_errors::redirect_refused(&ctx);
    0
}

#[raw_tracepoint(tracepoint = "xdp_devmap_xmit")]
pub fn fabriclb_devmap_xmit(ctx: RawTracePointContext) -> i32 {
    tx_errors::transmit_dropped(&ctx);
    0
}
