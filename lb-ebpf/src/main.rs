//! fabriclb's XDP program. All decisions come from `lb-common`; this file
//! reads the packet, looks up maps, writes headers and counts verdicts.
#![no_std]
#![no_main]

use aya_ebpf::{
    bindings::xdp_action,
    helpers::bpf_xdp_adjust_head,
    macros::{map, xdp},
    maps::{Array, DevMapHash, HashMap, LpmTrie, PerCpuArray, lpm_trie::Key},
    programs::XdpContext,
};
use lb_common::{
    checksum::{L2_OUT_MAX, egress_l2_header, ipv4_csum_after_ttl_decrement},
    hash::{HashFields, flow_hash},
    maps::{
        BASELINE_IFINDEX, BENCH_RESTORE_LEN, BUCKETS_PER_GROUP, GroupEntry, MAX_EGRESS_PORTS,
        MAX_GROUPS, MAX_NEXTHOPS, MAX_ROUTES, MAX_SINK_QPS, NEXTHOP_USABLE, NO_NEXTHOP, NextHop,
        NextHopStats, Reason, SinkKey, SinkQp,
    },
    parse::{
        ETH_HLEN, ETH_P_IPV4, ETH_P_IPV6, IPV4_MIN_HLEN, IPV6_HLEN, PacketView, Parsed, parse,
    },
};

// Static names must equal the constants in `lb_common::maps`.
#[map]
static FL_ROUTES_V4: LpmTrie<[u8; 4], u32> = LpmTrie::with_max_entries(MAX_ROUTES, 0);
#[map]
static FL_ROUTES_V6: LpmTrie<[u8; 16], u32> = LpmTrie::with_max_entries(MAX_ROUTES, 0);
#[map]
static FL_GROUPS: Array<GroupEntry> = Array::with_max_entries(MAX_GROUPS, 0);
#[map]
static FL_BUCKETS: Array<u32> = Array::with_max_entries(MAX_GROUPS * BUCKETS_PER_GROUP, 0);
#[map]
static FL_NEXTHOPS: Array<NextHop> = Array::with_max_entries(MAX_NEXTHOPS, 0);
#[map]
static FL_DEVMAP: DevMapHash = DevMapHash::with_max_entries(MAX_EGRESS_PORTS, 0);
#[map]
static FL_VERDICTS: PerCpuArray<u64> = PerCpuArray::with_max_entries(Reason::COUNT, 0);
#[map]
static FL_SINK_QPS: HashMap<SinkKey, SinkQp> = HashMap::with_max_entries(MAX_SINK_QPS, 0);
/// Where the benchmark programs keep the bytes they restore: the forwarding
/// path leaves too little of the 512-byte stack for them.
#[map]
static FL_BENCH_SAVE: PerCpuArray<[u8; BENCH_RESTORE_LEN]> = PerCpuArray::with_max_entries(1, 0);
#[map]
static FL_NH_STATS: PerCpuArray<NextHopStats> = PerCpuArray::with_max_entries(MAX_NEXTHOPS, 0);

/// The packet between `data` and `data_end`, read with the explicit end
/// checks the verifier needs.
struct Frame {
    start: usize,
    end: usize,
}

impl PacketView for Frame {
    #[inline(always)]
    fn len(&self) -> usize {
        self.end - self.start
    }

    #[inline(always)]
    fn bytes<const N: usize>(&self, offset: usize) -> Option<[u8; N]> {
        let at = self.start + offset;
        if at + N > self.end {
            return None;
        }
        // SAFETY: `at..at + N` lies inside the packet, checked above.
        Some(unsafe { core::ptr::read_unaligned(at as *const [u8; N]) })
    }
}

#[xdp]
pub fn fabriclb(ctx: XdpContext) -> u32 {
    process(&ctx)
}

/// Benchmark entry point: the same work as `fabriclb`, leaving the packet
/// as it found it. BPF_PROG_TEST_RUN with `repeat` reruns a program on the
/// buffer it already changed; without the restore, the TTL would run down
/// and the run would time the TTL-expired path.
#[xdp]
pub fn fabriclb_bench(ctx: XdpContext) -> u32 {
    restoring(&ctx, process)
}

/// The floor fabriclb's cost is measured against: parse the same headers,
/// redirect to a fixed port, nothing else. Restores like `fabriclb_bench`.
#[xdp]
pub fn fabriclb_baseline(ctx: XdpContext) -> u32 {
    restoring(&ctx, |ctx| {
        let frame = Frame {
            start: ctx.data(),
            end: ctx.data_end(),
        };
        match parse(&frame) {
            Ok(_) => FL_DEVMAP
                .redirect(BASELINE_IFINDEX, xdp_action::XDP_PASS as u64)
                .unwrap_or_else(|action| action),
            Err(reason) => reason.xdp_action(),
        }
    })
}

/// Testbed receiver: counts each RoCEv2 QP's packets, bytes and
/// out-of-order arrivals, then drops the packet; everything else (ARP, ...)
/// goes to the kernel.
#[xdp]
pub fn fabriclb_sink(ctx: XdpContext) -> u32 {
    let frame = Frame {
        start: ctx.data(),
        end: ctx.data_end(),
    };
    let Ok(Parsed {
        bth: Some(bth),
        flow,
        ..
    }) = parse(&frame)
    else {
        return xdp_action::XDP_PASS;
    };
    let key = SinkKey {
        src: flow.src,
        dest_qp: bth.dest_qp,
    };
    let len = frame.len() as u64;
    match FL_SINK_QPS.get_ptr_mut(&key) {
        // SAFETY: map value pointer; one sender per QP, so one writer.
        Some(qp) => unsafe {
            (*qp).order.observe(bth.psn);
            (*qp).bytes += len;
        },
        None => {
            let mut qp = SinkQp {
                bytes: len,
                ..SinkQp::default()
            };
            qp.order.observe(bth.psn);
            let _ = FL_SINK_QPS.insert(&key, &qp, 0);
        }
    }
    xdp_action::XDP_DROP
}

// Not inlined: the benchmark wrapper calls it too, and each BPF function
// gets its own stack frame, which keeps the wrapper under the 512-byte limit.
#[inline(never)]
fn process(ctx: &XdpContext) -> u32 {
    let reason = match forward(ctx) {
        Ok(()) => Reason::Forwarded,
        Err(reason) => reason,
    };
    if let Some(count) = FL_VERDICTS.get_ptr_mut(reason as u32) {
        // SAFETY: per-CPU slot, no concurrent writer.
        unsafe { *count += 1 };
    }
    reason.xdp_action()
}

/// Runs `program` and puts the first [`BENCH_RESTORE_LEN`] bytes back.
/// Returns XDP_ABORTED for frames it cannot restore (shorter than that, or
/// whose start moved), so a benchmark never times something it did not mean to.
#[inline(always)]
fn restoring(ctx: &XdpContext, program: impl Fn(&XdpContext) -> u32) -> u32 {
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

#[inline(always)]
fn forward(ctx: &XdpContext) -> Result<(), Reason> {
    let frame = Frame {
        start: ctx.data(),
        end: ctx.data_end(),
    };
    let parsed = parse(&frame)?;
    let group_id = route(&parsed).ok_or(Reason::NoRoute)?;
    if parsed.ttl <= 1 {
        return Err(Reason::TtlExpired);
    }
    let group = FL_GROUPS.get(group_id).ok_or(Reason::NoRoute)?;
    let hash = flow_hash(group.hash_seed, &parsed.flow, HashFields(group.hash_fields));
    let bucket = group_id * BUCKETS_PER_GROUP + (hash & (BUCKETS_PER_GROUP - 1));
    let nh_id = *FL_BUCKETS.get(bucket).ok_or(Reason::NoNextHop)?;
    if nh_id == NO_NEXTHOP {
        return Err(Reason::NoNextHop);
    }
    let nh = FL_NEXTHOPS.get(nh_id).ok_or(Reason::NoNextHop)?;
    if nh.flags & NEXTHOP_USABLE == 0 {
        return Err(Reason::NoNextHop);
    }
    // Redirect first: it only records the target, and a port missing from
    // the devmap must leave the packet untouched for the kernel.
    FL_DEVMAP
        .redirect(nh.ifindex, xdp_action::XDP_PASS as u64)
        .map_err(|_| Reason::NoNextHop)?;
    let len = frame.len() as u64;
    rewrite(ctx, &parsed, nh)?;
    if let Some(stats) = FL_NH_STATS.get_ptr_mut(nh_id) {
        // SAFETY: per-CPU slot, no concurrent writer.
        unsafe {
            (*stats).packets += 1;
            (*stats).bytes += len;
        }
    }
    Ok(())
}

#[inline(always)]
fn route(parsed: &Parsed) -> Option<u32> {
    let dst = &parsed.flow.dst;
    let group = if parsed.flow.is_ipv6 {
        FL_ROUTES_V6.get(Key::new(128, *dst))
    } else {
        FL_ROUTES_V4.get(Key::new(32, [dst[0], dst[1], dst[2], dst[3]]))
    };
    group.copied()
}

/// Replaces the L2 header with the next hop's and decrements TTL / hop
/// limit. Nothing is written unless the whole rewrite can be done.
#[inline(always)]
fn rewrite(ctx: &XdpContext, parsed: &Parsed, nh: &NextHop) -> Result<(), Reason> {
    let is_ipv6 = parsed.flow.is_ipv6;
    let (header, out_len) = egress_l2_header(nh, if is_ipv6 { ETH_P_IPV6 } else { ETH_P_IPV4 });
    // Ingress tags go, the next hop's tag (if any) comes: move the start.
    let shrink = parsed.l3_offset as i32 - out_len as i32;
    // SAFETY: plain helper call on our own context.
    if shrink != 0 && unsafe { bpf_xdp_adjust_head(ctx.ctx, shrink) } != 0 {
        return Err(Reason::Unsupported);
    }
    let (start, end) = (ctx.data(), ctx.data_end());
    // The parser saw a whole IP header, so this holds; the verifier needs
    // to see it checked against the new start.
    if start + L2_OUT_MAX + IPV6_HLEN > end && start + out_len + IPV4_MIN_HLEN > end {
        return Err(Reason::L3Malformed);
    }
    if out_len == L2_OUT_MAX {
        write_l2::<L2_OUT_MAX>(start, end, &header)?;
        decrement_ttl(start + L2_OUT_MAX, end, is_ipv6)
    } else {
        write_l2::<ETH_HLEN>(start, end, &header)?;
        decrement_ttl(start + ETH_HLEN, end, is_ipv6)
    }
}

#[inline(always)]
fn write_l2<const LEN: usize>(
    start: usize,
    end: usize,
    header: &[u8; L2_OUT_MAX],
) -> Result<(), Reason> {
    if start + LEN > end {
        return Err(Reason::L3Malformed);
    }
    let mut out = [0u8; LEN];
    out.copy_from_slice(&header[..LEN]);
    // SAFETY: `start..start + LEN` is inside the packet, checked above.
    unsafe { core::ptr::write_unaligned(start as *mut [u8; LEN], out) };
    Ok(())
}

#[inline(always)]
fn decrement_ttl(l3: usize, end: usize, is_ipv6: bool) -> Result<(), Reason> {
    if is_ipv6 {
        if l3 + IPV6_HLEN > end {
            return Err(Reason::L3Malformed);
        }
        // SAFETY: hop limit is byte 7 of the IPv6 header, inside the packet.
        unsafe { *((l3 + 7) as *mut u8) -= 1 };
    } else {
        if l3 + IPV4_MIN_HLEN > end {
            return Err(Reason::L3Malformed);
        }
        // SAFETY: TTL/protocol word at 8 and checksum at 10, inside the packet.
        unsafe {
            let word = (l3 + 8) as *mut [u8; 2];
            let csum = (l3 + 10) as *mut [u8; 2];
            let ttl_proto = u16::from_be_bytes(*word);
            let new = ipv4_csum_after_ttl_decrement(u16::from_be_bytes(*csum), ttl_proto);
            (*word)[0] -= 1;
            *csum = new.to_be_bytes();
        }
    }
    Ok(())
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}
