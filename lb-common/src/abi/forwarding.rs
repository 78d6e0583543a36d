//! The forwarding program's name, its maps' names, and the `#[repr(C)]`
//! types both sides of every map agree on.

use crate::limits::{MAX_NEXTHOPS_PER_GROUP, NO_NEXTHOP};

/// The XDP program's name in the object file.
pub const PROGRAM: &str = "fabriclb";

/// LPM trie: IPv4 destination prefix -> group id (`u32`), as configured:
/// the record `explain` and a restarted daemon read the prefixes from. The
/// data plane reads [`ROUTE4_FIRST`] and [`ROUTE4_POOL`].
pub const ROUTES_V4: &str = "FL_ROUTES_V4";
/// Array: the IPv4 route table's first level ([`crate::route::table`]):
/// the destination's first 16 bits -> raw entry (`u32`).
pub const ROUTE4_FIRST: &str = "FL_ROUTE4_FIRST";
/// Array: the IPv4 route table's blocks, `block * BLOCK_ENTRIES + byte`
/// -> raw entry (`u32`); [`crate::limits::ROUTE4_POOL_BLOCKS`] blocks.
pub const ROUTE4_POOL: &str = "FL_ROUTE4_POOL";
/// LPM trie: IPv6 destination prefix -> group id (`u32`), as configured:
/// what the data plane reads where [`ROUTE6_FIRST`] says
/// [`crate::route::table::IN_TRIE`] (routes that did not fit the pool).
pub const ROUTES_V6: &str = "FL_ROUTES_V6";
/// Array: the IPv6 route table's first level, as [`ROUTE4_FIRST`].
pub const ROUTE6_FIRST: &str = "FL_ROUTE6_FIRST";
/// Array: the IPv6 route table's blocks, as [`ROUTE4_POOL`];
/// [`crate::limits::ROUTE6_POOL_BLOCKS`] blocks.
pub const ROUTE6_POOL: &str = "FL_ROUTE6_POOL";
/// Array: group id -> [`GroupEntry`].
pub const GROUPS: &str = "FL_GROUPS";
/// Array: `group * BUCKETS_PER_GROUP + bucket` -> next-hop id (`u32`).
pub const BUCKETS: &str = "FL_BUCKETS";
/// Array: next-hop id -> [`NextHop`].
pub const NEXTHOPS: &str = "FL_NEXTHOPS";
/// Device hash map: egress ifindex -> itself, the redirect target.
pub const DEVMAP: &str = "FL_DEVMAP";
/// Per-CPU array: [`crate::verdict::Reason`] -> [`VerdictCount`].
pub const VERDICTS: &str = "FL_VERDICTS";
/// Per-CPU array: next-hop id -> [`NextHopStats`].
pub const NEXTHOP_STATS: &str = "FL_NH_STATS";
/// Per-CPU array: next-hop id -> what the other CPUs' flows put on it
/// (`u64`, in this CPU's recent-load units), written by the daemon from
/// every CPU's [`NEXTHOP_STATS`] ([`crate::select::load::peer_loads`]).
pub const PEER_LOAD: &str = "FL_NH_PEER_LOAD";
/// Per-CPU array: [`crate::route::Destination::class_load_index`] (class
/// above 0, member slot) -> [`crate::select::load::RecentLoad`]: what
/// this CPU sent toward the class over the member.
pub const CLASS_LOAD: &str = "FL_CLASS_LOAD";
/// Per-CPU array: as [`CLASS_LOAD`] -> what the other CPUs' flows put
/// there (`u64`, in this CPU's recent-load units), as [`PEER_LOAD`].
pub const CLASS_PEER_LOAD: &str = "FL_CLASS_PEERS";
/// Per-CPU array: [`crate::select::flowlet::flowlet_index`] ->
/// [`crate::select::flowlet::FlowletState`]. Its size is set at load time,
/// with [`FLOWLET_TABLE_SIZE`] to match.
pub const FLOWLETS: &str = "FL_FLOWLETS";
/// The program's global `u32`: how many entries [`FLOWLETS`] has, which
/// the program scales its flow hashes to.
pub const FLOWLET_TABLE_SIZE: &str = "FL_FLOWLET_TABLE_SIZE";
/// Array: [`crate::route::Destination::quality_index`] (class, next-hop
/// id) -> path quality (`u32`, higher is better), written by the daemon;
/// see [`crate::select::flowlet::PATH_QUALITY_DEFAULT`].
pub const PATH_QUALITY: &str = "FL_PATH_QUALITY";
/// Array: `row * BUCKETS_PER_GROUP + i` -> next-hop id, the row a
/// [`crate::route::Destination::spray_row`]: per-packet mode's spray
/// sequence, each next hop as often as its quality says, interleaved.
pub const SPRAY: &str = "FL_SPRAY";
/// Per-CPU array: group id -> [`GroupStats`].
pub const GROUP_STATS: &str = "FL_GROUP_STATS";
/// Per-CPU array: a [`crate::route::Destination::spray_row`] -> position
/// (`u64`) in that row's [`SPRAY`] sequence, where the next sprayed packet
/// and the next drawn flowlet toward it look. One per row, not per group:
/// with one cursor for all of a group's destinations, a destination's
/// flowlets took its sequence at whatever places the others' left, and the
/// turns of `weighted` did not spread them evenly over its paths.
pub const SPRAY_CURSOR: &str = "FL_SPRAY_CURSOR";
/// Per-CPU array, one slot: bytes this CPU forwarded in flowlet and
/// per-packet groups, the clock recent loads age by.
pub const LOAD_CLOCK: &str = "FL_LOAD_CLOCK";
/// Per-CPU array, one slot: the forwarding path's room for its big values
/// (parsed headers, flowlet key). The program's own; userspace
/// never reads it.
pub const SCRATCH: &str = "FL_SCRATCH";

/// A group's data-plane settings.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupEntry {
    /// Zero for a slot no config uses.
    pub in_use: u32,
    /// [`crate::select::hash::HashFields`] bits.
    pub hash_fields: u32,
    /// Per-switch CRC seed.
    pub hash_seed: u32,
    /// [`crate::select::flowlet::MODE_ECMP`], `MODE_FLOWLET` or `MODE_PER_PACKET`.
    pub mode: u32,
    /// [`crate::select::flowlet::SPRAY_SELF_CONTAINED`] or `SPRAY_ALL`.
    pub spray: u32,
    /// Flowlet state from another generation counts as none. The daemon
    /// bumps it when the group enters a flowlet mode from ECMP, so state
    /// left from an earlier flowlet period cannot move a flow that ECMP
    /// has been forwarding, mid-burst. Never 0.
    pub generation: u32,
    pub flowlet_gap_ns: u64,
    /// How many of `members` are in use.
    pub member_count: u32,
    /// In an ECMP group, the flowlet mode it left while its flows drain
    /// (see [`crate::select::flowlet::drain`]); `MODE_ECMP` otherwise. It
    /// takes what was padding, so the entry's layout stays.
    pub draining: u32,
    /// How many overrides the group has, in [`OVERRIDES`]'s half
    /// `override_half` of its run ([`crate::select::overrides`]).
    pub override_count: u32,
    /// Which half of the group's run of [`OVERRIDES`] is in use: a changed
    /// set is written whole into the other, then this flips.
    pub override_half: u32,
    /// How a new flowlet picks its next hop:
    /// [`crate::select::choice::CHOICE_LEAST_COST`], `CHOICE_TWO` or
    /// `CHOICE_WEIGHTED`.
    pub choice: u32,
    /// Which bits of a new flowlet's flow hash set where it draws in the
    /// spray sequence ([`crate::select::choice::draw_flow_mask`]): all for
    /// `two-choices`; none for `weighted`, which starts from `hash_seed`.
    /// A mask the daemon writes rather than a test of `choice` in the
    /// program, which made the verifier walk the rest of the path once
    /// per outcome. It also keeps `members` where the 8-byte alignment
    /// puts it anyway, with no padding a copy could leave undefined.
    pub draw_flow_mask: u32,
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
            draining: 0,
            override_count: 0,
            override_half: 0,
            choice: 0,
            draw_flow_mask: 0,
            members: [NO_NEXTHOP; MAX_NEXTHOPS_PER_GROUP],
        }
    }
}

/// Array: `(group * 2 + half) * MAX_OVERRIDES_PER_GROUP + i` ->
/// [`OverrideEntry`]: each group's overrides, most specific first, in the
/// half its entry names.
pub const OVERRIDES: &str = "FL_OVERRIDES";
/// Per-CPU array, indexed as [`OVERRIDES`] -> [`OverrideStats`]. Short:
/// the kernel keeps 15 bytes of a map's name, which `explain` finds it by.
pub const OVERRIDE_STATS: &str = "FL_OVR_STATS";

/// Hash: ingress ifindex (`u32`) -> [`PortMacs`], every port the program
/// is attached to: whom its frames may be addressed to. The record, and
/// where the program looks for a port [`PORT_SLOTS`] does not hold.
pub const PORTS: &str = "FL_PORTS";
/// Array: [`port_slot`]`(ifindex)` -> [`PortMacs`]: the ports' entries
/// where a lookup costs an array read; a port whose slot another holds is
/// only in [`PORTS`].
pub const PORT_SLOTS: &str = "FL_PORT_SLOTS";
/// [`PORT_SLOTS`]' entries.
pub const PORT_SLOT_COUNT: u32 = 4096;

/// The [`PORT_SLOTS`] entry of ingress port `ifindex`.
#[inline(always)]
pub const fn port_slot(ifindex: u32) -> u32 {
    ifindex & (PORT_SLOT_COUNT - 1)
}

/// The unicast MACs an ingress port accepts frames for: its own, and the
/// switch's shared DLB MAC (all zeros for none).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortMacs {
    /// The port; 0 in an empty slot.
    pub ifindex: u32,
    pub own: [u8; 6],
    pub dlb: [u8; 6],
}

impl PortMacs {
    /// Whether a frame to `dst` is for this box.
    #[inline(always)]
    pub fn accepts(&self, dst: &[u8; 6]) -> bool {
        *dst == self.own || (*dst == self.dlb && self.dlb != [0; 6])
    }
}

/// A traffic-engineering override: packets it matches take the group's
/// member `slot` instead of the group's own choice. Addresses are stored
/// masked, with their masks; a zero mask (and `ingress` or `dest_qp` 0)
/// matches anything.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OverrideEntry {
    pub dst: [u8; 16],
    pub dst_mask: [u8; 16],
    pub src: [u8; 16],
    pub src_mask: [u8; 16],
    /// 1 for IPv6 prefixes.
    pub is_ipv6: u32,
    /// Ingress ifindex the packet must have come in on; 0 for any.
    pub ingress: u32,
    /// RoCEv2 destination QP it must carry; 0 for any (QP 0 is never a
    /// RoCEv2 connection's).
    pub dest_qp: u32,
    /// The group member (index into `members`) it pins to.
    pub slot: u32,
}

/// Per-CPU counters of one override.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OverrideStats {
    /// Packets matched and sent to the pinned member.
    pub packets: u64,
    pub bytes: u64,
    /// Packets matched while the pinned member was unusable: they took
    /// the group's own choice.
    pub fallbacks: u64,
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

/// What one verdict reason counted on one CPU.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VerdictCount {
    pub packets: u64,
    /// Their frames' bytes as the program left them: a forwarded frame's
    /// after its rewrite (which may push or pop a VLAN tag).
    pub bytes: u64,
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
    pub load: crate::select::load::RecentLoad,
}

/// Per-CPU state and counters of one group.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupStats {
    /// Flowlets started, a flow's first included.
    pub new_flowlets: u64,
    /// New flowlets that took a different next hop than the flow had.
    pub flowlet_moves: u64,
    /// Packets that picked their own next hop (per-packet mode).
    pub sprayed: u64,
    /// Packets that followed their flowlet (flowlet and per-packet modes).
    pub pinned: u64,
}

#[cfg(feature = "user")]
mod pod {
    // SAFETY: plain `#[repr(C)]` integers and byte arrays, no padding, every
    // bit pattern valid.
    unsafe impl aya::Pod for super::GroupEntry {}
    unsafe impl aya::Pod for super::NextHop {}
    unsafe impl aya::Pod for super::NextHopStats {}
    unsafe impl aya::Pod for super::VerdictCount {}
    unsafe impl aya::Pod for super::GroupStats {}
    unsafe impl aya::Pod for super::OverrideEntry {}
    unsafe impl aya::Pod for super::OverrideStats {}
    unsafe impl aya::Pod for super::PortMacs {}
    unsafe impl aya::Pod for crate::select::flowlet::FlowletState {}
    unsafe impl aya::Pod for crate::select::load::RecentLoad {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_accepts_its_own_mac_and_the_dlb_mac_only() {
        let own = [2, 0, 0, 0, 0, 1];
        let dlb = [0, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc];
        let port = PortMacs {
            ifindex: 7,
            own,
            dlb,
        };
        assert!(port.accepts(&own) && port.accepts(&dlb));
        assert!(!port.accepts(&[2, 0, 0, 0, 0, 2]));
        let without = PortMacs {
            dlb: [0; 6],
            ..port
        };
        assert!(without.accepts(&own));
        assert!(!without.accepts(&dlb) && !without.accepts(&[0; 6]));
        assert_eq!((port_slot(7), port_slot(4096 + 7)), (7, 7));
    }

    #[test]
    fn layouts_have_no_padding() {
        assert_eq!(
            core::mem::size_of::<GroupEntry>(),
            56 + 4 * MAX_NEXTHOPS_PER_GROUP
        );
        assert_eq!(core::mem::size_of::<OverrideEntry>(), 80);
        assert_eq!(core::mem::size_of::<OverrideStats>(), 24);
        assert_eq!(core::mem::size_of::<PortMacs>(), 16);
        assert_eq!(core::mem::size_of::<NextHop>(), 20);
        assert_eq!(core::mem::size_of::<NextHopStats>(), 40);
        assert_eq!(core::mem::size_of::<GroupStats>(), 32);
        assert_eq!(
            core::mem::size_of::<crate::select::flowlet::FlowletState>(),
            32
        );
    }
}
