//! The override maps: entries written by the tables, counters read for
//! the metrics.

use aya::maps::{MapError, PerCpuValues};
use aya::util::nr_cpus;
use lb_common::abi::{self as names, OverrideEntry, OverrideStats};
use lb_common::select::overrides::override_index;

use super::{Dataplane, Result, map_err};

impl Dataplane {
    /// Writes override `index`, its counters from zero: a half is written
    /// whole for a changed set, so what it counted was another set's.
    pub fn set_override(&mut self, index: u32, entry: OverrideEntry) -> Result<()> {
        let cpus = nr_cpus().map_err(|(_, e)| MapError::IoError(e));
        let zero = cpus
            .and_then(|cpus| {
                Ok(PerCpuValues::try_from(vec![
                    OverrideStats::default();
                    cpus
                ])?)
            })
            .map_err(map_err(names::OVERRIDE_STATS))?;
        self.maps
            .override_stats
            .set(index, zero, 0)
            .map_err(map_err(names::OVERRIDE_STATS))?;
        self.maps
            .overrides
            .set(index, entry, 0)
            .map_err(map_err(names::OVERRIDES))
    }

    /// Writes `overrides` into group `group`'s half `half`, in match order.
    pub fn write_override_half(
        &mut self,
        group: u32,
        half: u32,
        overrides: &[(String, OverrideEntry)],
    ) -> Result<()> {
        for (i, (_, entry)) in (0u32..).zip(overrides) {
            self.set_override(override_index(group, half, i), *entry)?;
        }
        Ok(())
    }

    /// Override `index` as the maps hold it.
    pub fn override_entry(&self, index: u32) -> Result<OverrideEntry> {
        self.maps
            .overrides
            .get(&index, 0)
            .map_err(map_err(names::OVERRIDES))
    }

    /// Override `index`'s counters, summed over the CPUs.
    pub fn override_stats(&self, index: u32) -> Result<OverrideStats> {
        let per_cpu = self
            .maps
            .override_stats
            .get(&index, 0)
            .map_err(map_err(names::OVERRIDE_STATS))?;
        Ok(per_cpu
            .iter()
            .fold(OverrideStats::default(), |acc, s| OverrideStats {
                packets: acc.packets + s.packets,
                bytes: acc.bytes + s.bytes,
                fallbacks: acc.fallbacks + s.fallbacks,
            }))
    }
}
