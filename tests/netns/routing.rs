//! The testbed's own BGP (`--routing bgp`): FRR on the leaf, the spines
//! and the far leaf gives the leaf's kernel its multipath routes, and a
//! spine's session going down or into graceful shutdown takes the spine
//! out of them. The fabric the BGP scenarios stand on.

use anyhow::{Context, Result};
use fabriclb::testbed::frr::bgp_paths;
use fabriclb::testbed::scenario::{How, Name, Report, bgp_drain};
use fabriclb::testbed::{Leaf, Routing, Shape, receiver_addr};
use fabriclb::traffic::Exchange;

use crate::bed::{Bed, ring, ring_exchange, wait_for};

/// Next hops the leaf's kernel has for receiver 1's subnet, by spine.
fn leaf_paths(bed: &Bed) -> Result<usize> {
    let routes = bed.ip("leaf", &["route", "show", "proto", "bgp"])?;
    let [a, b, c, _] = receiver_addr(1).octets();
    Ok(bgp_paths(&routes, &format!("{a}.{b}.{c}.0/24")))
}

fn wait_for_paths(bed: &Bed, what: &str, paths: usize) -> Result<()> {
    wait_for(what, || Ok((leaf_paths(bed)? == paths).then_some(()))).map(drop)
}

#[test]
fn bgp_gives_the_leaf_every_spine_and_takes_a_drained_one_away() -> Result<()> {
    let bed = Bed::shaped(
        "G",
        Shape {
            hosts: 2,
            routing: Routing::Bgp,
            ..Shape::default()
        },
    );
    let routers = bed.testbed.routers().context("BGP routers")?;
    let spine = |j: usize| bed.testbed.ns(&format!("s{j}"));
    assert_eq!(leaf_paths(&bed)?, 4, "converged over every spine");
    let kernel = || {
        bed.collective(&fabriclb::testbed::Collective {
            exchange: Exchange {
                qps_per_connection: 16,
                messages: 64,
                ..ring_exchange()
            },
            leaf: Leaf::Kernel,
            ..ring(2, "")
        })
    };
    let run = kernel()?;
    assert_eq!(run.received.packets, run.sent_packets, "over BGP's routes");

    routers.set_spine_session(2, &spine(2), false)?;
    wait_for_paths(&bed, "spine 2's session down", 3)?;
    let run = kernel()?;
    assert_eq!(run.received.packets, run.sent_packets, "over three spines");
    routers.set_spine_session(2, &spine(2), true)?;
    wait_for_paths(&bed, "spine 2 back", 4)?;

    routers.set_spine_graceful_shutdown(3, &spine(3), true)?;
    wait_for_paths(&bed, "spine 3 in graceful shutdown", 3)?;
    let summary = routers.vtysh("leaf", &bed.testbed.ns("leaf"), &["show bgp summary"])?;
    // An established session's State/PfxRcd column is its prefix count.
    let established = summary
        .lines()
        .filter(|l| l.starts_with("198.18."))
        .filter(|l| {
            l.split_whitespace()
                .nth(9)
                .is_some_and(|f| f.parse::<u32>().is_ok())
        })
        .count();
    assert_eq!(
        established, 4,
        "every session stays up in graceful shutdown:\n{summary}"
    );
    routers.set_spine_graceful_shutdown(3, &spine(3), false)?;
    wait_for_paths(&bed, "spine 3 back", 4)?;
    Ok(())
}

/// The short `bgp-drain`: fabriclb on the leaf follows BGP's routes (its
/// config has none), a spine drained by session shutdown and by graceful
/// shutdown moves exactly the flows that were on it, nothing is lost at
/// the leaf (what a spine's queue dropped is counted as dropped), and the
/// JSON carries the fields.
#[test]
fn a_bgp_drain_moves_only_the_drained_spines_flows_and_loses_nothing() -> Result<()> {
    let scenario = bgp_drain(fabriclb::testbed::scenario::BGP_DRAIN_MESSAGES);
    let bed = Bed::shaped("D", scenario.shape.clone());
    let report = bed.scenario(&scenario, &Name::BgpDrain.modes())?;
    eprintln!("{report:#?}");
    let [row] = report.modes.as_slice() else {
        panic!("ECMP alone: {report:?}")
    };
    let d = row.drains().context("drains measured")?;
    assert_eq!(d.total_flows, 64, "{d:?}");
    assert_eq!(
        d.lost,
        row.dropped + row.link_lost,
        "lost at the leaf: {row:?}"
    );
    assert_eq!(row.unaccounted, 0, "{row:?}");
    let hows: Vec<How> = d.drains.iter().map(|x| x.how).collect();
    assert_eq!(hows, [How::SessionDown, How::GracefulShutdown]);
    for drain in &d.drains {
        assert!(drain.drained_flows > 0, "no flow on the spine: {drain:?}");
        assert_eq!(drain.moved_flows, drain.drained_flows, "{drain:?}");
        // Back, the spine takes back its own buckets: its flows return.
        assert_eq!(drain.rejoin_moved_flows, drain.drained_flows, "{drain:?}");
        assert!(drain.convergence_ms >= drain.kernel_ms, "{drain:?}");
    }
    let json = report.to_json();
    assert_eq!(Report::from_json(&json)?, report);
    let value: serde_json::Value = serde_json::from_str(&json)?;
    let mode = &value["modes"][0];
    for key in [
        "sent",
        "received",
        "lost",
        "total_flows",
        "in_message_reorders",
    ] {
        assert!(mode.get(key).is_some(), "{key} missing from {json}");
    }
    for key in ["convergence_ms", "kernel_ms", "moved_flows"] {
        assert!(
            mode["drains"][0].get(key).is_some(),
            "{key} missing from {json}"
        );
    }
    Ok(())
}
