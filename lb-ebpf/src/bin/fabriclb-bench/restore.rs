//! What the benchmark's entry points run besides the forwarding path.
//! BPF_PROG_TEST_RUN with `repeat` reruns a program on the buffer it
//! already changed; without a restore, the TTL would run down and the run
//! would time the TTL-expired path.

use aya_ebpf::{
    bindings::xdp_action,
    macros::map,
    maps::{Array, PerCpuArray},
    programs::XdpContext,
};
use lb_common::abi::{
    NEXTHOP_USABLE, NextHop,
    bench::{BASELINE_IFINDEX, BENCH_RESTORE_LEN, BenchVary},
};
use lb_ebpf::{
    forward::process,
    maps::{FL_DEVMAP, FL_SCRATCH},
    parse::parse_frame,
    rewrite::rewrite,
    select::flowlet_clock,
};

/// Where the benchmark programs keep the bytes they restore: the forwarding
/// path leaves too little of the 512-byte stack for them.
#[map]
static FL_BENCH_SAVE: PerCpuArray<[u8; BENCH_RESTORE_LEN]> = PerCpuArray::with_max_entries(1, 0);

/// How `varied` changes the packet, written by the bench. One entry shared
/// by all CPUs, so a timed run that moves CPU goes on with new flows
/// instead of repeating another CPU's.
#[map]
static FL_BENCH_VARY: Array<BenchVary> = Array::with_max_entries(1, 0);

/// Runs `program` and puts the first [`BENCH_RESTORE_LEN`] bytes back.
/// Returns XDP_ABORTED for frames it cannot restore (shorter than that, or
/// whose start moved), so a benchmark never times something it did not mean to.
#[inline(always)]
pub fn restoring(ctx: &XdpContext, program: impl Fn(&XdpContext) -> u32) -> u32 {
    let start = ctx.data();
    let Some(saved) = FL_BENCH_SAVE.get_ptr_mut(0) else {
        return xdp_action::XDP_ABORTED;
    };
    if start + BENCH_RESTORE_LEN > ctx.data_end() {
        return xdp_action::XDP_ABORTED;
    }
    // SAFETY: the packet bytes are in bounds (checked above); `saved` is this
    // CPU's slot.
    unsafe {
        core::ptr::copy_nonoverlapping(start as *const u8, saved.cast::<u8>(), BENCH_RESTORE_LEN)
    };
    let action = program(ctx);
    let (after, end) = (ctx.data(), ctx.data_end());
    if after != start || after + BENCH_RESTORE_LEN > end {
        return xdp_action::XDP_ABORTED;
    }
    // SAFETY: as above.
    unsafe {
        core::ptr::copy_nonoverlapping(saved.cast::<u8>(), after as *mut u8, BENCH_RESTORE_LEN)
    };
    action
}

/// The next hop the baseline sends everything to.
const BASELINE_NEXTHOP: NextHop = NextHop {
    ifindex: BASELINE_IFINDEX,
    vlan: 0,
    flags: NEXTHOP_USABLE,
    dst_mac: [0x02, 0, 0, 0, 0, 0x02],
    src_mac: [0x02, 0, 0, 0, 0, 0x01],
};

/// The least any forwarder does, built from the forwarding path's own
/// stages so that the two differ only in what fabriclb adds (the route,
/// the mode's choice of port, the counters): parse the headers into the
/// scratch slot, redirect to a fixed port, write the next hop's L2 header
/// and take one off the TTL. Its parsed fields land in a map, so LLVM
/// keeps the parse whole.
// Not inlined, as `process` is not.
#[inline(never)]
pub fn baseline(ctx: &XdpContext) -> u32 {
    let Some(parsed) = FL_SCRATCH.get_ptr_mut(0) else {
        return xdp_action::XDP_ABORTED;
    };
    // SAFETY: this CPU's slot; XDP does not nest on a CPU.
    let parsed = unsafe { &mut *parsed };
    if let Err(reason) = parse_frame(ctx.data(), ctx.data_end(), parsed) {
        return reason.xdp_action();
    }
    if FL_DEVMAP
        .redirect(BASELINE_IFINDEX, xdp_action::XDP_PASS as u64)
        .is_err()
    {
        return xdp_action::XDP_PASS;
    }
    match rewrite(ctx, parsed, &BASELINE_NEXTHOP) {
        Ok(()) => xdp_action::XDP_REDIRECT,
        Err(reason) => reason.xdp_action(),
    }
}

/// Nothing: what the restore wrapper and the test run cost alone. XDP_DROP
/// because it chose no port; in BPF_PROG_TEST_RUN (without live frames)
/// the verdict is only returned, so the kernel does the same work for any.
// Not inlined, as `process` is not: the call is the wrapper's.
#[inline(never)]
pub fn empty(ctx: &XdpContext) -> u32 {
    // Opaque to LLVM, which would otherwise see nothing between save and
    // restore and turn the restore into a copy of the packet onto itself.
    core::hint::black_box(ctx);
    xdp_action::XDP_DROP
}

/// One read of the clock the flowlet gap test uses, nothing else: what
/// the kernel charges for it, which every packet kept to a flowlet pays.
// Not inlined, as `empty` is not.
#[inline(never)]
pub fn clock(ctx: &XdpContext) -> u32 {
    core::hint::black_box(ctx);
    core::hint::black_box(flowlet_clock());
    xdp_action::XDP_DROP
}

/// `process` on the packet with the field `FL_BENCH_VARY` names rewritten
/// first; XDP_ABORTED if that field is outside what the wrapper restores.
#[inline(always)]
pub fn varied(ctx: &XdpContext) -> u32 {
    let Some(vary) = FL_BENCH_VARY.get_ptr_mut(0) else {
        return xdp_action::XDP_ABORTED;
    };
    // SAFETY: the map's only entry; the bench runs one program at a time.
    let vary = unsafe { &mut *vary };
    let offset = vary.offset as usize;
    let at = ctx.data() + offset;
    if offset + 4 > BENCH_RESTORE_LEN || at + 4 > ctx.data_end() {
        return xdp_action::XDP_ABORTED;
    }
    // SAFETY: `at..at + 4` is inside the packet, checked above.
    unsafe { core::ptr::write_unaligned(at as *mut [u8; 4], vary.value().to_be_bytes()) };
    vary.next = vary.next.wrapping_add(1);
    process(ctx)
}
