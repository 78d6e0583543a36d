//! Recent load: bytes a next hop (or a flow) carried lately, aged by the
//! traffic a CPU forwards rather than by time. Its own module because the
//! map ABI embeds it in next-hop counters and the flowlet choice weighs it.

/// Recent loads saturate here (1 TiB), far above what a half-life holds;
/// with [`crate::select::flowlet::PATH_QUALITY_MAX`] and the hysteresis
/// factor, products stay under 2^63.
const LOAD_MAX: u64 = 1 << 40;

/// A recent load halves every `1 << LOAD_HALF_LIFE_SHIFT` bytes this CPU
/// forwards in dynamic groups (1 MiB). Counting age in traffic rather than
/// time keeps the memory across the idle phases between collectives, which
/// is exactly when flowlets start: a clock-based average would have decayed
/// to nothing and left every choice a tie.
pub const LOAD_HALF_LIFE_SHIFT: u32 = 20;

/// The load epoch for a CPU that has forwarded `bytes` in dynamic groups.
#[inline(always)]
pub const fn load_epoch(bytes: u64) -> u64 {
    bytes >> LOAD_HALF_LIFE_SHIFT
}

/// Bytes seen recently, halved once per load epoch since.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecentLoad {
    pub bytes: u64,
    pub epoch: u64,
}

impl RecentLoad {
    /// The load as of `epoch`.
    #[inline(always)]
    pub fn at(&self, epoch: u64) -> u64 {
        let age = epoch.saturating_sub(self.epoch);
        if age >= 64 { 0 } else { self.bytes >> age }
    }

    #[inline(always)]
    pub fn add(&mut self, epoch: u64, bytes: u64) {
        self.bytes = (self.at(epoch) + bytes).min(LOAD_MAX);
        self.epoch = epoch;
    }

    #[inline(always)]
    pub fn remove(&mut self, epoch: u64, bytes: u64) {
        self.bytes = self.at(epoch).saturating_sub(bytes);
        self.epoch = epoch;
    }
}

/// What a next hop weighs in a new flowlet's choice on this CPU: its
/// recent load here as of `epoch`, and `peers`, what the other CPUs'
/// flows put on it ([`peer_loads`], written by the daemon). Each CPU
/// keeps its own loads (a shared counter would bounce a cache line
/// between CPUs on every packet), and without the others' a CPU placed
/// its flows as if they were alone: eight elephants over eight paths
/// from two CPUs met two to a path as often as ECMP's hash made them.
///
/// The daemon writes `peers` at most [`LOAD_MAX`]; a mask, not a
/// comparison, keeps whatever else the map holds from overflowing the
/// choice's products (no branch, which the verifier would follow through
/// the rest of the walk twice).
#[inline(always)]
pub fn member_load(own: &RecentLoad, epoch: u64, peers: u64) -> u64 {
    own.at(epoch) + (peers & PEER_LOAD_MASK)
}

/// Keeps peer loads under twice [`LOAD_MAX`].
const PEER_LOAD_MASK: u64 = (LOAD_MAX << 1) - 1;

/// What one CPU forwarded lately and where: its share of the traffic
/// and some of its recent loads, for [`peer_loads`].
#[derive(Clone, Copy, Debug)]
pub struct CpuLoads<'a> {
    /// Bytes it forwarded in dynamic groups lately (the daemon's smoothed
    /// count over the same time for every CPU).
    pub recent: u64,
    /// Its next hops' recent loads summed: what its loads count in
    /// ([`total`]).
    pub total: u64,
    /// Recent loads on it as of its own epoch, the same ones in the same
    /// order for every CPU: its next hops', or its loads toward classes
    /// over members, which count in the same units.
    pub loads: &'a [u64],
}

/// A CPU whose share of the recent traffic is smaller than this fraction
/// counts as this much: an idle CPU's own memory weighs little against
/// what the others carry, but its own next choices still count.
const PEER_WEIGHT_MAX: u64 = 64;

/// What the flows of every CPU but `cpu` put on each next hop, in the
/// units of `cpu`'s own recent loads, into `out` (one per next hop).
///
/// Each CPU's recent loads say how it splits its traffic over the next
/// hops; they sum to about twice the half-life once it forwarded a few
/// half-lives, whatever its rate, so they are weighed by the bytes each
/// CPU forwarded lately. A CPU sending a third of the bytes sees the
/// others' flows at twice the weight of its own.
pub fn peer_loads(cpus: &[CpuLoads], cpu: usize, out: &mut [u64]) {
    out.iter_mut().for_each(|o| *o = 0);
    let Some(own) = cpus.get(cpu) else { return };
    let all_recent: u64 = cpus.iter().map(|c| c.recent).sum();
    let own_recent = own.recent.max(all_recent / PEER_WEIGHT_MAX);
    if own_recent == 0 {
        return;
    }
    let own_total = match own.total {
        0 => 2 << LOAD_HALF_LIFE_SHIFT,
        t => t,
    };
    // Each peer's bytes lately, split as its loads split over its total:
    // at most its bytes in all, so the sums stay in a u64.
    for (_, peer) in cpus.iter().enumerate().filter(|&(c, _)| c != cpu) {
        if peer.total == 0 {
            continue;
        }
        for (o, &load) in out.iter_mut().zip(peer.loads) {
            let share = peer.recent as u128 * load as u128 / peer.total as u128;
            *o = o.saturating_add(share as u64);
        }
    }
    for o in out.iter_mut() {
        let scaled = *o as u128 * own_total as u128 / own_recent as u128;
        *o = scaled.min(LOAD_MAX as u128) as u64;
    }
}

/// `loads` summed, saturating.
pub fn total(loads: &[u64]) -> u64 {
    loads.iter().fold(0u64, |sum, &l| sum.saturating_add(l))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn views<'a>(cpus: &'a [(u64, &'a [u64])]) -> Vec<CpuLoads<'a>> {
        cpus.iter()
            .map(|&(recent, loads)| CpuLoads {
                recent,
                total: total(loads),
                loads,
            })
            .collect()
    }

    fn peers_of(cpus: &[(u64, &[u64])], cpu: usize) -> Vec<u64> {
        let mut out = vec![u64::MAX; cpus[0].1.len()];
        peer_loads(&views(cpus), cpu, &mut out);
        out
    }

    #[test]
    fn two_cpus_with_equal_traffic_see_each_others_loads_as_their_own() {
        let a: &[u64] = &[1 << 20, 1 << 20, 0, 0];
        let b: &[u64] = &[0, 1 << 20, 1 << 20, 0];
        let cpus = [(5_000_000, a), (5_000_000, b)];
        assert_eq!(peers_of(&cpus, 0), b);
        assert_eq!(peers_of(&cpus, 1), a);
    }

    #[test]
    fn peers_are_weighed_by_the_traffic_they_forward() {
        // CPU 1 forwards twice CPU 0's bytes: its 1 MiB on next hop 1 is
        // twice CPU 0's 1 MiB on next hop 0 in CPU 0's units, and CPU 0's
        // is half in CPU 1's.
        let a: &[u64] = &[1 << 20, 0];
        let b: &[u64] = &[0, 1 << 20];
        let cpus = [(1_000, a), (2_000, b)];
        assert_eq!(peers_of(&cpus, 0), [0, 2 << 20]);
        assert_eq!(peers_of(&cpus, 1), [1 << 19, 0]);
        // A third CPU that never forwarded is nobody's load, and sees
        // both in a nominal two half-lives, its own traffic counted as a
        // 64th of all (3000 / 64 = 46 bytes).
        let c: &[u64] = &[0, 0];
        let cpus = [(1_000, a), (2_000, b), (0, c)];
        assert_eq!(peers_of(&cpus, 0), [0, 2 << 20]);
        assert_eq!(
            peers_of(&cpus, 2),
            [1_000 * (2 << 20) / 46, 2_000 * (2 << 20) / 46]
        );
    }

    #[test]
    fn class_loads_count_in_their_cpus_next_hop_units() {
        // Each CPU sent a quarter of its traffic toward the class, all of
        // it over member 0 on CPU 0 and over member 1 on CPU 1; CPU 1
        // forwards twice CPU 0's bytes.
        let cpus = [
            CpuLoads {
                recent: 1_000,
                total: 4 << 20,
                loads: &[1 << 20, 0],
            },
            CpuLoads {
                recent: 2_000,
                total: 4 << 20,
                loads: &[0, 1 << 20],
            },
        ];
        let mut out = [u64::MAX; 2];
        peer_loads(&cpus, 0, &mut out);
        assert_eq!(out, [0, 2 << 20]);
        peer_loads(&cpus, 1, &mut out);
        assert_eq!(out, [1 << 19, 0]);
    }

    #[test]
    fn nothing_forwarded_anywhere_is_no_peer_load() {
        let a: &[u64] = &[1 << 20, 0];
        let b: &[u64] = &[0, 1 << 20];
        assert_eq!(peers_of(&[(0, a), (0, b)], 0), [0, 0]);
        assert_eq!(peers_of(&[(0, a), (0, b)], 5), [0, 0]);
        assert_eq!(peers_of(&[(7, a)], 0), [0, 0]);
    }

    #[test]
    fn a_member_weighs_its_own_load_and_its_peers_bounded() {
        let own = RecentLoad {
            bytes: 4096,
            epoch: 3,
        };
        assert_eq!(member_load(&own, 4, 1000), 3048);
        assert_eq!(member_load(&own, 4, LOAD_MAX), LOAD_MAX + 2048);
        assert_eq!(member_load(&own, 4, u64::MAX), 2 * LOAD_MAX - 1 + 2048);
    }

    #[test]
    fn recent_load_halves_per_epoch_and_saturates() {
        let mut l = RecentLoad::default();
        l.add(10, 4096);
        assert_eq!(l.at(10), 4096);
        assert_eq!(l.at(11), 2048);
        assert_eq!(l.at(22), 1);
        assert_eq!(l.at(200), 0);
        l.add(12, 100);
        assert_eq!(
            l,
            RecentLoad {
                bytes: 1124,
                epoch: 12
            }
        );
        l.remove(12, 2000);
        assert_eq!(l.at(12), 0);
        l.add(13, u64::MAX / 2);
        assert_eq!(l.at(13), LOAD_MAX);
        assert_eq!(load_epoch(3 << LOAD_HALF_LIFE_SHIFT), 3);
    }
}
