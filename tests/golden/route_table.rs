//! IPv6 routes in the fixed-stride table, and left to the trie when the
//! table does not fit its pool: the program forwards each destination to
//! its longest prefix's group either way, and comes back to the table
//! once a change fits. The pool here holds five blocks: a /48 under
//! 2001:db8::/32 needs four (bytes 2 to 5), a /64 under it two more.

use fabriclb::dataplane::tables::route_table::Family;
use lb_common::{
    abi::ROUTE6_POOL,
    packet::craft::{Ipv6, udp},
    packet::parse::IPPROTO_UDP,
    route::table::{BLOCK_ENTRIES, IN_TRIE},
    verdict::XDP_REDIRECT,
};

use crate::harness::Harness;
use crate::packets::PEER_MAC;
use crate::switch::LB_MAC;

const WIDE: &str = "02:00:00:00:61:01";
const NARROW: &str = "02:00:00:00:62:01";

/// Groups `wide` (2001:db8:1::/48) and `narrow` (`narrow_prefix`, if any).
fn config(narrow_prefix: Option<&str>) -> String {
    let mut text = format!(
        "[switch]\ninterfaces = [\"lo\"]\n\n\
         [[group]]\nname = \"wide\"\nnext_hops = [{{ interface = \"lo\", mac = \"{WIDE}\" }}]\n\n\
         [[group]]\nname = \"narrow\"\nnext_hops = [{{ interface = \"lo\", mac = \"{NARROW}\" }}]\n\n\
         [[route]]\nprefix = \"2001:db8:1::/48\"\ngroup = \"wide\"\n"
    );
    if let Some(prefix) = narrow_prefix {
        text += &format!("\n[[route]]\nprefix = \"{prefix}\"\ngroup = \"narrow\"\n");
    }
    text
}

/// The destination MAC the program rewrote a UDP packet to `dst` to.
fn next_hop_of(harness: &mut Harness, dst: [u16; 8]) -> String {
    let mut addr = [0u8; 16];
    for (i, g) in dst.iter().enumerate() {
        addr[2 * i..2 * i + 2].copy_from_slice(&g.to_be_bytes());
    }
    let ip = Ipv6 {
        dst: addr,
        ..Ipv6::new(IPPROTO_UDP)
    };
    let frame = ip.frame(LB_MAC, PEER_MAC, &[], &udp(40000, 4791, &[0xab; 64]));
    let (verdict, out) = harness.run(&frame);
    assert_eq!(verdict, XDP_REDIRECT, "to {dst:x?}");
    let mac: Vec<String> = out[..6].iter().map(|b| format!("{b:02x}")).collect();
    mac.join(":")
}

#[test]
fn ipv6_routes_that_do_not_fit_the_table_are_the_tries_until_they_fit() {
    let mut harness = Harness::with_sized_maps(&config(None), &[(ROUTE6_POOL, 5 * BLOCK_ENTRIES)]);
    let table = |h: &Harness| h.route_first(Family::V6, 0x2001) != IN_TRIE;
    assert!(table(&harness), "a /48 fits");
    let inside = [0x2001, 0xdb8, 1, 2, 0, 0, 0, 5];
    let beside = [0x2001, 0xdb8, 1, 3, 0, 0, 0, 5];
    assert_eq!(next_hop_of(&mut harness, inside), WIDE);

    // A /64 beside the running table's four blocks: six more do not fit.
    harness.reload(&config(Some("2001:db8:1:2::/64")));
    assert!(!table(&harness), "left to the trie");
    assert_eq!(next_hop_of(&mut harness, inside), NARROW);
    assert_eq!(next_hop_of(&mut harness, beside), WIDE);

    // From the trie, a table written anew has the whole pool: a /56 with
    // the /48 takes five blocks.
    harness.reload(&config(Some("2001:db8:1:200::/56")));
    assert!(table(&harness), "back in the table");
    assert_eq!(
        next_hop_of(&mut harness, [0x2001, 0xdb8, 1, 0x2ab, 0, 0, 0, 5]),
        NARROW
    );
    assert_eq!(next_hop_of(&mut harness, inside), WIDE);
    assert_eq!(
        next_hop_of(&mut harness, [0x2001, 0xdb8, 1, 0x300, 0, 0, 0, 5]),
        WIDE
    );
}
