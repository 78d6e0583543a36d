//! What the benchmark programs and the bench harness agree on.

/// `fabriclb` for benchmarks: restores the packet after each run.
pub const PROGRAM_BENCH: &str = "fabriclb_bench";
/// Benchmark baseline: parse, redirect to [`BASELINE_IFINDEX`], rewrite
/// the L2 header and the TTL.
pub const PROGRAM_BASELINE: &str = "fabriclb_baseline";
/// The restore wrapper around nothing: the floor every cost is taken above.
pub const PROGRAM_EMPTY: &str = "fabriclb_empty";
/// The restore wrapper around one read of the clock flowlet gaps are
/// measured on (`bpf_ktime_get_ns`): what every packet kept to a flowlet
/// pays for it.
pub const PROGRAM_CLOCK: &str = "fabriclb_clock";
/// [`PROGRAM_BENCH`] on a packet [`BenchVary`] changes before each run.
pub const PROGRAM_VARY: &str = "fabriclb_vary";
/// The forwarding path cut short after each stage, in path order, with the
/// stage each adds: the breakdown's programs. The last stage (the
/// counters) is what [`PROGRAM_BENCH`] adds to the last of them.
pub const ABLATIONS: [(&str, &str); 6] = [
    ("fabriclb_until_parse", "parse"),
    ("fabriclb_until_route", "route lookup"),
    ("fabriclb_until_hash", "hash + bucket"),
    ("fabriclb_until_select", "select + next hop"),
    ("fabriclb_until_redirect", "redirect"),
    ("fabriclb_until_rewrite", "rewrite"),
];
/// The benchmark's [`BenchVary`], one entry.
pub const BENCH_VARY: &str = "FL_BENCH_VARY";
/// The baseline's fixed egress port: the loopback device, always present.
pub const BASELINE_IFINDEX: u32 = 1;
/// Bytes the benchmark programs save and restore: Ethernet plus the
/// longest IPv4 header, rounded up. Benchmark frames are at least this long.
pub const BENCH_RESTORE_LEN: usize = 96;

/// How [`PROGRAM_VARY`] changes its packet before each run: the big-endian
/// u32 at `offset` becomes `base + (next % modulus) * stride` (all
/// wrapping; `modulus` 0 never wraps), then `next` counts on. So a timed run
/// visits many flows or routes instead of one; the restore wrapper puts the
/// original bytes back, as `offset + 4 <= BENCH_RESTORE_LEN` must.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BenchVary {
    pub offset: u32,
    pub base: u32,
    pub stride: u32,
    pub modulus: u32,
    pub next: u32,
}

impl BenchVary {
    /// The value written for run `next`.
    #[inline(always)]
    pub fn value(&self) -> u32 {
        let index = self.next.checked_rem(self.modulus).unwrap_or(self.next);
        self.base.wrapping_add(index.wrapping_mul(self.stride))
    }
}

#[cfg(feature = "user")]
// SAFETY: `repr(C)` plain integers without padding.
unsafe impl aya::Pod for BenchVary {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vary_wraps_at_the_modulus_and_never_without_one() {
        let mut vary = BenchVary {
            offset: 26,
            base: 0x0a01_0000,
            stride: 256,
            modulus: 3,
            next: 4,
        };
        assert_eq!(vary.value(), 0x0a01_0100);
        vary.modulus = 0;
        assert_eq!(vary.value(), 0x0a01_0400);
        vary.next = u32::MAX;
        vary.stride = 1;
        assert_eq!(vary.value(), 0x0a00_ffff);
    }
}
