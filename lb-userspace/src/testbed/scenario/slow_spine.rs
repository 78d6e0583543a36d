//! A fabric with a slow spine: four spines, one at a quarter of the
//! others' rate, and a ring all-reduce offering 80% of the fabric's total
//! capacity. A balancer blind to capacity sends the slow spine a quarter
//! of the traffic, where its share of the capacity is 50/650 = 7.7%.
//!
//! Its variant `spine-slowdown` starts with four equal spines and slows
//! the last one to a quarter mid-run, to time the leaf's reaction;
//! `cross-traffic` fills one of four equal spines from outside the leaf's
//! view.

use std::time::Duration;

use super::Cross;
use super::reaction::RateChange;
use super::{FRAME_BYTES, Scenario};
use crate::testbed::{Collective, Leaf, Queues, ROCE_MTU, Routing, Shape};
use crate::traffic::{Exchange, Pace, Pattern};

/// Spine rates, Mbit/s.
pub const RATES_MBIT: [u32; 4] = [200, 200, 200, 50];
/// Offered load as a share of the fabric's capacity.
const LOAD: f64 = 0.8;
/// Messages per connection at full length: about 1.7 s of sending.
pub const MESSAGES: u32 = 400;
const MESSAGE_BYTES: u32 = 65536;
const QPS: u32 = 16;

/// Spine rates before the slowdown, Mbit/s.
pub(super) const EVEN_RATES_MBIT: [u32; 4] = [200; 4];
/// Offered load of the slowdown, as a share of the capacity before it:
/// 74% of what is left after it.
const SLOWDOWN_LOAD: f64 = 0.6;
/// When the last spine slows down, from the senders' start: about 40% of
/// the run at full length.
const SLOWDOWN_AFTER: Duration = Duration::from_millis(800);
/// The spine the cross traffic fills, and how much.
const CROSS_SPINE: usize = 2;
const CROSS_MBIT: u32 = 150;

/// The slow-spine scenario with `queues`, `messages` per connection.
pub fn slow_spine(queues: Queues, messages: u32) -> Scenario {
    let name = match queues {
        Queues::Lossy => "slow-spine",
        Queues::Lossless => "slow-spine-lossless",
    };
    ring(RANKS, name, &RATES_MBIT, LOAD, queues, messages)
}

/// `slow-spine` on the testbed run by BGP: the leaf's group follows the
/// kernel's BGP routes, no next hop is written in its config, and the
/// telemetry rows make each learned next hop's target from the group's
/// templates.
pub fn bgp_slow_spine(messages: u32) -> Scenario {
    let mut scenario = ring(
        RANKS,
        "bgp-slow-spine",
        &RATES_MBIT,
        LOAD,
        Queues::Lossy,
        messages,
    );
    scenario.shape.routing = Routing::Bgp;
    Scenario {
        workload: format!(
            "{}; routes from BGP, no next hop in the leaf's config",
            scenario.workload
        ),
        ..scenario
    }
}

/// Four equal spines, the last slowed to a quarter mid-run; lossy queues,
/// `messages` per connection.
pub fn spine_slowdown(messages: u32) -> Scenario {
    let change = RateChange {
        spine: EVEN_RATES_MBIT.len(),
        rate_mbit: RATES_MBIT[RATES_MBIT.len() - 1],
        after: SLOWDOWN_AFTER,
    };
    let scenario = ring(
        RANKS,
        "spine-slowdown",
        &EVEN_RATES_MBIT,
        SLOWDOWN_LOAD,
        Queues::Lossy,
        messages,
    );
    Scenario {
        workload: format!(
            "{}; spine {} slows to {} Mbit/s {} ms into the run",
            scenario.workload,
            change.spine,
            change.rate_mbit,
            change.after.as_millis()
        ),
        change: Some(change),
        ..scenario
    }
}

/// Four equal spines, one of them carrying [`CROSS_MBIT`] of traffic the
/// leaf never sees (another leaf's, say); the collective offers 80% of
/// what is left, as in `slow-spine`. Lossy queues, `messages` per
/// connection. What the leaf forwards cannot tell that spine apart: only
/// its queue, read from the spine, can.
pub fn cross_traffic(messages: u32) -> Scenario {
    let cross = Cross {
        spine: CROSS_SPINE,
        mbit: CROSS_MBIT,
    };
    let left: u32 = EVEN_RATES_MBIT.iter().sum::<u32>() - CROSS_MBIT;
    let all: u32 = EVEN_RATES_MBIT.iter().sum();
    let load = LOAD * f64::from(left) / f64::from(all);
    let scenario = ring(
        RANKS,
        "cross-traffic",
        &EVEN_RATES_MBIT,
        load,
        Queues::Lossy,
        messages,
    );
    Scenario {
        workload: format!(
            "{}; {CROSS_MBIT} Mbit/s of UDP from outside the leaf's view through spine \
             {CROSS_SPINE}",
            scenario.workload
        ),
        cross: Some(cross),
        ..scenario
    }
}

/// The single-leaf scenarios' ring: four ranks.
pub(super) const RANKS: usize = 4;

/// A ring all-reduce of `hosts` ranks over spines of `rates`, offering
/// `load` of their sum.
pub(super) fn ring(
    hosts: usize,
    name: &'static str,
    rates: &[u32],
    load: f64,
    queues: Queues,
    messages: u32,
) -> Scenario {
    let capacity_bps: f64 = rates.iter().map(|&r| f64::from(r) * 1e6).sum();
    // Each of the ring's senders offers an equal part of the load.
    let rate_pps = load * capacity_bps / 8.0 / hosts as f64 / f64::from(FRAME_BYTES);
    let queue_line = match queues {
        Queues::Lossy => "lossy queues (TBF, tail drop past 20 ms + 64 KB at the rate)",
        Queues::Lossless => "lossless-like queues (TBF limit no run fills)",
    };
    Scenario {
        name,
        shape: Shape {
            hosts,
            spines: rates.len(),
            spine_rates_mbit: rates.to_vec(),
            queues,
            ..Shape::default()
        },
        change: None,
        cross: None,
        flap: None,
        drain: None,
        collective: Collective {
            exchange: Exchange {
                pattern: Pattern::Ring,
                qps_per_connection: QPS,
                message_bytes: MESSAGE_BYTES,
                mtu: ROCE_MTU,
                source_port_per_qp: true,
                messages,
                small_messages: 0,
            },
            pace: Pace {
                rate_pps: Some(rate_pps.round() as u64),
                gap: Duration::ZERO,
                spread: false,
            },
            senders: hosts,
            leaf: Leaf::Fabriclb {
                group: String::new(),
            },
        },
        workload: format!(
            "ring all-reduce, {hosts} ranks, {QPS} QPs per connection each with its own UDP \
             source port, {messages} messages of 64 KiB per connection, {rate_pps:.0} packets/s \
             per sender ({:.0}% of {:.0} Mbit/s); spines at {rates:?} Mbit/s, {queue_line}",
            load * 100.0,
            capacity_bps / 1e6,
        ),
    }
}
