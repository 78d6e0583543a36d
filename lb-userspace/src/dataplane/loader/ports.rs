//! The ingress ports' MACs: whom the program takes a port's frames to be
//! for. Every port is in `FL_PORTS`; its `FL_PORT_SLOTS` entry, an array
//! read for the program, is its own unless another port holds it.

use aya::maps::MapError;
use lb_common::abi::{self as names, PortMacs, port_slot};

use super::{Dataplane, Result, map_err};

impl Dataplane {
    /// Writes `port`'s entry: in its slot when the slot is free or its
    /// own, and in the table of all ports.
    pub fn set_port_macs(&mut self, port: PortMacs) -> Result<()> {
        self.maps
            .ports
            .insert(port.ifindex, port, 0)
            .map_err(map_err(names::PORTS))?;
        let slot = port_slot(port.ifindex);
        let holder = self.slot(slot)?.ifindex;
        if holder == 0 || holder == port.ifindex {
            self.set_slot(slot, port)?;
        }
        Ok(())
    }

    /// Forgets port `ifindex`; its slot goes to another port of the same
    /// slot, if one is waiting.
    pub fn remove_port_macs(&mut self, ifindex: u32) -> Result<()> {
        match self.maps.ports.remove(&ifindex) {
            Ok(()) | Err(MapError::KeyNotFound) => {}
            Err(e) => return Err(map_err(names::PORTS)(e)),
        }
        let slot = port_slot(ifindex);
        if self.slot(slot)?.ifindex == ifindex {
            let waiting = self
                .port_macs()?
                .into_iter()
                .find(|p| port_slot(p.ifindex) == slot)
                .unwrap_or_default();
            self.set_slot(slot, waiting)?;
        }
        Ok(())
    }

    /// Every port's entry, as the maps hold them.
    pub fn port_macs(&self) -> Result<Vec<PortMacs>> {
        self.maps.ports().map_err(map_err(names::PORTS))
    }

    fn slot(&self, slot: u32) -> Result<PortMacs> {
        self.maps
            .port_slots
            .get(&slot, 0)
            .map_err(map_err(names::PORT_SLOTS))
    }

    fn set_slot(&mut self, slot: u32, port: PortMacs) -> Result<()> {
        self.maps
            .port_slots
            .set(slot, port, 0)
            .map_err(map_err(names::PORT_SLOTS))
    }
}
