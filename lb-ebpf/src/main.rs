//! fabriclb's XDP program. All decisions come from `lb-common`; this file
//! reads the packet, looks up maps, writes headers and counts verdicts.
#![no_std]
#![no_main]

use aya_ebpf::{
    bindings::xdp_action,
    cty::c_void,
    helpers::{bpf_ktime_get_ns, bpf_loop, bpf_xdp_adjust_head},
    macros::{map, xdp},
    maps::{Array, DevMapHash, HashMap, LpmTrie, LruPerCpuHashMap, PerCpuArray, lpm_trie::Key},
    programs::XdpContext,
};
use lb_common::{
    abi::{
        GroupEntry, GroupStats, NEXTHOP_USABLE, NextHop, NextHopStats,
        bench::{BASELINE_IFINDEX, BENCH_RESTORE_LEN},
        sink::{MAX_SINK_QPS, SinkKey, SinkQp},
    },
    limits::{
        BUCKETS_PER_GROUP, FLOWLET_TABLE_DEFAULT, MAX_EGRESS_PORTS, MAX_GROUPS, MAX_NEXTHOPS,
        MAX_NEXTHOPS_PER_GROUP, MAX_ROUTES, NO_NEXTHOP,
    },
    packet::checksum::{L2_OUT_MAX, egress_l2_header, ipv4_csum_after_ttl_decrement},
    packet::parse::{
        ETH_HLEN, ETH_P_IPV4, ETH_P_IPV6, IPV4_MIN_HLEN, IPV6_HLEN, PacketView, Parsed, parse,
        parse_into,
    },
    select::flowlet::{
        Candidate, FlowletKey, FlowletState, FlowletStep, MODE_ECMP, PathChoice, sprays, step,
    },
    select::hash::{HashFields, HashInput, hash_input, input_hash},
    select::load::load_epoch,
    verdict::Reason,
};

// Static names must equal the constants in `lb_common::abi`.
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
#[map]
static FL_FLOWLETS: LruPerCpuHashMap<FlowletKey, FlowletState> =
    LruPerCpuHashMap::with_max_entries(FLOWLET_TABLE_DEFAULT, 0);
#[map]
static FL_PATH_QUALITY: Array<u32> = Array::with_max_entries(MAX_NEXTHOPS, 0);
#[map]
static FL_SPRAY: Array<u32> = Array::with_max_entries(MAX_GROUPS * BUCKETS_PER_GROUP, 0);
#[map]
static FL_GROUP_STATS: PerCpuArray<GroupStats> = PerCpuArray::with_max_entries(MAX_GROUPS, 0);
/// Per-CPU room for the big values of the forwarding path: on the stack
/// they would push the call chain past BPF's 512 bytes.
#[map]
static FL_SCRATCH: PerCpuArray<Scratch> = PerCpuArray::with_max_entries(1, 0);
#[map]
static FL_LOAD_CLOCK: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

struct Scratch {
    parsed: Parsed,
    input: HashInput,
    key: FlowletKey,
}

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
            (*qp).message.observe(bth.opcode, bth.psn);
            (*qp).bytes += len;
        },
        None => {
            let mut qp = SinkQp {
                bytes: len,
                ..SinkQp::default()
            };
            qp.order.observe(bth.psn);
            qp.message.observe(bth.opcode, bth.psn);
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

/// Parses the frame `start..end` into `out`.
// Not inlined: the parser's temporaries get a frame of their own, popped
// before `dynamic` pushes its own; the chain stays under 512 bytes. Takes
// the packet bounds rather than the context: LLVM would pass the context's
// 32-bit fields instead and widen them in here, and the verifier refuses
// arithmetic on `data_end`.
#[inline(never)]
fn parse_frame(start: usize, end: usize, out: &mut Parsed) -> Result<(), Reason> {
    parse_into(&Frame { start, end }, out)
}

#[inline(always)]
fn forward(ctx: &XdpContext) -> Result<(), Reason> {
    let scratch = FL_SCRATCH.get_ptr_mut(0).ok_or(Reason::Unsupported)?;
    // SAFETY: this CPU's slot; XDP does not nest on a CPU.
    let scratch = unsafe { &mut *scratch };
    parse_frame(ctx.data(), ctx.data_end(), &mut scratch.parsed)?;
    let parsed = &scratch.parsed;
    let group_id = route(parsed).ok_or(Reason::NoRoute)?;
    if parsed.ttl <= 1 {
        return Err(Reason::TtlExpired);
    }
    let group = FL_GROUPS.get(group_id).ok_or(Reason::NoRoute)?;
    scratch.input = hash_input(&parsed.flow, HashFields(group.hash_fields));
    let hash = input_hash(group.hash_seed, &scratch.input);
    let bucket = group_id * BUCKETS_PER_GROUP + (hash & (BUCKETS_PER_GROUP - 1));
    let ecmp_id = *FL_BUCKETS.get(bucket).ok_or(Reason::NoNextHop)?;
    let len = (ctx.data_end() - ctx.data()) as u64;
    let mut choice = Choice {
        nh_id: ecmp_id,
        sprayed: false,
        epoch: None,
    };
    if group.mode != MODE_ECMP {
        let packet = Packet {
            group_id,
            ecmp_id,
            len,
            sprayable: sprays(group.mode, group.spray, scratch.parsed.bth.as_ref()),
        };
        dynamic(&packet, group, scratch, &mut choice)?;
    }
    if choice.nh_id == NO_NEXTHOP {
        return Err(Reason::NoNextHop);
    }
    let nh = FL_NEXTHOPS.get(choice.nh_id).ok_or(Reason::NoNextHop)?;
    if nh.flags & NEXTHOP_USABLE == 0 {
        return Err(Reason::NoNextHop);
    }
    // Redirect first: it only records the target, and a port missing from
    // the devmap must leave the packet untouched for the kernel.
    FL_DEVMAP
        .redirect(nh.ifindex, xdp_action::XDP_PASS as u64)
        .map_err(|_| Reason::NoNextHop)?;
    rewrite(ctx, &scratch.parsed, nh)?;
    if let Some(stats) = FL_NH_STATS.get_ptr_mut(choice.nh_id) {
        // SAFETY: per-CPU slot, no concurrent writer.
        unsafe {
            (*stats).packets += 1;
            (*stats).bytes += len;
            if choice.sprayed {
                (*stats).sprayed += 1;
            }
            if let Some(epoch) = choice.epoch {
                (*stats).load.add(epoch, len);
            }
        }
    }
    Ok(())
}

/// What [`dynamic`] needs to know of a packet besides its hash input.
struct Packet {
    group_id: u32,
    /// The next hop ECMP would pick.
    ecmp_id: u32,
    len: u64,
    sprayable: bool,
}

/// The next hop a packet takes, and what to account for it.
struct Choice {
    nh_id: u32,
    sprayed: bool,
    /// This CPU's load epoch, when the group tracks recent load.
    epoch: Option<u64>,
}

/// Flowlet and per-packet modes: spray what may be sprayed, keep the rest
/// on flowlets. Never chooses a next hop that is down.
// Not inlined: its own stack frame keeps `process` under 512 bytes. BPF
// calls take at most five arguments, hence `Packet` and `out`.
#[inline(never)]
fn dynamic(
    packet: &Packet,
    group: &GroupEntry,
    scratch: &mut Scratch,
    out: &mut Choice,
) -> Result<(), Reason> {
    let Packet {
        group_id,
        ecmp_id,
        len,
        sprayable,
    } = *packet;
    let stats = FL_GROUP_STATS
        .get_ptr_mut(group_id)
        .ok_or(Reason::NoNextHop)?;
    let clock = FL_LOAD_CLOCK.get_ptr_mut(0).ok_or(Reason::NoNextHop)?;
    // SAFETY: per-CPU slots, no concurrent writer.
    let (stats, epoch) = unsafe {
        *clock += len;
        (&mut *stats, load_epoch(*clock))
    };

    if sprayable {
        let index = (stats.spray_cursor as u32) & (BUCKETS_PER_GROUP - 1);
        stats.spray_cursor += 1;
        let listed = *FL_SPRAY
            .get(group_id * BUCKETS_PER_GROUP + index)
            .ok_or(Reason::NoNextHop)?;
        // The sequence can name a next hop that went down moments before
        // the daemon rewrote it; the least loaded usable one stands in.
        let nh_id = if usable(listed) {
            listed
        } else {
            member(group, choose(group, epoch, None, 0)?)
        };
        stats.sprayed += 1;
        *out = Choice {
            nh_id,
            sprayed: true,
            epoch: Some(epoch),
        };
        return Ok(());
    }

    stats.pinned += 1;
    // SAFETY: plain helper call.
    let now = unsafe { bpf_ktime_get_ns() };
    scratch.key = FlowletKey::new(group_id, &scratch.input);
    let key = &scratch.key;
    let state = FL_FLOWLETS.get_ptr_mut(key);
    // SAFETY: this CPU's value; no concurrent writer.
    let previous = state.map(|s| unsafe { *s });
    let next = step(
        previous.as_ref(),
        now,
        group.flowlet_gap_ns,
        group.generation,
        group.member_count,
    );
    let (slot, own, from) = match next {
        FlowletStep::Continue(slot) if usable(member(group, slot)) => {
            (slot, previous_load(&previous, epoch), None)
        }
        FlowletStep::Continue(slot) => (
            choose(group, epoch, None, 0)?,
            previous_load(&previous, epoch),
            Some(slot),
        ),
        FlowletStep::Choose { current } => {
            let own = previous_load(&previous, epoch);
            let offered = current.filter(|&slot| usable(member(group, slot)));
            (choose(group, epoch, offered, own)?, own, current)
        }
        FlowletStep::Start => {
            let slot = match slot_of(group, ecmp_id) {
                Some(slot) if usable(ecmp_id) => slot,
                _ => choose(group, epoch, None, 0)?,
            };
            (slot, 0, None)
        }
    };
    if !matches!(next, FlowletStep::Continue(s) if s == slot) {
        stats.new_flowlets += 1;
    }
    if let Some(from) = from.filter(|&from| from != slot) {
        stats.flowlet_moves += 1;
        // The flow's recent bytes go with it, so the next flowlet to
        // choose sees where the load is now, not where it was.
        move_load(member(group, from), member(group, slot), epoch, own);
    }
    let mut load = match next {
        FlowletStep::Start => Default::default(),
        _ => previous.map(|p| p.load).unwrap_or_default(),
    };
    load.add(epoch, len);
    let updated = FlowletState {
        last_seen_ns: now,
        load,
        slot,
        generation: group.generation,
    };
    match state {
        // SAFETY: as above.
        Some(state) => unsafe { *state = updated },
        None => {
            let _ = FL_FLOWLETS.insert(key, &updated, 0);
        }
    }
    *out = Choice {
        nh_id: member(group, slot),
        sprayed: false,
        epoch: Some(epoch),
    };
    Ok(())
}

#[inline(always)]
fn previous_load(previous: &Option<FlowletState>, epoch: u64) -> u64 {
    previous.map_or(0, |p| p.load.at(epoch))
}

/// The next-hop id in `slot` of `group`, [`NO_NEXTHOP`] past its members.
#[inline(always)]
fn member(group: &GroupEntry, slot: u32) -> u32 {
    if slot >= group.member_count {
        return NO_NEXTHOP;
    }
    // A mask, not a comparison, bounds the index: the verifier sees it on
    // the register that indexes (member_count is at most the array size).
    group.members[slot as usize & (MAX_NEXTHOPS_PER_GROUP - 1)]
}

#[inline(always)]
fn usable(nh_id: u32) -> bool {
    FL_NEXTHOPS
        .get(nh_id)
        .is_some_and(|nh| nh.flags & NEXTHOP_USABLE != 0)
}

/// The slot of next hop `nh_id` in `group`.
#[inline(always)]
fn slot_of(group: &GroupEntry, nh_id: u32) -> Option<u32> {
    for slot in 0..MAX_NEXTHOPS_PER_GROUP as u32 {
        if slot >= group.member_count {
            break;
        }
        if group.members[slot as usize] == nh_id {
            return Some(slot);
        }
    }
    None
}

/// A new flowlet's slot: the usable member with the least recent load per
/// path quality, or `current` when the gain is marginal.
#[inline(always)]
fn choose(group: &GroupEntry, epoch: u64, current: Option<u32>, own: u64) -> Result<u32, Reason> {
    let mut walk = MemberWalk {
        group,
        epoch,
        current: current.unwrap_or(NO_NEXTHOP),
        choice: PathChoice::default(),
        offered: None,
    };
    // bpf_loop has the verifier check one iteration with an unknown index;
    // an unrolled walk over 64 members would branch its way past the
    // verifier's instruction budget.
    // SAFETY: the callback only reads `walk` and the maps.
    unsafe {
        bpf_loop(
            MAX_NEXTHOPS_PER_GROUP as u32,
            consider_member as *mut c_void,
            (&mut walk as *mut MemberWalk).cast(),
            0,
        )
    };
    walk.choice
        .decide(walk.offered, own)
        .ok_or(Reason::NoNextHop)
}

/// State of [`choose`]'s walk over a group's members.
struct MemberWalk<'a> {
    group: &'a GroupEntry,
    epoch: u64,
    /// The flow's slot, offered to stay; [`NO_NEXTHOP`] for none.
    current: u32,
    choice: PathChoice,
    offered: Option<Candidate>,
}

/// One member for [`choose`]; returns 1 to stop after the last member.
extern "C" fn consider_member(index: u64, walk: *mut c_void) -> i64 {
    // SAFETY: `walk` is the `MemberWalk` `choose` passed to bpf_loop.
    let walk = unsafe { &mut *walk.cast::<MemberWalk>() };
    let slot = index as u32;
    let nh_id = member(walk.group, slot);
    if nh_id == NO_NEXTHOP {
        return 1;
    }
    if !usable(nh_id) {
        return 0;
    }
    let candidate = Candidate {
        slot,
        load: FL_NH_STATS.get(nh_id).map_or(0, |s| s.load.at(walk.epoch)),
        quality: FL_PATH_QUALITY.get(nh_id).copied().unwrap_or(0),
    };
    walk.choice.consider(candidate);
    if walk.current == slot {
        walk.offered = Some(candidate);
    }
    0
}

#[inline(always)]
fn move_load(from: u32, to: u32, epoch: u64, bytes: u64) {
    if let Some(stats) = FL_NH_STATS.get_ptr_mut(from) {
        // SAFETY: per-CPU slot, no concurrent writer.
        unsafe { (*stats).load.remove(epoch, bytes) };
    }
    if let Some(stats) = FL_NH_STATS.get_ptr_mut(to) {
        // SAFETY: as above.
        unsafe { (*stats).load.add(epoch, bytes) };
    }
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
// Not inlined, for the same reason as `parse_frame`.
#[inline(never)]
fn rewrite(ctx: &XdpContext, parsed: &Parsed, nh: &NextHop) -> Result<(), Reason> {
    let is_ipv6 = parsed.flow.is_ipv6;
    let ethertype = if is_ipv6 { ETH_P_IPV6 } else { ETH_P_IPV4 };
    let (header, out_len) = egress_l2_header(&nh.dst_mac, &nh.src_mac, nh.vlan, ethertype);
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
