//! The testbed's live-frames generator and the drop that ends its runs.
//! Names in `lb_common::abi::generator`. Links `lb-ebpf/frame`, not the
//! forwarding maps.
#![no_std]
#![no_main]

use aya_ebpf::{
    bindings::xdp_action,
    macros::{map, xdp},
    maps::{Array, PerCpuArray},
    programs::XdpContext,
};
use lb_common::{
    abi::generator::{GEN_HEADER_LEN, GEN_PSN_OFFSET, GenDropped, GenHeader, MAX_GEN_FLOWS, frame},
    packet::parse::{PacketView, Parsed, parse},
};
use lb_ebpf_frame::Frame;

/// Each flow's first `GEN_HEADER_LEN` bytes.
#[map]
static FL_GEN_HEADERS: Array<GenHeader> = Array::with_max_entries(MAX_GEN_FLOWS, 0);
/// How many of `FL_GEN_HEADERS` a run cycles through.
#[map]
static FL_GEN_FLOWS: Array<u32> = Array::with_max_entries(1, 0);
/// Frames built on this CPU (returned XDP_TX): the next frame's number.
#[map]
static FL_GEN_BUILT: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);
/// What `fabriclb_gen_drop` took.
#[map]
static FL_GEN_DROPPED: PerCpuArray<GenDropped> = PerCpuArray::with_max_entries(1, 0);

/// Run by BPF_PROG_TEST_RUN in live-frames mode: frame n carries flow
/// `n % flows` with that flow's next PSN, and goes out of the interface the
/// run names.
#[xdp]
pub fn fabriclb_gen(ctx: XdpContext) -> u32 {
    let (Some(built), Some(flows)) = (FL_GEN_BUILT.get_ptr_mut(0), FL_GEN_FLOWS.get(0)) else {
        return xdp_action::XDP_ABORTED;
    };
    // SAFETY: this CPU's slot; the program does not nest on one CPU.
    let n = unsafe { *built };
    let (flow, psn) = frame(n, *flows);
    let Some(header) = FL_GEN_HEADERS.get(flow) else {
        return xdp_action::XDP_ABORTED;
    };
    let (start, end) = (ctx.data(), ctx.data_end());
    if start + GEN_HEADER_LEN > end {
        return xdp_action::XDP_ABORTED;
    }
    let words = header.bytes.as_ptr() as *const u64;
    for i in 0..GEN_HEADER_LEN / 8 {
        // SAFETY: `start + GEN_HEADER_LEN <= end`, checked above; the map
        // value holds `GEN_HEADER_LEN` bytes.
        unsafe {
            core::ptr::write_unaligned(
                (start + 8 * i) as *mut u64,
                core::ptr::read_unaligned(words.add(i)),
            );
        }
    }
    let psn = psn.to_be_bytes();
    // SAFETY: inside the header just written.
    unsafe {
        core::ptr::write_unaligned(
            (start + GEN_PSN_OFFSET) as *mut [u8; 3],
            [psn[1], psn[2], psn[3]],
        );
    }
    // Counted once built: live-frames mode reports no verdict, so this
    // count is how a run knows every frame went out.
    // SAFETY: as above.
    unsafe { *built = n + 1 };
    xdp_action::XDP_TX
}

/// Where a run ends: RoCEv2 frames counted and dropped.
#[xdp]
pub fn fabriclb_gen_drop(ctx: XdpContext) -> u32 {
    let frame = Frame::of(&ctx);
    let Ok(Parsed { bth: Some(_), .. }) = parse(&frame) else {
        return xdp_action::XDP_PASS;
    };
    if let Some(dropped) = FL_GEN_DROPPED.get_ptr_mut(0) {
        // SAFETY: this CPU's slot.
        unsafe {
            (*dropped).packets += 1;
            (*dropped).bytes += frame.len() as u64;
        }
    }
    xdp_action::XDP_DROP
}
