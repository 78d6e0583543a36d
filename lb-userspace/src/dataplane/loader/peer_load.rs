//! Every CPU's recent loads read back, and what the others put on each
//! next hop (and toward each class over each member) written to each CPU
//! ([`lb_common::select::load::peer_loads`]).

use aya::maps::{MapError, PerCpuValues};
use lb_common::abi as names;
use lb_common::select::load::load_epoch;

use super::{Dataplane, Result, map_err};

/// A recent load the CPUs keep each their own of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LoadRow {
    /// A next hop's, by id.
    Nexthop(u32),
    /// What went toward a class over a member, by
    /// [`lb_common::route::Destination::class_load_index`].
    Class(u32),
}

impl Dataplane {
    /// Each CPU's load clock: bytes it forwarded in dynamic groups.
    pub fn load_clocks(&self) -> Result<Vec<u64>> {
        let clocks = (self.maps.load_clock)
            .get(&0, 0)
            .map_err(map_err(names::LOAD_CLOCK))?;
        Ok(clocks.iter().copied().collect())
    }

    /// `row` on each CPU, as of the epoch of that CPU's clock in `clocks`.
    pub fn recent_loads(&self, row: LoadRow, clocks: &[u64]) -> Result<Vec<u64>> {
        let loads: Vec<_> = match row {
            LoadRow::Nexthop(id) => (self.maps.nexthop_stats.get(&id, 0))
                .map_err(map_err(names::NEXTHOP_STATS))?
                .iter()
                .map(|s| s.load)
                .collect(),
            LoadRow::Class(index) => (self.maps.class_load.get(&index, 0))
                .map_err(map_err(names::CLASS_LOAD))?
                .iter()
                .copied()
                .collect(),
        };
        Ok((loads.iter().zip(clocks))
            .map(|(load, &clock)| load.at(load_epoch(clock)))
            .collect())
    }

    /// What each CPU was last told the others put on `row`.
    pub fn peer_loads(&self, row: LoadRow) -> Result<Vec<u64>> {
        let (index, name) = row.peers();
        let map = match row {
            LoadRow::Nexthop(_) => &self.maps.peer_load,
            LoadRow::Class(_) => &self.maps.class_peer_load,
        };
        let loads = map.get(&index, 0).map_err(map_err(name))?;
        Ok(loads.iter().copied().collect())
    }

    /// Tells each CPU what the others put on `row` (one value per CPU, in
    /// [`Self::load_clocks`]' order).
    pub fn set_peer_loads(&mut self, row: LoadRow, per_cpu: Vec<u64>) -> Result<()> {
        let (index, name) = row.peers();
        let values = PerCpuValues::try_from(per_cpu)
            .map_err(MapError::IoError)
            .map_err(map_err(name))?;
        let map = match row {
            LoadRow::Nexthop(_) => &mut self.maps.peer_load,
            LoadRow::Class(_) => &mut self.maps.class_peer_load,
        };
        map.set(index, values, 0).map_err(map_err(name))
    }
}

impl LoadRow {
    /// Its index in the map of what the other CPUs put there, and that
    /// map's name.
    fn peers(self) -> (u32, &'static str) {
        match self {
            Self::Nexthop(id) => (id, names::PEER_LOAD),
            Self::Class(index) => (index, names::CLASS_PEER_LOAD),
        }
    }
}
