//! The leaf daemon's maps read straight from the kernel, by way of the
//! program attached to the leaf's first host port: path quality, bytes and
//! packets per next hop, groups and their buckets, sampled every
//! millisecond during a run without asking the daemon (its metrics file is
//! written far less often).

use std::process::Command;

use anyhow::{Context, Result, anyhow};
use aya::maps::{Array, Map, MapData, PerCpuArray};
use aya::programs::loaded_programs;
use lb_common::abi::{
    BUCKETS, GROUPS, GroupEntry, NEXTHOP_STATS, NEXTHOPS, NextHop, NextHopStats, OVERRIDE_STATS,
    OverrideStats, PATH_QUALITY,
};
use lb_common::limits::{BUCKETS_PER_GROUP, MAX_GROUPS, MAX_OVERRIDES_PER_GROUP};
use lb_common::select::overrides::override_index;

use super::Testbed;
use super::netns::output;

pub struct LeafMaps {
    quality: Array<MapData, u32>,
    stats: PerCpuArray<MapData, NextHopStats>,
    groups: Array<MapData, GroupEntry>,
    buckets: Array<MapData, u32>,
    overrides: PerCpuArray<MapData, OverrideStats>,
    nexthops: Array<MapData, NextHop>,
}

impl LeafMaps {
    /// The maps of the program on the leaf's port `h1`.
    pub fn open(bed: &Testbed) -> Result<Self> {
        Self::open_on(&bed.ns("leaf"), "h1")
    }

    /// The maps of the program on port `port` of namespace `ns` (a
    /// fabric's leaf).
    pub fn open_on(ns: &str, port: &str) -> Result<Self> {
        let prog_id = xdp_prog_id_on(ns, port)?;
        let info = loaded_programs()
            .filter_map(Result::ok)
            .find(|p| p.id() == prog_id)
            .ok_or_else(|| anyhow!("program {prog_id} is not loaded"))?;
        let ids = info
            .map_ids()?
            .ok_or_else(|| anyhow!("program {prog_id} lists no maps"))?;
        let (mut quality, mut stats, mut groups, mut buckets, mut overrides, mut nexthops) =
            (None, None, None, None, None, None);
        for id in ids {
            let data = MapData::from_id(id)?;
            let name = data.info()?.name_as_str().map(str::to_owned);
            match name.as_deref() {
                Some(PATH_QUALITY) => quality = Some(Array::try_from(Map::from_map_data(data)?)?),
                Some(NEXTHOP_STATS) => {
                    stats = Some(PerCpuArray::try_from(Map::from_map_data(data)?)?)
                }
                Some(GROUPS) => groups = Some(Array::try_from(Map::from_map_data(data)?)?),
                Some(BUCKETS) => buckets = Some(Array::try_from(Map::from_map_data(data)?)?),
                Some(OVERRIDE_STATS) => {
                    overrides = Some(PerCpuArray::try_from(Map::from_map_data(data)?)?)
                }
                Some(NEXTHOPS) => nexthops = Some(Array::try_from(Map::from_map_data(data)?)?),
                _ => {}
            }
        }
        Ok(Self {
            quality: quality.with_context(|| format!("no {PATH_QUALITY} in program {prog_id}"))?,
            stats: stats.with_context(|| format!("no {NEXTHOP_STATS} in program {prog_id}"))?,
            groups: groups.with_context(|| format!("no {GROUPS} in program {prog_id}"))?,
            buckets: buckets.with_context(|| format!("no {BUCKETS} in program {prog_id}"))?,
            overrides: overrides
                .with_context(|| format!("no {OVERRIDE_STATS} in program {prog_id}"))?,
            nexthops: nexthops.with_context(|| format!("no {NEXTHOPS} in program {prog_id}"))?,
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

    /// Packets forwarded to next hop `id`, all CPUs.
    pub fn packets(&self, id: u32) -> Result<u64> {
        Ok(self.stats.get(&id, 0)?.iter().map(|s| s.packets).sum())
    }

    /// Packets group `id`'s overrides sent to their next hops, all of
    /// them in both halves, all CPUs.
    pub fn override_packets(&self, id: u32) -> Result<u64> {
        let mut packets = 0;
        for half in 0..2 {
            for i in 0..MAX_OVERRIDES_PER_GROUP {
                let stats = self.overrides.get(&override_index(id, half, i), 0)?;
                packets += stats.iter().map(|s| s.packets).sum::<u64>();
            }
        }
        Ok(packets)
    }

    /// Next hop `id` as the program rewrites to it.
    pub fn next_hop(&self, id: u32) -> Result<NextHop> {
        Ok(self.nexthops.get(&id, 0)?)
    }

    /// Group `id`'s settings.
    pub fn group(&self, id: u32) -> Result<GroupEntry> {
        Ok(self.groups.get(&id, 0)?)
    }

    /// The next hops of every group that leave by port `ifindex`.
    pub fn next_hops_via(&self, ifindex: u32) -> Result<Vec<u32>> {
        let mut via = Vec::new();
        for id in 0..MAX_GROUPS {
            let group = self.group(id)?;
            for &member in group.members.iter().take(group.member_count as usize) {
                if self.nexthops.get(&member, 0)?.ifindex == ifindex && !via.contains(&member) {
                    via.push(member);
                }
            }
        }
        Ok(via)
    }

    /// Group `id`'s bucket table: a next-hop id per bucket.
    pub fn buckets(&self, id: u32) -> Result<Vec<u32>> {
        (id * BUCKETS_PER_GROUP..(id + 1) * BUCKETS_PER_GROUP)
            .map(|b| Ok(self.buckets.get(&b, 0)?))
            .collect()
    }
}

/// The ifindex of the leaf's port `port`.
pub fn leaf_ifindex(bed: &Testbed, port: &str) -> Result<u32> {
    ifindex_in(&bed.ns("leaf"), port)
}

/// The ifindex of `port` in namespace `ns`.
pub fn ifindex_in(ns: &str, port: &str) -> Result<u32> {
    link_field(ns, port, &["ifindex"], "no ifindex")
}

/// The id of the XDP program on the leaf's `h1`, as `ip -j link` shows it.
pub fn xdp_prog_id(bed: &Testbed) -> Result<u32> {
    xdp_prog_id_on(&bed.ns("leaf"), "h1")
}

/// The id of the XDP program on `port` of namespace `ns`.
fn xdp_prog_id_on(ns: &str, port: &str) -> Result<u32> {
    link_field(ns, port, &["xdp", "prog", "id"], "no XDP program")
}

/// The number at `path` in what `ip -j link show` says of `port` in
/// namespace `ns`; `missing` names what is not there.
fn link_field(ns: &str, port: &str, path: &[&str], missing: &str) -> Result<u32> {
    let out = output(Command::new("ip").args(["-n", ns, "-j", "link", "show", port]))?;
    let links: serde_json::Value = serde_json::from_str(&out)?;
    path.iter()
        .fold(&links[0], |value, key| &value[*key])
        .as_u64()
        .map(|n| n as u32)
        .ok_or_else(|| anyhow!("{missing} on {ns}'s {port}: {out}"))
}
