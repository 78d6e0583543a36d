//! The testbed's own BGP (`--routing bgp`): FRR on the leaf, the spines
//! and the far leaf gives the leaf's kernel its multipath routes, and a
//! spine's session going down or into graceful shutdown takes the spine
//! out of them. The fabric the BGP scenarios stand on.

use anyhow::{Context, Result};
use fabriclb::testbed::frr::bgp_paths;
use fabriclb::testbed::{Leaf, Routing, Shape, receiver_addr};

use crate::bed::{Bed, ring, wait_for};

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
            qps_per_connection: 16,
            messages: 64,
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
