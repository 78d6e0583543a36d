//! Stage 2: the destination's group, by longest prefix; the box's own
//! destinations go to the kernel (`lb_common::route`). IPv4 reads the
//! fixed-stride table (at most three array reads whatever the table's
//! size), IPv6 the LPM trie.

use aya_ebpf::maps::lpm_trie::Key;
use lb_common::{
    packet::parse::Parsed,
    route::{
        group,
        table::{Levels, lookup_entry, value_entry},
    },
    verdict::Reason,
};

use crate::maps::{FL_ROUTE4_FIRST, FL_ROUTE4_POOL, FL_ROUTES_V6};

struct Route4;

impl Levels for Route4 {
    #[inline(always)]
    fn first(&self, index: u32) -> Option<u32> {
        FL_ROUTE4_FIRST.get(index).copied()
    }

    #[inline(always)]
    fn pool(&self, index: u32) -> Option<u32> {
        FL_ROUTE4_POOL.get(index).copied()
    }
}

#[inline(always)]
pub fn route(parsed: &Parsed) -> Result<u32, Reason> {
    let dst = &parsed.flow.dst;
    // A plain u32 on every path (see `lookup_entry`).
    let entry = if parsed.flow.is_ipv6 {
        value_entry(FL_ROUTES_V6.get(Key::new(128, *dst)).copied())
    } else {
        lookup_entry(&Route4, &[dst[0], dst[1], dst[2], dst[3]])
    };
    group(&parsed.flow, entry)
}
