//! The route maps: the IPv4 fixed-stride table the program reads, and the
//! LPM tries (IPv6's the program reads, IPv4's the record of prefixes).

use std::net::IpAddr;

use aya::maps::{IterableMap, MapError, lpm_trie::Key};
use lb_common::abi as names;
use lb_common::route::table::BLOCK_ENTRIES;

use super::{Dataplane, Result, already_gone, map_err};
use crate::dataplane::tables::route_table::Level;

impl Dataplane {
    /// Routes `addr/len` to `value` (a group id, or `LOCAL_ROUTE`) in its
    /// family's trie.
    pub fn set_route(&mut self, addr: IpAddr, len: u8, value: u32) -> Result<()> {
        match addr {
            IpAddr::V4(a) => self
                .maps
                .routes_v4
                .insert(&Key::new(len.into(), a.octets()), value, 0)
                .map_err(map_err(names::ROUTES_V4)),
            IpAddr::V6(a) => self
                .maps
                .routes_v6
                .insert(&Key::new(len.into(), a.octets()), value, 0)
                .map_err(map_err(names::ROUTES_V6)),
        }
    }

    /// Removes a route from its family's trie; one that is not there is no
    /// error (a rollback undoes routes a failed write may never have
    /// inserted).
    pub fn remove_route(&mut self, addr: IpAddr, len: u8) -> Result<()> {
        match addr {
            IpAddr::V4(a) => already_gone(
                self.maps
                    .routes_v4
                    .remove(&Key::new(len.into(), a.octets())),
                names::ROUTES_V4,
            ),
            IpAddr::V6(a) => already_gone(
                self.maps
                    .routes_v6
                    .remove(&Key::new(len.into(), a.octets())),
                names::ROUTES_V6,
            ),
        }
    }

    /// Blocks the IPv4 table's pool has room for.
    pub fn route4_pool_blocks(&self) -> Result<u32> {
        let info = IterableMap::map(&self.maps.route4_pool)
            .info()
            .map_err(map_err(names::ROUTE4_POOL))?;
        Ok(info.max_entries() / BLOCK_ENTRIES)
    }

    /// Writes one raw entry of the IPv4 table.
    pub fn set_route4_entry(&mut self, level: Level, index: u32, raw: u32) -> Result<()> {
        match level {
            Level::First => self.maps.route4_first.set(index, raw, 0),
            Level::Pool => self.maps.route4_pool.set(index, raw, 0),
        }
        .map_err(map_err(level_name(level)))
    }

    /// One raw entry of the IPv4 table; `None` past the map's end.
    pub fn route4_entry(&self, level: Level, index: u32) -> Result<Option<u32>> {
        let got = match level {
            Level::First => self.maps.route4_first.get(&index, 0),
            Level::Pool => self.maps.route4_pool.get(&index, 0),
        };
        match got {
            Ok(raw) => Ok(Some(raw)),
            Err(MapError::OutOfBounds { .. }) => Ok(None),
            Err(e) => Err(map_err(level_name(level))(e)),
        }
    }
}

fn level_name(level: Level) -> &'static str {
    match level {
        Level::First => names::ROUTE4_FIRST,
        Level::Pool => names::ROUTE4_POOL,
    }
}
