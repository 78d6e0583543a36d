//! The forwarding path's maps, typed as the program declares them: what
//! the loaded [`Dataplane`](super::Dataplane) writes, and what `status` and
//! `explain` open from an instance's pins or a program's map ids.

use aya::maps::{
    Array, DevMapHash, HashMap, IterableMap, LpmTrie, Map, MapData, MapError, PerCpuArray,
};
use lb_common::abi::{
    self as names, GroupEntry, GroupStats, NextHop, NextHopStats, OverrideEntry, OverrideStats,
    PortMacs, VerdictCount,
};
use lb_common::select::flowlet::FlowletState;
use lb_common::select::load::RecentLoad;
use lb_common::verdict::Reason;

pub struct Maps {
    pub routes_v4: LpmTrie<MapData, [u8; 4], u32>,
    pub route4_first: Array<MapData, u32>,
    pub route4_pool: Array<MapData, u32>,
    pub routes_v6: LpmTrie<MapData, [u8; 16], u32>,
    pub route6_first: Array<MapData, u32>,
    pub route6_pool: Array<MapData, u32>,
    pub groups: Array<MapData, GroupEntry>,
    pub overrides: Array<MapData, OverrideEntry>,
    pub override_stats: PerCpuArray<MapData, OverrideStats>,
    pub buckets: Array<MapData, u32>,
    pub nexthops: Array<MapData, NextHop>,
    pub devmap: DevMapHash<MapData>,
    pub path_quality: Array<MapData, u32>,
    pub spray: Array<MapData, u32>,
    pub verdicts: PerCpuArray<MapData, VerdictCount>,
    pub nexthop_stats: PerCpuArray<MapData, NextHopStats>,
    pub peer_load: PerCpuArray<MapData, u64>,
    pub class_load: PerCpuArray<MapData, RecentLoad>,
    pub class_peer_load: PerCpuArray<MapData, u64>,
    pub group_stats: PerCpuArray<MapData, GroupStats>,
    pub spray_cursor: PerCpuArray<MapData, u64>,
    pub flowlets: PerCpuArray<MapData, FlowletState>,
    pub load_clock: PerCpuArray<MapData, u64>,
    pub ports: HashMap<MapData, u32, PortMacs>,
    pub port_slots: Array<MapData, PortMacs>,
}

impl Maps {
    /// Types the map `map(name)` hands over for each of the forwarding
    /// path's names; `mistyped` says which one has another type.
    pub fn typed<E>(
        mut map: impl FnMut(&'static str) -> Result<Map, E>,
        mistyped: impl Fn(&'static str, MapError) -> E,
    ) -> Result<Self, E> {
        macro_rules! typed {
            ($name:expr) => {
                map($name)?
                    .try_into()
                    .map_err(|cause| mistyped($name, cause))?
            };
        }
        Ok(Self {
            routes_v4: typed!(names::ROUTES_V4),
            route4_first: typed!(names::ROUTE4_FIRST),
            route4_pool: typed!(names::ROUTE4_POOL),
            routes_v6: typed!(names::ROUTES_V6),
            route6_first: typed!(names::ROUTE6_FIRST),
            route6_pool: typed!(names::ROUTE6_POOL),
            groups: typed!(names::GROUPS),
            overrides: typed!(names::OVERRIDES),
            override_stats: typed!(names::OVERRIDE_STATS),
            buckets: typed!(names::BUCKETS),
            nexthops: typed!(names::NEXTHOPS),
            devmap: typed!(names::DEVMAP),
            path_quality: typed!(names::PATH_QUALITY),
            spray: typed!(names::SPRAY),
            verdicts: typed!(names::VERDICTS),
            nexthop_stats: typed!(names::NEXTHOP_STATS),
            peer_load: typed!(names::PEER_LOAD),
            class_load: typed!(names::CLASS_LOAD),
            class_peer_load: typed!(names::CLASS_PEER_LOAD),
            group_stats: typed!(names::GROUP_STATS),
            spray_cursor: typed!(names::SPRAY_CURSOR),
            flowlets: typed!(names::FLOWLETS),
            load_clock: typed!(names::LOAD_CLOCK),
            ports: typed!(names::PORTS),
            port_slots: typed!(names::PORT_SLOTS),
        })
    }

    /// Every ingress port's entry.
    pub fn ports(&self) -> Result<Vec<PortMacs>, MapError> {
        self.ports
            .iter()
            .map(|entry| entry.map(|(_, port)| port))
            .collect()
    }

    /// The flowlet table's size, fixed when the program was loaded.
    pub fn flowlet_capacity(&self) -> Result<u32, MapError> {
        Ok(IterableMap::map(&self.flowlets).info()?.max_entries())
    }

    /// Packets and bytes per verdict reason, summed over CPUs, indexed by
    /// reason.
    pub fn verdict_totals(&self) -> Result<[VerdictCount; Reason::COUNT as usize], MapError> {
        let mut totals = [VerdictCount::default(); Reason::COUNT as usize];
        for reason in Reason::ALL {
            let total = &mut totals[reason as usize];
            for count in self.verdicts.get(&(reason as u32), 0)?.iter() {
                total.packets += count.packets;
                total.bytes += count.bytes;
            }
        }
        Ok(totals)
    }
}
