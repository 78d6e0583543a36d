//! The route stage's decision around its one lookup: which destinations
//! are the box's own whatever the routes say, and what the longest match's
//! value means. Local delivery wins over every route, as in any router,
//! and comes before the TTL check: a packet for the box with TTL 1 is the
//! kernel's to accept.

use crate::{
    limits::{LOCAL_ROUTE, MAX_GROUPS, MAX_NEXTHOPS, MAX_NEXTHOPS_PER_GROUP},
    packet::parse::FlowFields,
    verdict::Reason,
};

pub mod table;

/// Destinations a router never forwards, whatever its routes: multicast,
/// the limited broadcast and link-local addresses (RFC 1812 4.2.2.11,
/// RFC 3927 7, RFC 4291 2.5.6).
#[inline(always)]
pub fn never_forwarded(flow: &FlowFields) -> bool {
    let d = &flow.dst;
    if flow.is_ipv6 {
        // ff00::/8 multicast, fe80::/10 link-local.
        d[0] == 0xff || (d[0] == 0xfe && d[1] & 0xc0 == 0x80)
    } else {
        // 224.0.0.0/4 multicast, 169.254.0.0/16 link-local,
        // 255.255.255.255.
        d[0] & 0xf0 == 0xe0
            || (d[0] == 169 && d[1] == 254)
            || (d[0] == 0xff && d[1] == 0xff && d[2] == 0xff && d[3] == 0xff)
    }
}

/// Where a route sends its packets: a group, and the group's destination
/// class they belong to (0 for none: the next hops' own quality).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Destination {
    pub group: u32,
    pub class: u32,
}

/// The low bits of a route value hold the group id, the bits above them
/// the class.
const GROUP_BITS: u32 = 16;

impl Destination {
    /// The route value that stands for this destination.
    pub const fn value(self) -> u32 {
        self.group | (self.class << GROUP_BITS)
    }

    /// The destination a route value (not [`LOCAL_ROUTE`]) stands for.
    #[inline(always)]
    pub const fn of_value(value: u32) -> Self {
        Self {
            group: value & ((1 << GROUP_BITS) - 1),
            class: value >> GROUP_BITS,
        }
    }

    /// The entry of `FL_PATH_QUALITY` that rates next hop `nh_id` for
    /// this class.
    #[inline(always)]
    pub const fn quality_index(self, nh_id: u32) -> u32 {
        quality_index(self.class, nh_id)
    }

    /// The entry of `FL_CLASS_LOAD` that holds what this CPU sent toward
    /// this class over the member in `slot` ([`class_load_index`]).
    #[inline(always)]
    pub const fn class_load_index(self, slot: u32) -> u32 {
        class_load_index(self.class, slot)
    }

    /// The spray sequence this destination's sprayed packets follow, each
    /// next hop as often as its quality for the class: the group's own
    /// for class 0, one per class after the groups'.
    #[inline(always)]
    pub const fn spray_row(self) -> u32 {
        if self.class == 0 {
            self.group
        } else {
            MAX_GROUPS + self.class - 1
        }
    }
}

/// The entry of `FL_PATH_QUALITY` that rates next hop `nh_id` for class
/// `class`: a row of [`MAX_NEXTHOPS`] per class, class 0's the next hops'
/// own.
#[inline(always)]
pub const fn quality_index(class: u32, nh_id: u32) -> u32 {
    class * MAX_NEXTHOPS + nh_id
}

/// The entry of `FL_CLASS_LOAD` that holds what a CPU sent toward `class`
/// over the member in `slot` (a slot of a group's members, or
/// [`NO_NEXTHOP`]); for class 0, whose choices weigh the next hops' whole
/// loads, and for [`NO_NEXTHOP`], an index past the map, which finds
/// nothing.
///
/// A class's quality rates the next switch's port toward that
/// destination, which only the traffic toward it crosses; weighed against
/// the next hop's load toward every destination, a spine slow toward one
/// leaf but carrying its share toward the others cost four times a fast
/// one, and took none of the traffic toward the slow port's leaf (1-2%
/// against its 7.7% capacity share in `fabric-slow-link`), whose three
/// fast ports then overflowed.
///
/// Without a branch: a comparison of the class or the slot would narrow
/// what the verifier knows of them on each side, and it would then check
/// the rest of the choice apart for each (the lookups this index feeds
/// cost 84k instructions verified more with one, twice the program's).
#[inline(always)]
pub const fn class_load_index(class: u32, slot: u32) -> u32 {
    (class.wrapping_sub(1) << CLASS_LOAD_SLOT_BITS) | slot
}

/// Bits of a class load index that hold the member slot.
const CLASS_LOAD_SLOT_BITS: u32 = MAX_NEXTHOPS_PER_GROUP.trailing_zeros();

/// The (class, next-hop id) a [`quality_index`] stands for.
#[inline(always)]
pub const fn quality_path(index: u32) -> (u32, u32) {
    (index / MAX_NEXTHOPS, index % MAX_NEXTHOPS)
}

/// Where the packet goes, given the route table entry its destination's
/// walk ended on ([`table::lookup_entry`], or an IPv6 match as
/// [`table::value_entry`] gives it), or why the kernel gets it instead.
#[inline(always)]
pub fn destination(flow: &FlowFields, entry: u32) -> Result<Destination, Reason> {
    match table::entry_value(entry) {
        _ if never_forwarded(flow) => Err(Reason::Local),
        Some(LOCAL_ROUTE) => Err(Reason::Local),
        Some(value) => Ok(Destination::of_value(value)),
        None => Err(Reason::NoRoute),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::table::{EMPTY, Entry};

    fn v4(dst: [u8; 4]) -> FlowFields {
        let mut flow = FlowFields::default();
        flow.dst[..4].copy_from_slice(&dst);
        flow
    }

    fn v6(dst: [u8; 16]) -> FlowFields {
        FlowFields {
            is_ipv6: true,
            dst,
            ..FlowFields::default()
        }
    }

    fn v6_prefix(first: [u8; 2]) -> FlowFields {
        let mut dst = [0x11; 16];
        dst[..2].copy_from_slice(&first);
        v6(dst)
    }

    #[test]
    fn ipv4_multicast_broadcast_and_link_local_are_never_forwarded() {
        // Each range's ends and just outside them; class E and subnet
        // broadcasts are local only as the box's own, from the trie.
        for (dst, never) in [
            ([224, 0, 0, 0], true),
            ([224, 0, 0, 5], true),
            ([239, 255, 255, 255], true),
            ([255, 255, 255, 255], true),
            ([169, 254, 0, 0], true),
            ([169, 254, 255, 255], true),
            ([223, 255, 255, 255], false),
            ([240, 0, 0, 1], false),
            ([255, 255, 255, 254], false),
            ([169, 253, 255, 255], false),
            ([169, 255, 0, 0], false),
            ([168, 254, 0, 1], false),
            ([10, 1, 0, 255], false),
            ([0, 0, 0, 0], false),
        ] {
            assert_eq!(never_forwarded(&v4(dst)), never, "{dst:?}");
        }
    }

    #[test]
    fn ipv6_multicast_and_link_local_are_never_forwarded() {
        // fec0::/10 (old site-local) and fc00::/7 (ULA) are routable.
        for (first, never) in [
            ([0xff, 0x02], true),
            ([0xff, 0x0e], true),
            ([0xff, 0xff], true),
            ([0xfe, 0x80], true),
            ([0xfe, 0xbf], true),
            ([0xfe, 0x7f], false),
            ([0xfe, 0xc0], false),
            ([0xfd, 0x00], false),
            ([0x20, 0x01], false),
            ([0, 0], false),
        ] {
            assert_eq!(never_forwarded(&v6_prefix(first)), never, "{first:x?}");
        }
    }

    #[test]
    fn the_ipv4_bytes_of_an_ipv6_address_do_not_count() {
        // An IPv6 destination starting like IPv4 multicast is unicast.
        let mut dst = [0; 16];
        dst[0] = 224;
        assert!(!never_forwarded(&v6(dst)));
        assert!(never_forwarded(&v4([224, 0, 0, 1])));
    }

    fn group(flow: &FlowFields, entry: u32) -> Result<u32, Reason> {
        destination(flow, entry).map(|d| d.group)
    }

    #[test]
    fn local_wins_over_every_route_and_no_route() {
        let routed = |value| Entry::Value(value).encode();
        let unicast = v4([10, 1, 0, 2]);
        assert_eq!(group(&unicast, routed(3)), Ok(3));
        assert_eq!(group(&unicast, routed(0)), Ok(0));
        assert_eq!(group(&unicast, EMPTY), Err(Reason::NoRoute));
        // A walk ending on a block pointer found no final entry.
        assert_eq!(
            group(&unicast, Entry::Next(7).encode()),
            Err(Reason::NoRoute)
        );
        assert_eq!(group(&unicast, routed(LOCAL_ROUTE)), Err(Reason::Local));
        let multicast = v4([224, 0, 0, 5]);
        assert_eq!(group(&multicast, routed(3)), Err(Reason::Local));
        assert_eq!(group(&multicast, EMPTY), Err(Reason::Local));
        let link_local = v6_prefix([0xfe, 0x80]);
        assert_eq!(group(&link_local, routed(1)), Err(Reason::Local));
    }

    #[test]
    fn a_route_value_carries_its_group_and_class_through_the_table() {
        use crate::limits::{MAX_CLASSES, SPRAY_ROWS};
        let unicast = v4([10, 1, 0, 2]);
        let last = Destination {
            group: MAX_GROUPS - 1,
            class: MAX_CLASSES - 1,
        };
        for d in [
            Destination { group: 5, class: 0 },
            Destination { group: 0, class: 9 },
            last,
        ] {
            let entry = Entry::Value(d.value()).encode();
            assert_eq!(destination(&unicast, entry), Ok(d));
        }
        // Class 0 is the group's plain route value, as before classes.
        assert_eq!(Destination { group: 5, class: 0 }.value(), 5);
        // No class reaches the local route's value or the entry marks.
        assert!(last.value() < LOCAL_ROUTE >> 2);
        // Rows: the group's own for class 0; classes after every group.
        assert_eq!(Destination { group: 7, class: 0 }.spray_row(), 7);
        assert_eq!(Destination { group: 7, class: 1 }.spray_row(), MAX_GROUPS);
        assert_eq!(last.spray_row(), SPRAY_ROWS - 1);
        assert_eq!(
            Destination { group: 7, class: 2 }.quality_index(3),
            2 * MAX_NEXTHOPS + 3
        );
        assert_eq!(
            last.quality_index(MAX_NEXTHOPS - 1),
            MAX_CLASSES * MAX_NEXTHOPS - 1
        );
        assert_eq!(quality_path(2 * MAX_NEXTHOPS + 3), (2, 3));
    }

    #[test]
    fn class_loads_are_kept_per_class_above_0_and_member_slot() {
        use crate::limits::{CLASS_LOAD_ROWS, MAX_CLASSES, NO_NEXTHOP};
        let last_slot = MAX_NEXTHOPS_PER_GROUP as u32 - 1;
        let class = |class| Destination { group: 7, class };
        assert_eq!(class(1).class_load_index(0), 0);
        assert_eq!(class(2).class_load_index(3), 64 + 3);
        assert_eq!(
            class(MAX_CLASSES - 1).class_load_index(last_slot),
            CLASS_LOAD_ROWS - 1
        );
        // Class 0 and the events' "no slot" find nothing in the map.
        for slot in [0, last_slot, NO_NEXTHOP] {
            assert!(class(0).class_load_index(slot) >= CLASS_LOAD_ROWS);
        }
        for c in [1, 2, MAX_CLASSES - 1] {
            assert_eq!(class(c).class_load_index(NO_NEXTHOP), NO_NEXTHOP);
        }
    }
}
