//! The transmit-error tracepoints: frames the forwarding program redirected
//! that never left, counted per egress ifindex in `FL_TX_ERRORS`. Off the
//! forwarding path: they run only when a redirect fails.
//!
//! Raw tracepoints, whose arguments the daemon checked against the running
//! kernel's BTF; it also wrote, in `FL_TX_WATCH`, where that kernel keeps
//! the device fields read here.

use aya_ebpf::{
    bindings::BPF_NOEXIST, helpers::bpf_probe_read_kernel, programs::RawTracePointContext,
};
use lb_common::abi::tx_errors::{TxErrors, TxWatch, devmap_xmit, redirect_err};

use crate::maps::{FL_INGRESS_PORTS, FL_TX_ERRORS, FL_TX_WATCH};

/// This CPU's counters for `ifindex`, created at zero on first loss.
fn counters(ifindex: u32) -> Option<*mut TxErrors> {
    if let Some(counters) = FL_TX_ERRORS.get_ptr_mut(ifindex) {
        return Some(counters);
    }
    // Another CPU may have created it meanwhile: creating gives every CPU
    // a zeroed slot, so losing that race loses nothing.
    let _ = FL_TX_ERRORS.insert(ifindex, TxErrors::default(), BPF_NOEXIST.into());
    FL_TX_ERRORS.get_ptr_mut(ifindex)
}

/// A kernel value `offset` bytes into the object at `base`.
fn read<T>(base: u64, offset: u32) -> Option<T> {
    // SAFETY: a helper read, which fails rather than faults.
    unsafe { bpf_probe_read_kernel((base + u64::from(offset)) as *const T) }.ok()
}

/// `xdp_redirect_err`: the kernel refused a redirect (the egress device
/// down or not able to take XDP frames). Only redirects through the
/// forwarding program's devmap count: its map id is unique on the host.
pub fn redirect_refused(ctx: &RawTracePointContext) {
    let Some(watch) = FL_TX_WATCH.get(0) else {
        return;
    };
    let map_id: u64 = ctx.arg(redirect_err::MAP_ID);
    if watch.devmap_id == 0 || map_id as u32 != watch.devmap_id {
        return;
    }
    let ifindex: u64 = ctx.arg(redirect_err::INDEX);
    if let Some(counters) = counters(ifindex as u32) {
        // SAFETY: per-CPU slot, no concurrent writer.
        unsafe { (*counters).refused += 1 };
    }
}

/// `xdp_devmap_xmit`: a devmap's bulk transmit and the frames the driver
/// dropped. It names no map or program, only the devices: frames count
/// when they came in on one of the forwarding program's ports in the
/// daemon's network namespace. Another XDP program on those same ports
/// redirecting through a devmap of its own cannot be told apart.
pub fn transmit_dropped(ctx: &RawTracePointContext) {
    let drops = ctx.arg::<u64>(devmap_xmit::DROPS) as i32;
    if drops <= 0 {
        return;
    }
    let Some(watch) = FL_TX_WATCH.get(0) else {
        return;
    };
    let from: u64 = ctx.arg(devmap_xmit::FROM_DEV);
    if !ours(watch, from) {
        return;
    }
    let to: u64 = ctx.arg(devmap_xmit::TO_DEV);
    let Some(ifindex) = read::<u32>(to, watch.ifindex_offset) else {
        return;
    };
    if let Some(counters) = counters(ifindex) {
        // SAFETY: per-CPU slot, no concurrent writer.
        unsafe { (*counters).dropped += drops as u64 };
    }
}

/// Whether `device` is one of the forwarding program's ingress ports.
fn ours(watch: &TxWatch, device: u64) -> bool {
    if watch.netns_cookie == 0 {
        return false;
    }
    let Some(net) = read::<u64>(device, watch.net_offset) else {
        return false;
    };
    if read::<u64>(net, watch.net_cookie_offset) != Some(watch.netns_cookie) {
        return false;
    }
    read::<u32>(device, watch.ifindex_offset)
        // SAFETY: a plain read of a value the map holds.
        .is_some_and(|ifindex| unsafe { FL_INGRESS_PORTS.get(ifindex) }.is_some())
}
