//! Undoing a reload whose write failed part way: the daemon writes the
//! running tables over the new ones, so it removes routes the failed write
//! may never have inserted. Those removals must not stop the undo.

use lb_common::{packet::craft::udp, packet::parse::IPPROTO_UDP, verdict::Reason};

use crate::harness::Harness;
use crate::packets::{PEER_MAC, ipv4_to};
use crate::switch::{self, LB_MAC};

#[test]
fn undoing_a_reload_that_never_inserted_its_route_completes() {
    let mut h = Harness::new();
    let extra = format!(
        "{}\n[[route]]\nprefix = \"10.99.0.0/16\"\ngroup = \"spines\"\n",
        switch::config()
    );
    h.undo_unwritten_reload(&extra)
        .expect("the undo removes a route that is not there and goes on");
    let frame = ipv4_to([10, 99, 0, 1], IPPROTO_UDP).frame(LB_MAC, PEER_MAC, &[], &udp(1, 2, b"u"));
    let (verdict, out) = h.run(&frame);
    assert_eq!(
        (verdict, out),
        (Reason::NoRoute.xdp_action(), frame),
        "the route the undone reload named is not in the maps"
    );
}
