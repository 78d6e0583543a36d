//! Stage 2: the destination's group, by longest prefix.

use aya_ebpf::maps::lpm_trie::Key;
use lb_common::packet::parse::Parsed;

use crate::maps::{FL_ROUTES_V4, FL_ROUTES_V6};

#[inline(always)]
pub fn route(parsed: &Parsed) -> Option<u32> {
    let dst = &parsed.flow.dst;
    let group = if parsed.flow.is_ipv6 {
        FL_ROUTES_V6.get(Key::new(128, *dst))
    } else {
        FL_ROUTES_V4.get(Key::new(32, [dst[0], dst[1], dst[2], dst[3]]))
    };
    group.copied()
}
