//! Stage 1b: whether the frame is addressed to this box: to the ingress
//! port's own MAC or the switch's DLB MAC. A port in promiscuous mode, or
//! on a segment other hosts share, hands the program frames for others,
//! which a router must not route.

use lb_common::abi::{PortMacs, port_slot};
use lb_common::packet::parse::PacketView;
use lb_ebpf_frame::Frame;

use crate::maps::{FL_PORT_SLOTS, FL_PORTS};

/// Whether the frame `start..end`, which came in on `ingress`, is for one
/// of the MACs that port accepts. A port the daemon has not written
/// accepts nothing.
#[inline(always)]
pub fn addressed_to_us(start: usize, end: usize, ingress: u32) -> bool {
    let Some(dst) = (Frame { start, end }).bytes::<6>(0) else {
        return false;
    };
    let accepts = |port: &PortMacs| port.accepts(&dst);
    match FL_PORT_SLOTS.get(port_slot(ingress)) {
        Some(port) if port.ifindex == ingress => accepts(port),
        // SAFETY: a hash lookup; the value is read at once.
        _ => unsafe { FL_PORTS.get(ingress) }.is_some_and(accepts),
    }
}
