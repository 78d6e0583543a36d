//! Every map the forwarding path uses. Static names must equal the
//! constants in `lb_common::abi`: the daemon finds the maps by them.

use aya_ebpf::{
    macros::map,
    maps::{Array, DevMapHash, HashMap, LpmTrie, PerCpuArray, PerCpuHashMap, RingBuf},
};
use lb_common::{
    abi::{
        GroupEntry, GroupStats, NextHop, NextHopStats, OverrideEntry, OverrideStats,
        PORT_SLOT_COUNT, PortMacs, VerdictCount,
        events::{EventBudget, EventConfig, FLOW_EVENTS_BYTES, PendingEvent},
        tx_errors::{TxErrors, TxWatch},
    },
    limits::{
        BUCKETS_PER_GROUP, CLASS_LOAD_ROWS, FLOWLET_TABLE_DEFAULT, MAX_CLASSES, MAX_EGRESS_PORTS,
        MAX_GROUPS, MAX_LOCAL_ROUTES, MAX_NEXTHOPS, MAX_OVERRIDES_PER_GROUP, MAX_ROUTES,
        ROUTE4_POOL_BLOCKS, ROUTE6_POOL_BLOCKS, SPRAY_ROWS,
    },
    packet::parse::Parsed,
    route::table::{BLOCK_ENTRIES, FIRST_ENTRIES},
    select::{flowlet::FlowletState, load::RecentLoad},
    verdict::Reason,
};

/// IPv4 destination prefix -> group id, or `LOCAL_ROUTE` for the box's
/// own addresses: the routes as written, which the program never reads
/// (its lookup is [`FL_ROUTE4_FIRST`]'s), for `explain` and restarts.
#[map]
pub static FL_ROUTES_V4: LpmTrie<[u8; 4], u32> =
    LpmTrie::with_max_entries(MAX_ROUTES + MAX_LOCAL_ROUTES, 0);
/// IPv4 route table, first level: destination's first 16 bits -> entry
/// (`lb_common::route::table`).
#[map]
pub static FL_ROUTE4_FIRST: Array<u32> = Array::with_max_entries(FIRST_ENTRIES, 0);
/// IPv4 route table, blocks: `block * BLOCK_ENTRIES + byte` -> entry.
#[map]
pub static FL_ROUTE4_POOL: Array<u32> =
    Array::with_max_entries(ROUTE4_POOL_BLOCKS * BLOCK_ENTRIES, 0);
/// IPv6 destination prefix -> group id, or `LOCAL_ROUTE` for the box's
/// own addresses: read where [`FL_ROUTE6_FIRST`] holds `IN_TRIE`.
#[map]
pub static FL_ROUTES_V6: LpmTrie<[u8; 16], u32> =
    LpmTrie::with_max_entries(MAX_ROUTES + MAX_LOCAL_ROUTES, 0);
/// IPv6 route table, first level, as [`FL_ROUTE4_FIRST`].
#[map]
pub static FL_ROUTE6_FIRST: Array<u32> = Array::with_max_entries(FIRST_ENTRIES, 0);
/// IPv6 route table, blocks, as [`FL_ROUTE4_POOL`].
#[map]
pub static FL_ROUTE6_POOL: Array<u32> =
    Array::with_max_entries(ROUTE6_POOL_BLOCKS * BLOCK_ENTRIES, 0);
/// Each group's traffic-engineering overrides, two halves of
/// `MAX_OVERRIDES_PER_GROUP` per group (`lb_common::select::overrides`).
#[map]
pub static FL_OVERRIDES: Array<OverrideEntry> =
    Array::with_max_entries(MAX_GROUPS * 2 * MAX_OVERRIDES_PER_GROUP, 0);
/// Per-CPU counters of each override, indexed as [`FL_OVERRIDES`].
#[map]
pub static FL_OVR_STATS: PerCpuArray<OverrideStats> =
    PerCpuArray::with_max_entries(MAX_GROUPS * 2 * MAX_OVERRIDES_PER_GROUP, 0);
/// Group id -> the group's mode, hash settings and members.
#[map]
pub static FL_GROUPS: Array<GroupEntry> = Array::with_max_entries(MAX_GROUPS, 0);
/// Each group's ECMP buckets -> next-hop id.
#[map]
pub static FL_BUCKETS: Array<u32> = Array::with_max_entries(MAX_GROUPS * BUCKETS_PER_GROUP, 0);
/// Next-hop id -> egress port, MACs, VLAN and whether it is usable.
#[map]
pub static FL_NEXTHOPS: Array<NextHop> = Array::with_max_entries(MAX_NEXTHOPS, 0);
/// Egress ports, the redirect targets.
#[map]
pub static FL_DEVMAP: DevMapHash = DevMapHash::with_max_entries(MAX_EGRESS_PORTS, 0);
/// Packets and bytes per verdict reason.
#[map]
pub static FL_VERDICTS: PerCpuArray<VerdictCount> = PerCpuArray::with_max_entries(Reason::COUNT, 0);
/// Next-hop id -> packets, bytes, sprayed packets and recent load.
#[map]
pub static FL_NH_STATS: PerCpuArray<NextHopStats> = PerCpuArray::with_max_entries(MAX_NEXTHOPS, 0);
/// Next-hop id -> what the other CPUs' flows put on it, from the daemon.
#[map]
pub static FL_NH_PEER_LOAD: PerCpuArray<u64> = PerCpuArray::with_max_entries(MAX_NEXTHOPS, 0);
/// (Class above 0, member slot) -> what this CPU sent toward the class
/// over the member lately.
#[map]
pub static FL_CLASS_LOAD: PerCpuArray<RecentLoad> =
    PerCpuArray::with_max_entries(CLASS_LOAD_ROWS, 0);
/// (Class above 0, member slot) -> what the other CPUs' flows put there,
/// from the daemon.
#[map]
pub static FL_CLASS_PEERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(CLASS_LOAD_ROWS, 0);
/// Flowlets by `flowlet_index`: when the flows in an entry were last
/// seen, their recent load, their slot.
#[map]
pub static FL_FLOWLETS: PerCpuArray<FlowletState> =
    PerCpuArray::with_max_entries(FLOWLET_TABLE_DEFAULT, 0);
/// `FL_FLOWLETS`'s size; the loader sets both.
#[unsafe(no_mangle)]
static FL_FLOWLET_TABLE_SIZE: u32 = FLOWLET_TABLE_DEFAULT;

/// How many entries `FL_FLOWLETS` has.
#[inline(always)]
pub fn flowlet_table_size() -> u32 {
    // SAFETY: a plain read of a global. Volatile, or LLVM would fold in
    // the value the object was built with instead of the loaded one.
    unsafe { core::ptr::read_volatile(&FL_FLOWLET_TABLE_SIZE) }
}
/// (Destination class, next-hop id) -> path quality, written by the daemon.
#[map]
pub static FL_PATH_QUALITY: Array<u32> = Array::with_max_entries(MAX_CLASSES * MAX_NEXTHOPS, 0);
/// Each group's and class's per-packet spray sequence -> next-hop id.
#[map]
pub static FL_SPRAY: Array<u32> = Array::with_max_entries(SPRAY_ROWS * BUCKETS_PER_GROUP, 0);
/// Group id -> flowlet counters.
#[map]
pub static FL_GROUP_STATS: PerCpuArray<GroupStats> = PerCpuArray::with_max_entries(MAX_GROUPS, 0);
/// Spray row -> position in its sequence.
#[map]
pub static FL_SPRAY_CURSOR: PerCpuArray<u64> = PerCpuArray::with_max_entries(SPRAY_ROWS, 0);
/// Per-CPU room for the parsed headers: on the stack they would push the
/// call chain past BPF's 512 bytes.
#[map]
pub static FL_SCRATCH: PerCpuArray<Parsed> = PerCpuArray::with_max_entries(1, 0);
/// Bytes this CPU forwarded in flowlet and per-packet groups, the clock
/// recent loads age by.
#[map]
pub static FL_LOAD_CLOCK: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

/// Flow events (`lb_common::abi::events::FlowEvent`) for the daemon.
#[map]
pub static FL_FLOW_EVENTS: RingBuf = RingBuf::with_byte_size(FLOW_EVENTS_BYTES, 0);
/// Slot 0: how many events each CPU may send, of which flows; from the
/// daemon.
#[map]
pub static FL_EVENT_CONFIG: Array<EventConfig> = Array::with_max_entries(1, 0);
/// Slot 0: this CPU's event budget and what became of its events.
#[map]
pub static FL_EVENT_BUDGET: PerCpuArray<EventBudget> = PerCpuArray::with_max_entries(1, 0);
/// Slot 0: what the packet in hand reports at its verdict.
#[map]
pub static FL_EVENT_PENDING: PerCpuArray<PendingEvent> = PerCpuArray::with_max_entries(1, 0);

/// Egress ifindex -> frames redirected there that never left (the
/// transmit-error tracepoints'). As many as the devmap has ports.
#[map]
pub static FL_TX_ERRORS: PerCpuHashMap<u32, TxErrors> =
    PerCpuHashMap::with_max_entries(MAX_EGRESS_PORTS, 0);
/// Slot 0: what tells the forwarding program's losses from others', and
/// where the kernel keeps device fields, written by the daemon.
#[map]
pub static FL_TX_WATCH: Array<TxWatch> = Array::with_max_entries(1, 0);
/// Ingress ifindex -> the MACs its frames may be addressed to, every port
/// the program is attached to.
#[map]
pub static FL_PORTS: HashMap<u32, PortMacs> = HashMap::with_max_entries(MAX_EGRESS_PORTS, 0);
/// `port_slot(ifindex)` -> [`PortMacs`]: [`FL_PORTS`] where a lookup is
/// an array read; a port whose slot another holds is only there.
#[map]
pub static FL_PORT_SLOTS: Array<PortMacs> = Array::with_max_entries(PORT_SLOT_COUNT, 0);
/// Ingress ifindexes the forwarding program is attached to -> 1. A switch
/// has as many ingress ports as egress ports.
#[map]
pub static FL_INGRESS_PORTS: HashMap<u32, u8> = HashMap::with_max_entries(MAX_EGRESS_PORTS, 0);
