//! The leaf daemon's maps read straight from the kernel, by way of the
//! program attached to the leaf's first host port: path quality and bytes
//! per next hop, sampled every millisecond during a run without asking the
//! daemon (its metrics file is written far less often).

use std::process::Command;

use anyhow::{Context, Result, anyhow};
use aya::maps::{Array, Map, MapData, PerCpuArray};
use aya::programs::loaded_programs;
use lb_common::abi::{NEXTHOP_STATS, NextHopStats, PATH_QUALITY};

use super::Testbed;
use super::netns::output;

pub struct LeafMaps {
    quality: Array<MapData, u32>,
    stats: PerCpuArray<MapData, NextHopStats>,
}

impl LeafMaps {
    /// The maps of the program on the leaf's port `h1`.
    pub fn open(bed: &Testbed) -> Result<Self> {
        let prog_id = xdp_prog_id(bed)?;
        let info = loaded_programs()
            .filter_map(Result::ok)
            .find(|p| p.id() == prog_id)
            .ok_or_else(|| anyhow!("program {prog_id} is not loaded"))?;
        let ids = info
            .map_ids()?
            .ok_or_else(|| anyhow!("program {prog_id} lists no maps"))?;
        let (mut quality, mut stats) = (None, None);
        for id in ids {
            let data = MapData::from_id(id)?;
            let name = data.info()?.name_as_str().map(str::to_owned);
            match name.as_deref() {
                Some(PATH_QUALITY) => quality = Some(Array::try_from(Map::from_map_data(data)?)?),
                Some(NEXTHOP_STATS) => {
                    stats = Some(PerCpuArray::try_from(Map::from_map_data(data)?)?)
                }
                _ => {}
            }
        }
        Ok(Self {
            quality: quality.with_context(|| format!("no {PATH_QUALITY} in program {prog_id}"))?,
            stats: stats.with_context(|| format!("no {NEXTHOP_STATS} in program {prog_id}"))?,
        })
    }

    /// Next hop `id`'s path quality.
    pub fn quality(&self, id: u32) -> Result<u32> {
        Ok(self.quality.get(&id, 0)?)
    }

    /// Bytes forwarded to next hop `id`, all CPUs.
    pub fn bytes(&self, id: u32) -> Result<u64> {
        Ok(self.stats.get(&id, 0)?.iter().map(|s| s.bytes).sum())
    }
}

/// The id of the XDP program on the leaf's `h1`, as `ip -j link` shows it.
pub fn xdp_prog_id(bed: &Testbed) -> Result<u32> {
    let out = output(Command::new("ip").args(["-n", &bed.ns("leaf"), "-j", "link", "show", "h1"]))?;
    let links: serde_json::Value = serde_json::from_str(&out)?;
    links[0]["xdp"]["prog"]["id"]
        .as_u64()
        .map(|id| id as u32)
        .ok_or_else(|| anyhow!("no XDP program on the leaf's h1: {out}"))
}
