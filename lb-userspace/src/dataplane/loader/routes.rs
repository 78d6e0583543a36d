//! The route maps: each family's fixed-stride table the program reads, and
//! the LPM tries (IPv4's the record of prefixes, IPv6's read where its
//! table says `IN_TRIE`).

use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd};

use aya::maps::{Array, IterableMap, MapData, MapError, lpm_trie::Key};
use aya::programs::ProgramError;
use aya::sys::SyscallError;
use lb_common::abi as names;
use lb_common::route::table::BLOCK_ENTRIES;

use super::{Dataplane, DataplaneError, Result, already_gone, map_err};
use crate::dataplane::tables::route_table::{Family, Level};

/// `bpf(2)`'s command binding a map to a loaded program (Linux 5.10+).
const BPF_PROG_BIND_MAP: libc::c_long = 35;

/// `union bpf_attr` for [`BPF_PROG_BIND_MAP`]; the kernel takes a shorter
/// attribute as zero-extended.
#[repr(C)]
struct BindMap {
    prog_fd: u32,
    map_fd: u32,
    flags: u32,
}

impl Dataplane {
    /// Binds the IPv4 route record, which the program never reads, to the
    /// forwarding program, so that it is among the program's maps for
    /// whoever finds them through the program (`explain` on a program's
    /// map ids).
    pub(super) fn bind_route_record(&mut self) -> Result<()> {
        let map_fd = IterableMap::map(&self.maps.routes_v4)
            .fd()
            .as_fd()
            .as_raw_fd();
        let program = self.program()?;
        let prog_fd = program
            .fd()
            .map_err(|source| DataplaneError::Program {
                name: names::PROGRAM,
                source,
            })?
            .as_fd()
            .as_raw_fd();
        let attr = BindMap {
            prog_fd: prog_fd as u32,
            map_fd: map_fd as u32,
            flags: 0,
        };
        // SAFETY: the attribute is a valid `bpf_attr` prefix of the size
        // given, read by the kernel only during the call.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                BPF_PROG_BIND_MAP,
                (&raw const attr).cast::<libc::c_void>(),
                size_of::<BindMap>(),
            )
        };
        if rc < 0 {
            return Err(DataplaneError::Program {
                name: names::PROGRAM,
                source: ProgramError::SyscallError(SyscallError {
                    call: "bpf_prog_bind_map",
                    io_error: std::io::Error::last_os_error(),
                }),
            });
        }
        Ok(())
    }

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

    /// Blocks `family`'s table's pool has room for.
    pub fn route_pool_blocks(&self, family: Family) -> Result<u32> {
        let (pool, _) = self.route_table(family);
        let info = IterableMap::map(pool)
            .info()
            .map_err(map_err(level_name(family, Level::Pool)))?;
        Ok(info.max_entries() / BLOCK_ENTRIES)
    }

    /// Writes one raw entry of `family`'s table.
    pub fn set_route_entry(
        &mut self,
        family: Family,
        level: Level,
        index: u32,
        raw: u32,
    ) -> Result<()> {
        let maps = &mut self.maps;
        let map = match (family, level) {
            (Family::V4, Level::First) => &mut maps.route4_first,
            (Family::V4, Level::Pool) => &mut maps.route4_pool,
            (Family::V6, Level::First) => &mut maps.route6_first,
            (Family::V6, Level::Pool) => &mut maps.route6_pool,
        };
        map.set(index, raw, 0)
            .map_err(map_err(level_name(family, level)))
    }

    /// One raw entry of `family`'s table; `None` past the map's end.
    pub fn route_entry(&self, family: Family, level: Level, index: u32) -> Result<Option<u32>> {
        let (pool, first) = self.route_table(family);
        let got = match level {
            Level::First => first.get(&index, 0),
            Level::Pool => pool.get(&index, 0),
        };
        match got {
            Ok(raw) => Ok(Some(raw)),
            Err(MapError::OutOfBounds { .. }) => Ok(None),
            Err(e) => Err(map_err(level_name(family, level))(e)),
        }
    }

    /// `family`'s pool and first level.
    fn route_table(&self, family: Family) -> (&Array<MapData, u32>, &Array<MapData, u32>) {
        match family {
            Family::V4 => (&self.maps.route4_pool, &self.maps.route4_first),
            Family::V6 => (&self.maps.route6_pool, &self.maps.route6_first),
        }
    }
}

fn level_name(family: Family, level: Level) -> &'static str {
    match (family, level) {
        (Family::V4, Level::First) => names::ROUTE4_FIRST,
        (Family::V4, Level::Pool) => names::ROUTE4_POOL,
        (Family::V6, Level::First) => names::ROUTE6_FIRST,
        (Family::V6, Level::Pool) => names::ROUTE6_POOL,
    }
}
