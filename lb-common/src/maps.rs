//! Map names, sizes and the `#[repr(C)]` types both sides of every map agree on.

/// The XDP program's name in the object file.
pub const PROGRAM: &str = "fabriclb";
/// `fabriclb` for benchmarks: restores the packet after each run.
pub const PROGRAM_BENCH: &str = "fabriclb_bench";
/// Benchmark baseline: parse and redirect to [`BASELINE_IFINDEX`].
pub const PROGRAM_BASELINE: &str = "fabriclb_baseline";
/// Testbed receiver: counts RoCEv2 packets per QP and judges their order.
pub const PROGRAM_SINK: &str = "fabriclb_sink";
/// Hash: [`SinkKey`] -> [`SinkQp`], filled by [`PROGRAM_SINK`].
pub const SINK_QPS: &str = "FL_SINK_QPS";
pub const MAX_SINK_QPS: u32 = 65_536;
/// The baseline's fixed egress port: the loopback device, always present.
pub const BASELINE_IFINDEX: u32 = 1;
/// Bytes the benchmark programs save and restore: Ethernet plus the
/// longest IPv4 header, rounded up. Benchmark frames are at least this long.
pub const BENCH_RESTORE_LEN: usize = 96;

/// LPM trie: IPv4 destination prefix -> group id (`u32`).
pub const ROUTES_V4: &str = "FL_ROUTES_V4";
/// LPM trie: IPv6 destination prefix -> group id (`u32`).
pub const ROUTES_V6: &str = "FL_ROUTES_V6";
/// Array: group id -> [`GroupEntry`].
pub const GROUPS: &str = "FL_GROUPS";
/// Array: `group * BUCKETS_PER_GROUP + bucket` -> next-hop id (`u32`).
pub const BUCKETS: &str = "FL_BUCKETS";
/// Array: next-hop id -> [`NextHop`].
pub const NEXTHOPS: &str = "FL_NEXTHOPS";
/// Device hash map: egress ifindex -> itself, the redirect target.
pub const DEVMAP: &str = "FL_DEVMAP";
/// Per-CPU array: [`Reason`] -> packets.
pub const VERDICTS: &str = "FL_VERDICTS";
/// Per-CPU array: next-hop id -> [`NextHopStats`].
pub const NEXTHOP_STATS: &str = "FL_NH_STATS";
/// LRU hash, per-CPU values: [`crate::flowlet::FlowletKey`] ->
/// [`crate::flowlet::FlowletState`]. Its size is set at load time.
pub const FLOWLETS: &str = "FL_FLOWLETS";
/// Array: next-hop id -> path quality (`u32`, higher is better), written
/// by the daemon; see [`crate::flowlet::PATH_QUALITY_DEFAULT`].
pub const PATH_QUALITY: &str = "FL_PATH_QUALITY";
/// Array: `group * BUCKETS_PER_GROUP + i` -> next-hop id: per-packet
/// mode's spray sequence, each next hop as often as its quality says,
/// interleaved.
pub const SPRAY: &str = "FL_SPRAY";
/// Per-CPU array: group id -> [`GroupStats`].
pub const GROUP_STATS: &str = "FL_GROUP_STATS";
/// Per-CPU array, one slot: bytes this CPU forwarded in flowlet and
/// per-packet groups, the clock recent loads age by.
pub const LOAD_CLOCK: &str = "FL_LOAD_CLOCK";

pub const MAX_ROUTES: u32 = 16_384;
pub const MAX_GROUPS: u32 = 64;
pub const MAX_NEXTHOPS: u32 = 1024;
pub const MAX_NEXTHOPS_PER_GROUP: usize = 64;
pub const MAX_EGRESS_PORTS: u32 = 256;
/// Flowlet table entries unless the config says otherwise.
pub const FLOWLET_TABLE_DEFAULT: u32 = 65_536;
/// Buckets per group; a power of two so a hash picks one with a mask. 512
/// keeps the share error under 0.2% per next hop up to 64 next hops.
pub const BUCKETS_PER_GROUP: u32 = 512;
/// Bucket value for "no usable next hop": the packet goes to the kernel.
pub const NO_NEXTHOP: u32 = u32::MAX;

/// A group's data-plane settings.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupEntry {
    /// Zero for a slot no config uses.
    pub in_use: u32,
    /// [`crate::hash::HashFields`] bits.
    pub hash_fields: u32,
    /// Per-switch CRC seed.
    pub hash_seed: u32,
    /// [`crate::flowlet::MODE_ECMP`], `MODE_FLOWLET` or `MODE_PER_PACKET`.
    pub mode: u32,
    /// [`crate::flowlet::SPRAY_SELF_CONTAINED`] or `SPRAY_ALL`.
    pub spray: u32,
    /// Flowlet state from another generation counts as none. The daemon
    /// bumps it when the group enters a flowlet mode from ECMP, so state
    /// left from an earlier flowlet period cannot move a flow that ECMP
    /// has been forwarding, mid-burst. Never 0.
    pub generation: u32,
    pub flowlet_gap_ns: u64,
    /// How many of `members` are in use.
    pub member_count: u32,
    pub _pad: u32,
    /// The group's next-hop ids, usable or not, in config order; flowlet
    /// state names them by index (slot).
    pub members: [u32; MAX_NEXTHOPS_PER_GROUP],
}

impl Default for GroupEntry {
    fn default() -> Self {
        Self {
            in_use: 0,
            hash_fields: 0,
            hash_seed: 0,
            mode: 0,
            spray: 0,
            generation: 0,
            flowlet_gap_ns: 0,
            member_count: 0,
            _pad: 0,
            members: [NO_NEXTHOP; MAX_NEXTHOPS_PER_GROUP],
        }
    }
}

/// Next-hop flag: selectable (configured, link up, MAC known).
pub const NEXTHOP_USABLE: u16 = 1;

/// Everything needed to rewrite and send a packet to one next hop.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NextHop {
    pub ifindex: u32,
    /// 802.1Q tag pushed on egress; 0 sends untagged.
    pub vlan: u16,
    pub flags: u16,
    pub dst_mac: [u8; 6],
    pub src_mac: [u8; 6],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NextHopStats {
    pub packets: u64,
    pub bytes: u64,
    /// Of `packets`, those per-packet mode sprayed here.
    pub sprayed: u64,
    /// Recent bytes from flowlet and per-packet groups: what a new
    /// flowlet compares next hops by.
    pub load: crate::flowlet::RecentLoad,
}

/// Per-CPU state and counters of one group.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupStats {
    /// Position in the spray sequence; not a counter.
    pub spray_cursor: u64,
    /// Flowlets started, a flow's first included.
    pub new_flowlets: u64,
    /// New flowlets that took a different next hop than the flow had.
    pub flowlet_moves: u64,
    /// Packets that picked their own next hop (per-packet mode).
    pub sprayed: u64,
    /// Packets that followed their flowlet (flowlet and per-packet modes).
    pub pinned: u64,
}

/// A QP as a receiver sees it: sender address and destination QP.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SinkKey {
    pub src: [u8; 16],
    pub dest_qp: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SinkQp {
    pub order: crate::roce::PsnOrder,
    pub message: crate::roce::MessageOrder,
    pub bytes: u64,
}

/// Why the program returned what it did; one per-CPU counter each.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// Rewritten and redirected to a next hop (XDP_REDIRECT).
    Forwarded = 0,
    /// Not IPv4/IPv6 (ARP, LLDP, ...): XDP_PASS.
    NotIp,
    /// Destination MAC is multicast or broadcast: XDP_PASS.
    NotUnicast,
    /// No configured prefix covers the destination: XDP_PASS.
    NoRoute,
    /// TTL / hop limit <= 1; the kernel sends the ICMP error: XDP_PASS.
    TtlExpired,
    /// The group has no usable next hop, or its port left the devmap: XDP_PASS.
    NoNextHop,
    /// Valid but beyond what the fast path handles (three or more VLAN
    /// tags, long IPv6 extension chains, jumbograms): XDP_PASS.
    Unsupported,
    /// IP header fine but the TCP/UDP/BTH header is cut short: XDP_PASS, so
    /// the kernel forwards or drops it by its own rules.
    L4Truncated,
    /// Frame ends inside the Ethernet header or a VLAN tag: XDP_DROP.
    L2Truncated,
    /// IP header cut short or inconsistent (version, header length, total
    /// length beyond the frame): XDP_DROP, as the kernel's `ip_rcv` would.
    L3Malformed,
}

/// XDP return codes (kernel ABI, `enum xdp_action`).
pub const XDP_DROP: u32 = 1;
pub const XDP_PASS: u32 = 2;
pub const XDP_REDIRECT: u32 = 4;

impl Reason {
    /// The verdict for this reason: forward, hand to the kernel, or drop
    /// what the kernel would drop anyway.
    pub const fn xdp_action(self) -> u32 {
        match self {
            Reason::Forwarded => XDP_REDIRECT,
            Reason::L2Truncated | Reason::L3Malformed => XDP_DROP,
            _ => XDP_PASS,
        }
    }

    pub const COUNT: u32 = 10;
    pub const ALL: [Reason; Self::COUNT as usize] = [
        Reason::Forwarded,
        Reason::NotIp,
        Reason::NotUnicast,
        Reason::NoRoute,
        Reason::TtlExpired,
        Reason::NoNextHop,
        Reason::Unsupported,
        Reason::L4Truncated,
        Reason::L2Truncated,
        Reason::L3Malformed,
    ];

    /// Metric label.
    pub const fn name(self) -> &'static str {
        match self {
            Reason::Forwarded => "forwarded",
            Reason::NotIp => "not_ip",
            Reason::NotUnicast => "not_unicast",
            Reason::NoRoute => "no_route",
            Reason::TtlExpired => "ttl_expired",
            Reason::NoNextHop => "no_nexthop",
            Reason::Unsupported => "unsupported",
            Reason::L4Truncated => "l4_truncated",
            Reason::L2Truncated => "l2_truncated",
            Reason::L3Malformed => "l3_malformed",
        }
    }
}

#[cfg(feature = "user")]
mod pod {
    // SAFETY: plain `#[repr(C)]` integers and byte arrays, no padding, every
    // bit pattern valid.
    unsafe impl aya::Pod for super::GroupEntry {}
    unsafe impl aya::Pod for super::NextHop {}
    unsafe impl aya::Pod for super::NextHopStats {}
    unsafe impl aya::Pod for super::GroupStats {}
    unsafe impl aya::Pod for crate::flowlet::FlowletKey {}
    unsafe impl aya::Pod for crate::flowlet::FlowletState {}
    unsafe impl aya::Pod for super::SinkKey {}
    unsafe impl aya::Pod for super::SinkQp {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_have_no_padding() {
        assert_eq!(
            core::mem::size_of::<GroupEntry>(),
            40 + 4 * MAX_NEXTHOPS_PER_GROUP
        );
        assert_eq!(core::mem::size_of::<NextHop>(), 20);
        assert_eq!(core::mem::size_of::<NextHopStats>(), 40);
        assert_eq!(core::mem::size_of::<GroupStats>(), 40);
        assert_eq!(core::mem::size_of::<crate::flowlet::FlowletKey>(), 44);
        assert_eq!(core::mem::size_of::<crate::flowlet::FlowletState>(), 32);
        assert_eq!(core::mem::size_of::<SinkKey>(), 20);
        assert_eq!(core::mem::size_of::<SinkQp>(), 48);
    }

    #[test]
    fn reasons_are_dense_and_named_uniquely() {
        for (i, r) in Reason::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i);
        }
        for a in Reason::ALL {
            assert_eq!(
                Reason::ALL.iter().filter(|b| b.name() == a.name()).count(),
                1
            );
        }
    }

    #[test]
    fn bucket_count_is_a_power_of_two() {
        assert!(BUCKETS_PER_GROUP.is_power_of_two());
    }
}
