//! Stage 2: the destination's group and class, by longest prefix; the box's own
//! destinations go to the kernel (`lb_common::route`). Both families read
//! their fixed-stride table (IPv4 at most three array reads, IPv6 one per
//! byte the longest prefix reaches, whatever the table's size); IPv6
//! routes that did not fit their table's pool are the LPM trie's.

use aya_ebpf::maps::{Array, lpm_trie::Key};
use lb_common::{
    packet::parse::Parsed,
    route::{
        Destination, destination,
        table::{Levels, lookup_entry, or_trie},
    },
    verdict::Reason,
};

use crate::maps::{FL_ROUTE4_FIRST, FL_ROUTE4_POOL, FL_ROUTE6_FIRST, FL_ROUTE6_POOL, FL_ROUTES_V6};

/// A family's table: its first level and pool.
struct Table(&'static Array<u32>, &'static Array<u32>);

impl Levels for Table {
    #[inline(always)]
    fn first(&self, index: u32) -> Option<u32> {
        self.0.get(index).copied()
    }

    #[inline(always)]
    fn pool(&self, index: u32) -> Option<u32> {
        self.1.get(index).copied()
    }
}

#[inline(always)]
pub fn route(parsed: &Parsed) -> Result<Destination, Reason> {
    let dst = &parsed.flow.dst;
    // A plain u32 on every path (see `lookup_entry`).
    let entry = if parsed.flow.is_ipv6 {
        let raw = lookup_entry(&Table(&FL_ROUTE6_FIRST, &FL_ROUTE6_POOL), dst);
        or_trie(raw, || FL_ROUTES_V6.get(Key::new(128, *dst)).copied())
    } else {
        let table = Table(&FL_ROUTE4_FIRST, &FL_ROUTE4_POOL);
        lookup_entry(&table, &[dst[0], dst[1], dst[2], dst[3]])
    };
    destination(&parsed.flow, entry)
}
