//! What the other CPUs' flows put on each next hop, and toward each
//! destination class over each member, told to every CPU.
//!
//! Each CPU weighs a new flowlet's next hops by its own recent loads (a
//! counter shared by every CPU would bounce between their caches on every
//! packet), so alone it cannot see the flows the others placed: two CPUs
//! placing four elephants each over eight paths put two on a path as
//! often as ECMP's hash. Every [`PEER_LOAD_INTERVAL`] this reads every
//! CPU's recent loads and how much each forwarded, and writes each CPU the
//! others' loads in its own units, which the data plane adds to its own
//! ([`lb_common::select::load`]).

use std::collections::BTreeMap;
use std::time::Duration;

use lb_common::limits::{CLASS_LOAD_ROWS, MAX_NEXTHOPS};
use lb_common::select::load::{CpuLoads, peer_loads, total};
use tracing::{info, warn};

use crate::dataplane::{Dataplane, LoadRow};

/// How often the CPUs' loads are shared: a flowlet placed on one CPU is
/// seen by the others this much later at most.
pub const PEER_LOAD_INTERVAL: Duration = Duration::from_millis(10);

/// The CPUs' load clocks as last read, and what each CPU was last told.
#[derive(Default)]
pub struct PeerLoads {
    /// Each CPU's load clock at the last tick.
    clocks: Vec<u64>,
    /// Each CPU's bytes lately: halved at every tick that forwarded
    /// anything, the tick's bytes added. Ticks with no traffic anywhere
    /// age nothing, as the data plane's loads age by traffic, not time:
    /// the view holds across a collective's pauses.
    recent: Vec<u64>,
    /// By row, the values last written; `None` until the maps were swept
    /// once (a taken-over instance's maps hold the last daemon's).
    written: Option<BTreeMap<LoadRow, Vec<u64>>>,
    failing: bool,
}

impl PeerLoads {
    /// Reads every CPU's loads on `members` (the next hops of groups that
    /// choose by load) and toward `classes` (class load indices of those
    /// groups' classes), both in order, and writes each CPU what the
    /// others put there; rows that left are told nothing.
    pub fn tick(&mut self, dp: &mut Dataplane, members: &[u32], classes: &[u32]) {
        match self.share(dp, members, classes) {
            Ok(()) if self.failing => {
                info!("sharing the CPUs' next-hop loads works again");
                self.failing = false;
            }
            Ok(()) => {}
            Err(e) if !self.failing => {
                warn!("sharing the CPUs' next-hop loads: {e:#}");
                self.failing = true;
            }
            Err(_) => {}
        }
    }

    fn share(
        &mut self,
        dp: &mut Dataplane,
        members: &[u32],
        classes: &[u32],
    ) -> anyhow::Result<()> {
        let clocks = dp.load_clocks()?;
        if clocks.len() < 2 {
            return Ok(());
        }
        let mut written = match self.written.take() {
            Some(written) => written,
            None => swept(dp)?,
        };
        let result = self.write(dp, members, classes, &clocks, &mut written);
        self.written = Some(written);
        self.clocks = clocks;
        result
    }

    fn write(
        &mut self,
        dp: &mut Dataplane,
        members: &[u32],
        classes: &[u32],
        clocks: &[u64],
        written: &mut BTreeMap<LoadRow, Vec<u64>>,
    ) -> anyhow::Result<()> {
        let nexthops: Vec<LoadRow> = members.iter().map(|&id| LoadRow::Nexthop(id)).collect();
        let classes: Vec<LoadRow> = classes.iter().map(|&i| LoadRow::Class(i)).collect();
        let left: Vec<LoadRow> = (written.keys())
            .filter(|row| {
                nexthops.binary_search(row).is_err() && classes.binary_search(row).is_err()
            })
            .copied()
            .collect();
        for row in left {
            dp.set_peer_loads(row, vec![0; clocks.len()])?;
            written.remove(&row);
        }
        if !self.age(clocks) {
            return Ok(());
        }
        let nexthop_loads = read(dp, &nexthops, clocks)?;
        // What each CPU's loads count in: its next hops' loads summed.
        let totals: Vec<u64> = nexthop_loads.iter().map(|loads| total(loads)).collect();
        let class_loads = read(dp, &classes, clocks)?;
        for (rows, loads) in [(&nexthops, &nexthop_loads), (&classes, &class_loads)] {
            let cpus: Vec<CpuLoads> = (self.recent.iter().zip(&totals).zip(loads))
                .map(|((&recent, &total), loads)| CpuLoads {
                    recent,
                    total,
                    loads,
                })
                .collect();
            // told[cpu][i]: what CPU `cpu` is told of `rows[i]`.
            let told: Vec<Vec<u64>> = (0..clocks.len())
                .map(|cpu| {
                    let mut out = vec![0; rows.len()];
                    peer_loads(&cpus, cpu, &mut out);
                    out
                })
                .collect();
            for (i, &row) in rows.iter().enumerate() {
                let per_cpu: Vec<u64> = told.iter().map(|told| told[i]).collect();
                if written.get(&row) != Some(&per_cpu) {
                    dp.set_peer_loads(row, per_cpu.clone())?;
                    written.insert(row, per_cpu);
                }
            }
        }
        Ok(())
    }

    /// Takes in what each CPU forwarded since the last tick; whether
    /// anything was (and so whether the view changed).
    fn age(&mut self, clocks: &[u64]) -> bool {
        if self.clocks.len() != clocks.len() {
            self.recent = vec![0; clocks.len()];
            return false;
        }
        let forwarded: Vec<u64> = (clocks.iter().zip(&self.clocks))
            .map(|(now, then)| now.saturating_sub(*then))
            .collect();
        if forwarded.iter().all(|&b| b == 0) {
            return false;
        }
        for (recent, bytes) in self.recent.iter_mut().zip(forwarded) {
            *recent = *recent / 2 + bytes;
        }
        true
    }
}

/// `loads[cpu][i]`: CPU `cpu`'s recent load on `rows[i]`.
fn read(dp: &Dataplane, rows: &[LoadRow], clocks: &[u64]) -> anyhow::Result<Vec<Vec<u64>>> {
    let mut loads = vec![vec![0u64; rows.len()]; clocks.len()];
    for (i, &row) in rows.iter().enumerate() {
        for (cpu, load) in dp.recent_loads(row, clocks)?.into_iter().enumerate() {
            if let Some(cpu_loads) = loads.get_mut(cpu) {
                cpu_loads[i] = load;
            }
        }
    }
    Ok(loads)
}

/// Every row's peer loads that are not zero, as a taken-over instance's
/// maps hold them: what the first tick clears or overwrites.
fn swept(dp: &Dataplane) -> anyhow::Result<BTreeMap<LoadRow, Vec<u64>>> {
    let rows = (0..MAX_NEXTHOPS)
        .map(LoadRow::Nexthop)
        .chain((0..CLASS_LOAD_ROWS).map(LoadRow::Class));
    let mut found = BTreeMap::new();
    for row in rows {
        let loads = dp.peer_loads(row)?;
        if loads.iter().any(|&l| l != 0) {
            found.insert(row, loads);
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_bytes_age_only_over_ticks_that_forwarded_something() {
        let mut peers = PeerLoads::default();
        // The first look only learns the clocks.
        assert!(!peers.age(&[100, 100]));
        peers.clocks = vec![100, 100];
        assert!(peers.age(&[1100, 400]));
        assert_eq!(peers.recent, [1000, 300]);
        peers.clocks = vec![1100, 400];
        // A pause ages nothing: the split the flows had holds.
        assert!(!peers.age(&[1100, 400]));
        assert_eq!(peers.recent, [1000, 300]);
        assert!(peers.age(&[1100, 500]));
        assert_eq!(peers.recent, [500, 250]);
    }

    /// Each CPU's loads toward a class over a member are told to the
    /// others in their units, as the next hops' are: CPU 1 forwarded
    /// twice CPU 0's bytes, a quarter of them toward the class over the
    /// member, so CPU 0, whose next hops' loads sum to what CPU 1's do,
    /// hears of twice its own quarter; CPU 1 hears nothing there.
    #[test]
    fn class_loads_are_shared_in_each_cpus_units() {
        use aya::maps::PerCpuValues;
        use lb_common::abi::NextHopStats;
        use lb_common::select::load::RecentLoad;

        let mut dp = Dataplane::load(1024).expect("load (needs root)");
        let cpus = dp.load_clocks().expect("clocks").len();
        assert!(cpus >= 2, "needs two CPUs");
        let per_cpu = |first: u64, second: u64| {
            let mut values = vec![0; cpus];
            values[..2].copy_from_slice(&[first, second]);
            values
        };
        let loads = |first: u64, second: u64| {
            let load = |bytes| RecentLoad { bytes, epoch: 0 };
            let values: Vec<RecentLoad> = per_cpu(first, second).into_iter().map(load).collect();
            PerCpuValues::try_from(values).expect("per-CPU values")
        };
        let set_clocks = |dp: &mut Dataplane, first, second| {
            let clocks = PerCpuValues::try_from(per_cpu(first, second)).expect("values");
            dp.maps.load_clock.set(0, clocks, 0).expect("set clocks");
        };
        let (nexthop, class_row) = (5, 64 + 2);
        let stats = |bytes| NextHopStats {
            load: RecentLoad { bytes, epoch: 0 },
            ..NextHopStats::default()
        };
        let stats: Vec<NextHopStats> = per_cpu(4 << 20, 4 << 20).into_iter().map(stats).collect();
        let stats = PerCpuValues::try_from(stats).expect("values");
        dp.maps.nexthop_stats.set(nexthop, stats, 0).expect("stats");
        dp.maps
            .class_load
            .set(class_row, loads(0, 1 << 20), 0)
            .expect("class loads");

        let mut peers = PeerLoads::default();
        set_clocks(&mut dp, 0, 0);
        peers.tick(&mut dp, &[nexthop], &[class_row]);
        set_clocks(&mut dp, 1000, 2000);
        peers.tick(&mut dp, &[nexthop], &[class_row]);
        let told = dp
            .peer_loads(LoadRow::Class(class_row))
            .expect("class peers");
        assert_eq!(told[..2], [2 << 20, 0]);
        let told = dp.peer_loads(LoadRow::Nexthop(nexthop)).expect("peers");
        assert_eq!(told[..2], [8 << 20, 2 << 20]);

        // A class that left its group is told nothing any more.
        peers.tick(&mut dp, &[nexthop], &[]);
        let told = dp
            .peer_loads(LoadRow::Class(class_row))
            .expect("class peers");
        assert_eq!(told, vec![0; cpus]);
    }
}
