//! The ingress ports' MACs in the data plane (`FL_PORTS`, `FL_PORT_SLOTS`):
//! each attached port's own and the switch's DLB MAC, which also goes on
//! the port's unicast addresses so that its receive filter takes frames to
//! it. The maps are the record of what was put where: a restarted daemon
//! takes back what the last one added, and `fabriclb stop --detach`
//! removes it with the instance. A daemon that only stops leaves both, as
//! it leaves the program forwarding.

use anyhow::{Context, Result};
use lb_common::abi::PortMacs;

use crate::dataplane::Dataplane;
use crate::netlink::ifindex;
use crate::netlink::mac_of;

pub(super) const NO_MAC: [u8; 6] = [0; 6];

/// Writes `interface`'s entry before the program goes onto it, so that its
/// first frames are taken: its own MAC, and the DLB MAC its entry had, if
/// any (the running daemon's port sync sets that).
pub(super) fn note_port(dp: &mut Dataplane, interface: &str) -> Result<()> {
    let (Some(index), Some(own)) = (ifindex(interface), mac_of(interface)) else {
        return Ok(());
    };
    let dlb = dp
        .port_macs()?
        .into_iter()
        .find(|p| p.ifindex == index)
        .map_or(NO_MAC, |p| p.dlb);
    dp.set_port_macs(PortMacs {
        ifindex: index,
        own,
        dlb,
    })
    .with_context(|| format!("noting ingress port {interface}"))
}
