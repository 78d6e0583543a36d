//! The slow-spine scenario, short: its measurements come from the fabric.

use fabriclb::testbed::Queues;
use fabriclb::testbed::scenario::{Report, SLOW_SPINE_RATES_MBIT, modes, slow_spine};

use crate::bed::Bed;

/// ECMP over four spines, one at a quarter of the others' rate, lossy
/// queues, offered 80% of the total capacity: the slow spine gets about a
/// quarter of the traffic and drops what it cannot carry. Every packet
/// sent is received or counted as dropped by a queue (or a testbed link),
/// the slow spine's queue holds the longest delay, and the collective
/// takes longer than a capacity-weighted split would. The report survives
/// a JSON round trip with the field names scripts read.
#[test]
fn slow_spine_drops_at_the_slow_spine_and_completes_late() {
    let messages = 120;
    let scenario = slow_spine(Queues::Lossy, messages);
    let bed = Bed::shaped("s", scenario.shape.clone());
    let ecmp = modes().into_iter().take(1).collect::<Vec<_>>();
    let report = bed.scenario(&scenario, &ecmp).expect("scenario run");
    eprintln!("{report:#?}");
    assert_eq!(report.scenario, "slow-spine");
    let [row] = report.modes.as_slice() else {
        panic!("one row per mode: {report:?}")
    };
    assert_eq!((row.mode.as_str(), row.telemetry), ("ecmp", false));
    // 4 ranks x 1 connection x messages x 32 packets of 64 KiB.
    assert_eq!(row.sent, 4 * u64::from(messages) * 32);
    assert!(row.dropped > 0, "nothing dropped: {row:?}");
    assert_eq!(
        row.received,
        row.sent - row.dropped - row.link_lost,
        "packets neither received nor counted as dropped: {row:?}"
    );
    // In bytes a fast spine's lossy queue may hold as much as the slow
    // one's (its 20 ms limit is 4 times the bytes, and bursts reach it);
    // in time, backlog over rate, the slow spine's is the longest.
    let slow = SLOW_SPINE_RATES_MBIT.len() - 1;
    let delay = |j: usize| row.max_queue_bytes[j] as f64 / f64::from(SLOW_SPINE_RATES_MBIT[j]);
    for j in 0..slow {
        assert!(
            delay(j) < delay(slow),
            "spine {} queued longer: {row:?}",
            j + 1
        );
    }
    assert!(row.completion_ms > row.ideal_ms, "{row:?}");
    let shares: f64 = row.spine_share.iter().sum();
    assert!((shares - 1.0).abs() < 1e-9, "{row:?}");

    let json = report.to_json();
    assert_eq!(Report::from_json(&json).expect("parses"), report);
    let value: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    let keys: Vec<&str> = value["modes"][0]
        .as_object()
        .expect("a mode is an object")
        .keys()
        .map(String::as_str)
        .collect();
    for key in [
        "mode",
        "telemetry",
        "sent",
        "received",
        "dropped",
        "completion_ms",
        "ideal_ms",
        "in_message_reorders",
        "spine_share",
    ] {
        assert!(keys.contains(&key), "{key} missing from {json}");
    }
}
