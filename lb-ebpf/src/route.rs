//! Stage 2: the destination's group, by longest prefix; the box's own
//! destinations go to the kernel (`lb_common::route`).

use aya_ebpf::maps::lpm_trie::Key;
use lb_common::{packet::parse::Parsed, route::group, verdict::Reason};

use crate::maps::{FL_ROUTES_V4, FL_ROUTES_V6};

#[inline(always)]
pub fn route(parsed: &Parsed) -> Result<u32, Reason> {
    let dst = &parsed.flow.dst;
    let matched = if parsed.flow.is_ipv6 {
        FL_ROUTES_V6.get(Key::new(128, *dst))
    } else {
        FL_ROUTES_V4.get(Key::new(32, [dst[0], dst[1], dst[2], dst[3]]))
    };
    group(&parsed.flow, matched.copied())
}
