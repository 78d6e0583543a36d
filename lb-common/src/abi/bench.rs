//! What the benchmark programs and the bench harness agree on.

/// `fabriclb` for benchmarks: restores the packet after each run.
pub const PROGRAM_BENCH: &str = "fabriclb_bench";
/// Benchmark baseline: parse and redirect to [`BASELINE_IFINDEX`].
pub const PROGRAM_BASELINE: &str = "fabriclb_baseline";
/// The baseline's fixed egress port: the loopback device, always present.
pub const BASELINE_IFINDEX: u32 = 1;
/// Bytes the benchmark programs save and restore: Ethernet plus the
/// longest IPv4 header, rounded up. Benchmark frames are at least this long.
pub const BENCH_RESTORE_LEN: usize = 96;
