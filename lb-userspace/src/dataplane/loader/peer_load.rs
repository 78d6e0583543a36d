//! Every CPU's recent loads read back, and what the others put on each
//! next hop written to each CPU ([`lb_common::select::load::peer_loads`]).

use aya::maps::{MapError, PerCpuValues};
use lb_common::abi as names;
use lb_common::select::load::load_epoch;

use super::{Dataplane, Result, map_err};

impl Dataplane {
    /// Each CPU's load clock: bytes it forwarded in dynamic groups.
    pub fn load_clocks(&self) -> Result<Vec<u64>> {
        let clocks = (self.maps.load_clock)
            .get(&0, 0)
            .map_err(map_err(names::LOAD_CLOCK))?;
        Ok(clocks.iter().copied().collect())
    }

    /// Next hop `id`'s recent load on each CPU, as of the epoch of that
    /// CPU's clock in `clocks`.
    pub fn recent_loads(&self, id: u32, clocks: &[u64]) -> Result<Vec<u64>> {
        let stats = (self.maps.nexthop_stats)
            .get(&id, 0)
            .map_err(map_err(names::NEXTHOP_STATS))?;
        Ok((stats.iter().zip(clocks))
            .map(|(s, &clock)| s.load.at(load_epoch(clock)))
            .collect())
    }

    /// What each CPU was last told the others put on next hop `id`.
    pub fn peer_loads(&self, id: u32) -> Result<Vec<u64>> {
        let loads = (self.maps.peer_load)
            .get(&id, 0)
            .map_err(map_err(names::PEER_LOAD))?;
        Ok(loads.iter().copied().collect())
    }

    /// Tells each CPU what the others put on next hop `id` (one value per
    /// CPU, in [`Self::load_clocks`]' order).
    pub fn set_peer_loads(&mut self, id: u32, per_cpu: Vec<u64>) -> Result<()> {
        let values = PerCpuValues::try_from(per_cpu)
            .map_err(MapError::IoError)
            .map_err(map_err(names::PEER_LOAD))?;
        (self.maps.peer_load)
            .set(id, values, 0)
            .map_err(map_err(names::PEER_LOAD))
    }
}
