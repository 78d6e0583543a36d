//! What the other CPUs' flows put on each next hop, told to every CPU.
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

use lb_common::select::load::{CpuLoads, peer_loads};
use tracing::{info, warn};

use crate::dataplane::Dataplane;

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
    /// By next-hop id, the values last written; `None` until the map was
    /// swept once (a taken-over instance's map holds the last daemon's).
    written: Option<BTreeMap<u32, Vec<u64>>>,
    failing: bool,
}

impl PeerLoads {
    /// Reads every CPU's loads on `members` (the next hops of groups that
    /// choose by load) and writes each CPU what the others put on them;
    /// next hops that left `members` are told nothing.
    pub fn tick(&mut self, dp: &mut Dataplane, members: &[u32]) {
        match self.share(dp, members) {
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

    fn share(&mut self, dp: &mut Dataplane, members: &[u32]) -> anyhow::Result<()> {
        let clocks = dp.load_clocks()?;
        if clocks.len() < 2 {
            return Ok(());
        }
        let mut written = match self.written.take() {
            Some(written) => written,
            None => swept(dp)?,
        };
        let result = self.write(dp, members, &clocks, &mut written);
        self.written = Some(written);
        self.clocks = clocks;
        result
    }

    fn write(
        &mut self,
        dp: &mut Dataplane,
        members: &[u32],
        clocks: &[u64],
        written: &mut BTreeMap<u32, Vec<u64>>,
    ) -> anyhow::Result<()> {
        let left: Vec<u32> = (written.keys())
            .filter(|id| members.binary_search(id).is_err())
            .copied()
            .collect();
        for id in left {
            dp.set_peer_loads(id, vec![0; clocks.len()])?;
            written.remove(&id);
        }
        if !self.age(clocks) {
            return Ok(());
        }
        // loads[cpu][i]: CPU `cpu`'s recent load on `members[i]`.
        let mut loads = vec![vec![0u64; members.len()]; clocks.len()];
        for (i, &id) in members.iter().enumerate() {
            for (cpu, load) in dp.recent_loads(id, clocks)?.into_iter().enumerate() {
                if let Some(row) = loads.get_mut(cpu) {
                    row[i] = load;
                }
            }
        }
        let cpus: Vec<CpuLoads> = (self.recent.iter().zip(&loads))
            .map(|(&recent, loads)| CpuLoads { recent, loads })
            .collect();
        // told[cpu][i]: what CPU `cpu` is told of `members[i]`.
        let told: Vec<Vec<u64>> = (0..clocks.len())
            .map(|cpu| {
                let mut out = vec![0; members.len()];
                peer_loads(&cpus, cpu, &mut out);
                out
            })
            .collect();
        for (i, &id) in members.iter().enumerate() {
            let per_cpu: Vec<u64> = told.iter().map(|row| row[i]).collect();
            if written.get(&id) != Some(&per_cpu) {
                dp.set_peer_loads(id, per_cpu.clone())?;
                written.insert(id, per_cpu);
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

/// Every next hop's peer loads that are not zero, as a taken-over
/// instance's map holds them: what the first tick clears or overwrites.
fn swept(dp: &Dataplane) -> anyhow::Result<BTreeMap<u32, Vec<u64>>> {
    let mut found = BTreeMap::new();
    for id in 0..lb_common::limits::MAX_NEXTHOPS {
        let loads = dp.peer_loads(id)?;
        if loads.iter().any(|&l| l != 0) {
            found.insert(id, loads);
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
}
