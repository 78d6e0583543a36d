//! A port's secondary unicast addresses: the MACs besides its own that its
//! receive filter takes frames for (what `bridge fdb add MAC dev PORT self
//! permanent` adds on a port that is no bridge's). The shared DLB MAC is
//! one.

use std::collections::HashMap;

use netlink_packet_route::AddressFamily;
use netlink_packet_route::neighbour::{
    NeighbourAttribute, NeighbourFlags, NeighbourMessage, NeighbourState,
};

use super::{Netlink, Result};

impl Netlink {
    /// Adds `mac` to port `ifindex`'s unicast addresses; already there is
    /// no error.
    pub async fn add_unicast(&self, ifindex: u32, mac: [u8; 6]) -> Result<()> {
        self.handle
            .neighbours()
            .add_bridge(ifindex, &mac)
            .flags(NeighbourFlags::Own)
            .replace()
            .execute()
            .await?;
        Ok(())
    }

    /// Takes `mac` off port `ifindex`'s unicast addresses.
    pub async fn del_unicast(&self, ifindex: u32, mac: [u8; 6]) -> Result<()> {
        let mut message = NeighbourMessage::default();
        message.header.family = AddressFamily::Bridge;
        message.header.ifindex = ifindex;
        message.header.state = NeighbourState::Permanent;
        message.header.flags = NeighbourFlags::Own;
        message
            .attributes
            .push(NeighbourAttribute::LinkLayerAddress(mac.to_vec()));
        self.handle.neighbours().del(message).execute().await?;
        Ok(())
    }
}

/// Interface `name`'s own MAC in this network namespace, if it has one:
/// read without a runtime, for the moment before a program is attached.
pub fn mac_of(name: &str) -> Option<[u8; 6]> {
    own_macs().remove(name)
}

/// Every interface's own MAC in this network namespace, by name: one
/// dump for all the ports.
pub fn own_macs() -> HashMap<String, [u8; 6]> {
    let Ok(addresses) = nix::ifaddrs::getifaddrs() else {
        return HashMap::new();
    };
    addresses
        .filter_map(|entry| {
            let mac = entry.address?.as_link_addr()?.addr()?;
            Some((entry.interface_name, mac))
        })
        .collect()
}
