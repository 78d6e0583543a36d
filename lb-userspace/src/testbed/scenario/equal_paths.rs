//! As many fat flows as equal paths: 8 or 16 spines of one rate, and a
//! ring of as many ranks, one QP per connection, each a flow of 256 KiB
//! messages sent at 80% of a spine's rate and followed by a pause longer
//! than the flowlet gap, as a collective's step waits for its neighbour.
//! Even is one flow per spine; the busiest spine's bytes over the mean
//! (`spine_mmr`) is what the choice among equals left, and a spine given
//! two flows overflows while another idles.

use std::time::Duration;

use super::Scenario;
use super::slow_spine::ring;
use crate::testbed::Queues;

/// What the spines carry in all, Mbit/s: the single-leaf testbed's 800,
/// so 8 and 16 spines cost the machine what 4 do.
const TOTAL_MBIT: u32 = 800;
/// A flow's rate while it sends, of its spine's.
const LOAD: f64 = 0.8;
const MESSAGE_BYTES: u32 = 256 << 10;
/// The pause after every message: longer than the scenarios' 25 ms
/// flowlet gap, so that each message is a flowlet of its own.
const PAUSE: Duration = Duration::from_millis(30);
/// Messages per flow at full length: about 1.3 s of sending over 8
/// spines, 2.2 s over 16.
pub const MESSAGES: u32 = 40;

/// `paths` spines (8 or 16) at [`TOTAL_MBIT`] / `paths` each, lossy, and
/// one fat flow per spine, `messages` each.
pub fn equal_paths(name: &'static str, paths: u32, messages: u32) -> Scenario {
    let mbit = TOTAL_MBIT / paths;
    let rates = vec![mbit; paths as usize];
    let mut scenario = ring(paths as usize, name, &rates, LOAD, Queues::Lossy, messages);
    let collective = &mut scenario.collective;
    collective.exchange.qps_per_connection = 1;
    collective.exchange.message_bytes = MESSAGE_BYTES;
    collective.pace.gap = PAUSE;
    scenario.workload = format!(
        "ring of {paths} ranks, one QP each: {paths} flows over {paths} spines at {mbit} \
         Mbit/s (lossy queues), each {messages} messages of 256 KiB sent at {:.0}% of a \
         spine's rate, a {} ms pause after each",
        LOAD * 100.0,
        PAUSE.as_millis()
    );
    scenario
}

/// QPs per connection in `simulate-16`: 64 over 16 spines.
pub const SIMULATE_QPS: u32 = 4;
/// Single-packet messages after each of `simulate-16`'s messages: what
/// per-packet mode sprays.
pub const SIMULATE_SMALL: u32 = 4;

/// `simulate-16`: [`equal_paths`] over 16 spines with
/// [`SIMULATE_QPS`] QPs per connection (64 flows, four to a spine on
/// average) and [`SIMULATE_SMALL`] single-packet messages after each
/// message; each row's spine shares set beside what `fabriclb simulate`
/// predicts from the leaf's config and the same collective.
pub fn simulate_16(messages: u32) -> Scenario {
    let mut scenario = equal_paths("simulate-16", 16, messages);
    let collective = &mut scenario.collective;
    collective.exchange.qps_per_connection = SIMULATE_QPS;
    collective.exchange.small_messages = SIMULATE_SMALL;
    scenario.workload = format!(
        "ring of 16 ranks, {SIMULATE_QPS} QPs per connection: 64 flows over 16 spines at 50 \
         Mbit/s (lossy queues), each rank {messages} messages of 256 KiB sent at {:.0}% of a \
         spine's rate, each followed by {SIMULATE_SMALL} single-packet messages and a {} ms \
         pause; beside each row, fabriclb simulate's prediction",
        LOAD * 100.0,
        PAUSE.as_millis()
    );
    scenario
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testbed::scenario::FRAME_BYTES;

    /// A flow per spine, each paced at 80% of its spine's rate.
    #[test]
    fn one_flow_per_spine() {
        for paths in [8, 16] {
            let scenario = equal_paths("equal-paths", paths, 10);
            let c = &scenario.collective;
            assert_eq!(scenario.shape.spines, paths as usize);
            assert_eq!(
                (scenario.shape.hosts, c.senders),
                (c.senders, paths as usize)
            );
            assert_eq!(
                (c.exchange.qps_per_connection, c.exchange.messages),
                (1, 10)
            );
            assert_eq!(scenario.shape.capacity_mbit(), Some(800));
            let pps = 0.8 * f64::from(800 / paths) * 1e6 / 8.0 / f64::from(FRAME_BYTES);
            assert_eq!(c.pace.rate_pps, Some(pps.round() as u64));
        }
    }
}
