//! One instance's maps, opened from another process: from the pins of a
//! running (or crashed) daemon, or through a loaded program's map ids (a
//! program the caller loaded itself, as the tests do). `status` and
//! `explain` only ever read them.

use std::cell::Cell;
use std::net::IpAddr;
use std::path::PathBuf;

use aya::maps::{Array, Map, MapData, MapError, PerCpuValues, lpm_trie::Key};
use aya::programs::{ProgramError, ProgramInfo};
use lb_common::abi::{
    self as names, GroupEntry, GroupStats, NextHop, NextHopStats, OverrideEntry, PortMacs,
    VerdictCount, port_slot,
};
use lb_common::route::table::{Levels, entry_value, lookup_entry, or_trie};
use lb_common::select::flowlet::FlowletState;
use lb_common::select::load::{RecentLoad, load_epoch};
use lb_common::verdict::Reason;

use super::view::MapView;
use crate::dataplane::tables::route_table::Family;
use crate::dataplane::{Maps, pins::PinDir, said};

#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    // Each message says its cause itself, so none has a `source`: a chain
    // would repeat it.
    #[error(
        "no fabriclb instance is pinned at {} ({name}: {}); \
         is the daemon running with the same --bpffs and --instance?",
        dir.display(),
        said(cause)
    )]
    NotPinned {
        dir: PathBuf,
        name: &'static str,
        cause: MapError,
    },
    #[error("map {name}: {}", said(cause))]
    Map { name: &'static str, cause: MapError },
    #[error("the program's maps: {}", said(.0))]
    Program(ProgramError),
    #[error("the program has no map {name}")]
    MissingMap { name: &'static str },
    #[error("no CPU {cpu}: this machine has CPUs 0 to {}", cpus - 1)]
    NoSuchCpu { cpu: usize, cpus: usize },
}

type Result<T> = std::result::Result<T, InspectError>;

pub(super) fn map_err(name: &'static str) -> impl Fn(MapError) -> InspectError {
    move |cause| InspectError::Map { name, cause }
}

/// Every map `status` and `explain` read, typed as the data plane
/// declares them.
pub struct MapSet {
    pub typed: Maps,
    /// The flowlet table's size, fixed when the daemon loaded it.
    pub flowlet_capacity: u32,
}

impl MapSet {
    /// The maps pinned in `pins`.
    pub fn from_pins(pins: &PinDir) -> Result<Self> {
        Self::open(|name| {
            MapData::from_pin(pins.map(name)).map_err(|cause| InspectError::NotPinned {
                dir: pins.dir().to_path_buf(),
                name,
                cause,
            })
        })
    }

    /// The maps `program` uses, found by their names.
    pub fn from_program(program: &ProgramInfo) -> Result<Self> {
        let ids = program
            .map_ids()
            .map_err(InspectError::Program)?
            .unwrap_or_default();
        let mut maps = Vec::with_capacity(ids.len());
        for id in ids {
            let data = MapData::from_id(id).map_err(map_err("(by id)"))?;
            let name = data.info().map_err(map_err("(by id)"))?;
            maps.push((name.name_as_str().unwrap_or_default().to_owned(), data));
        }
        Self::open(|name| {
            let at = maps.iter().position(|(n, _)| n == name);
            at.map(|at| maps.swap_remove(at).1)
                .ok_or(InspectError::MissingMap { name })
        })
    }

    fn open(mut data: impl FnMut(&'static str) -> Result<MapData>) -> Result<Self> {
        let maps = Maps::typed(
            |name| Map::from_map_data(data(name)?).map_err(map_err(name)),
            |name, cause| InspectError::Map { name, cause },
        )?;
        let flowlet_capacity = maps.flowlet_capacity().map_err(map_err(names::FLOWLETS))?;
        Ok(Self {
            typed: maps,
            flowlet_capacity,
        })
    }

    /// Every ingress port's entry.
    pub fn ports(&self) -> Result<Vec<PortMacs>> {
        self.typed.ports().map_err(map_err(names::PORTS))
    }

    pub fn group_stats(&self, id: u32) -> Result<PerCpuValues<GroupStats>> {
        self.typed
            .group_stats
            .get(&id, 0)
            .map_err(map_err(names::GROUP_STATS))
    }

    /// Packets and bytes per verdict reason, summed over CPUs, indexed by
    /// reason.
    pub fn verdicts(&self) -> Result<[VerdictCount; Reason::COUNT as usize]> {
        self.typed
            .verdict_totals()
            .map_err(map_err(names::VERDICTS))
    }
}

impl MapView for MapSet {
    fn group_at(&self, id: u32) -> Result<Option<GroupEntry>> {
        absent_is_none(self.typed.groups.get(&id, 0), names::GROUPS)
    }

    fn override_at(&self, index: u32) -> Result<Option<OverrideEntry>> {
        absent_is_none(self.typed.overrides.get(&index, 0), names::OVERRIDES)
    }

    fn nexthop(&self, id: u32) -> Result<Option<NextHop>> {
        absent_is_none(self.typed.nexthops.get(&id, 0), names::NEXTHOPS)
    }

    fn quality(&self, index: u32) -> Result<u32> {
        let quality = self.typed.path_quality.get(&index, 0);
        Ok(absent_is_none(quality, names::PATH_QUALITY)?.unwrap_or(0))
    }

    fn bucket(&self, index: u32) -> Result<Option<u32>> {
        absent_is_none(self.typed.buckets.get(&index, 0), names::BUCKETS)
    }

    fn spray_slot(&self, index: u32) -> Result<Option<u32>> {
        absent_is_none(self.typed.spray.get(&index, 0), names::SPRAY)
    }

    /// Where the data plane finds them: the port's slot if it holds the
    /// port, else the table of all ports.
    fn port_macs(&self, ifindex: u32) -> Result<Option<PortMacs>> {
        let slot = absent_is_none(
            self.typed.port_slots.get(&port_slot(ifindex), 0),
            names::PORT_SLOTS,
        )?;
        match slot {
            Some(port) if port.ifindex == ifindex => Ok(Some(port)),
            _ => absent_is_none(self.typed.ports.get(&ifindex, 0), names::PORTS),
        }
    }

    fn has_port(&self, ifindex: u32) -> Result<bool> {
        Ok(absent_is_none(self.typed.devmap.get(ifindex, 0), names::DEVMAP)?.is_some())
    }

    /// The same lookup as the program's, over the same maps.
    fn route(&self, dst: &[u8]) -> Result<Option<u32>> {
        let maps = &self.typed;
        let raw = match <[u8; 4]>::try_from(dst) {
            Ok(v4) => {
                let levels = Table::new(&maps.route4_first, &maps.route4_pool, Family::V4);
                let raw = lookup_entry(&levels, &v4);
                levels.checked(raw)?
            }
            Err(_) => {
                let mut v6 = [0; 16];
                v6.copy_from_slice(&dst[..16]);
                let levels = Table::new(&maps.route6_first, &maps.route6_pool, Family::V6);
                let raw = lookup_entry(&levels, &v6);
                let raw = levels.checked(raw)?;
                let mut failed = None;
                let raw = or_trie(raw, || {
                    absent_is_none(maps.routes_v6.get(&Key::new(128, v6), 0), names::ROUTES_V6)
                        .unwrap_or_else(|e| {
                            failed = Some(e);
                            None
                        })
                });
                failed.map_or(Ok(raw), Err)?
            }
        };
        Ok(entry_value(raw))
    }

    /// The keys of the route tries, which record every route.
    fn route_prefixes(&self, ipv6: bool) -> Result<Vec<(IpAddr, u8)>> {
        let maps = &self.typed;
        if ipv6 {
            (maps.routes_v6.keys())
                .map(|key| {
                    let key: Key<[u8; 16]> = key.map_err(map_err(names::ROUTES_V6))?;
                    Ok((IpAddr::from(key.data()), key.prefix_len() as u8))
                })
                .collect()
        } else {
            (maps.routes_v4.keys())
                .map(|key| {
                    let key: Key<[u8; 4]> = key.map_err(map_err(names::ROUTES_V4))?;
                    Ok((IpAddr::from(key.data()), key.prefix_len() as u8))
                })
                .collect()
        }
    }

    /// The clock counts the packet first, as the program's does.
    fn epochs(&self, len: u64) -> Result<Vec<u64>> {
        let clocks = self
            .typed
            .load_clock
            .get(&0, 0)
            .map_err(map_err(names::LOAD_CLOCK))?;
        Ok(clocks.iter().map(|c| load_epoch(c + len)).collect())
    }

    fn nexthop_stats(&self, id: u32) -> Result<Option<Vec<NextHopStats>>> {
        let stats = absent_is_none(self.typed.nexthop_stats.get(&id, 0), names::NEXTHOP_STATS)?;
        Ok(stats.map(|s| s.to_vec()))
    }

    fn peer_loads(&self, id: u32) -> Result<Option<Vec<u64>>> {
        let loads = absent_is_none(self.typed.peer_load.get(&id, 0), names::PEER_LOAD)?;
        Ok(loads.map(|l| l.to_vec()))
    }

    fn class_loads(&self, index: u32) -> Result<Option<Vec<RecentLoad>>> {
        let loads = absent_is_none(self.typed.class_load.get(&index, 0), names::CLASS_LOAD)?;
        Ok(loads.map(|l| l.to_vec()))
    }

    fn class_peer_loads(&self, index: u32) -> Result<Option<Vec<u64>>> {
        let loads = self.typed.class_peer_load.get(&index, 0);
        let loads = absent_is_none(loads, names::CLASS_PEER_LOAD)?;
        Ok(loads.map(|l| l.to_vec()))
    }

    fn spray_cursor(&self, row: u32) -> Result<Vec<u64>> {
        let cursors = self.typed.spray_cursor.get(&row, 0);
        Ok(cursors.map_err(map_err(names::SPRAY_CURSOR))?.to_vec())
    }

    fn flowlet(&self, index: u32) -> Result<Option<Vec<FlowletState>>> {
        let states = absent_is_none(self.typed.flowlets.get(&index, 0), names::FLOWLETS)?;
        Ok(states.map(|s| s.to_vec()))
    }

    fn flowlet_capacity(&self) -> u32 {
        self.flowlet_capacity
    }
}

/// A lookup whose key is not there (or is out of an array's range) is an
/// answer, not an error.
/// A route table's maps as the program reads them; a read that fails
/// otherwise than out of range is kept to be reported.
struct Table<'a> {
    first: &'a Array<MapData, u32>,
    pool: &'a Array<MapData, u32>,
    names: (&'static str, &'static str),
    failed: Cell<Option<InspectError>>,
}

impl<'a> Table<'a> {
    fn new(first: &'a Array<MapData, u32>, pool: &'a Array<MapData, u32>, family: Family) -> Self {
        let names = match family {
            Family::V4 => (names::ROUTE4_FIRST, names::ROUTE4_POOL),
            Family::V6 => (names::ROUTE6_FIRST, names::ROUTE6_POOL),
        };
        Self {
            first,
            pool,
            names,
            failed: Cell::new(None),
        }
    }

    fn read(&self, map: &Array<MapData, u32>, name: &'static str, index: u32) -> Option<u32> {
        absent_is_none(map.get(&index, 0), name).unwrap_or_else(|e| {
            self.failed.set(Some(e));
            None
        })
    }

    /// `raw`, or the failed read the walk met.
    fn checked(self, raw: u32) -> Result<u32> {
        self.failed.into_inner().map_or(Ok(raw), Err)
    }
}

impl Levels for Table<'_> {
    fn first(&self, index: u32) -> Option<u32> {
        self.read(self.first, self.names.0, index)
    }

    fn pool(&self, index: u32) -> Option<u32> {
        self.read(self.pool, self.names.1, index)
    }
}

fn absent_is_none<T>(
    got: std::result::Result<T, MapError>,
    name: &'static str,
) -> Result<Option<T>> {
    match got {
        Ok(value) => Ok(Some(value)),
        Err(MapError::KeyNotFound | MapError::OutOfBounds { .. }) => Ok(None),
        Err(MapError::SyscallError(e)) if e.io_error.raw_os_error() == Some(libc::ENOENT) => {
            Ok(None)
        }
        Err(source) => Err(InspectError::Map {
            name,
            cause: source,
        }),
    }
}
