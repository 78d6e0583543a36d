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

#[cfg(test)]
mod tests {
    use super::*;

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
