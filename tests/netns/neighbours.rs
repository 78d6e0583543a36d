//! The neighbours of next hops as the daemon keeps them: fresh under
//! traffic that only XDP forwards (which never confirms them), and a next
//! hop's new MAC learnt while its link stays up.

use fabriclb::testbed::{LeafCounters, UdpLoad, in_netns};

use crate::bed::{Bed, wait_for};

const NEW_MAC: &str = "02:42:00:00:33:33";

/// Spine 2 takes a new MAC on its leaf-facing interface while UDP flows
/// cross the leaf: the daemon's probes make the kernel learn it, the next
/// hop is rewritten with it, and a run after the change delivers every
/// datagram, spine 2 carrying its flows. Before the probes the leaf's
/// entry kept the old MAC and spine 2's flows were lost for good.
#[test]
fn a_next_hops_new_mac_is_learnt_while_its_link_stays_up() {
    let bed = Bed::up("v", 1);
    let daemon = bed
        .daemon(&bed.config(""), &["--refresh-interval-ms", "100"])
        .expect("fabriclb");
    let counters = || bed.counters(&daemon);
    let s2 = |c: &LeafCounters| c.spines[1].packets;
    let load = UdpLoad::start(&bed.testbed, 64).expect("traffic");
    wait_for("every spine carrying flows", || {
        let c = counters()?;
        Ok(c.spines.iter().all(|s| s.packets > 0).then_some(()))
    })
    .expect("traffic over every spine");

    // A MAC within a second (ARP's locktime) of the last one is ignored:
    // change it when that is over, as a real one would be.
    wait_for("spine 2's entry a second old", || {
        let entries = neighbours(&bed)?;
        Ok(entries
            .iter()
            .any(|n| n.dst == "198.18.2.2" && n.updated >= 2)
            .then_some(()))
    })
    .expect("entry settled");
    daemon.skip_log().expect("log");
    let changed = std::time::Instant::now();
    bed.ip("s2", &["link", "set", "leaf", "address", NEW_MAC])
        .expect("new MAC");
    let log = daemon
        .wait_for_log(&format!(
            "next hop changed next_hop=s2 198.18.2.2 usable=true was_usable=true mac={NEW_MAC}"
        ))
        .expect("the daemon learnt the new MAC");
    eprintln!("learnt after {:?}:\n{log}", changed.elapsed());
    let during = load.stop(&bed.testbed).expect("traffic");
    eprintln!("during the change: {during:?}");

    // The first run is over: these counters stay.
    let before = counters().expect("metrics");
    let load = UdpLoad::start(&bed.testbed, 64).expect("traffic");
    wait_for("spine 2 carrying flows after the change", || {
        Ok((s2(&counters()?) > s2(&before) + 1000).then_some(()))
    })
    .expect("spine 2 in use");
    let after_change = load.stop(&bed.testbed).expect("traffic");
    let (after, _) = wait_for("metrics counting the whole run", || {
        let c = counters()?;
        let reached_leaf = after_change.sent - after_change.drops.lost_in("h");
        Ok((c.forwarded - before.forwarded == reached_leaf).then_some(c))
    })
    .expect("every datagram that reached the leaf forwarded");
    eprintln!(
        "after the change: {after_change:?}; per spine {:?}",
        after
            .spines
            .iter()
            .zip(&before.spines)
            .map(|(a, b)| a.packets - b.packets)
            .collect::<Vec<_>>()
    );
    assert_eq!(
        after_change.received + after_change.drops.lost(),
        after_change.sent,
        "lost beyond the links' drops: {after_change:?}"
    );
    for (j, (a, b)) in after.spines.iter().zip(&before.spines).enumerate() {
        assert!(a.usable && a.packets > b.packets, "spine {}: {a:?}", j + 1);
    }
    let log = daemon.log().expect("log");
    assert!(!log.contains("cannot probe"), "{log}");
}

/// With the leaf's neighbour entries made to age in under a second (and to
/// go STALE at once, not DELAY), each next hop's entry stays REACHABLE,
/// without a change of state, for several times that while only XDP
/// forwards: the daemon's probes confirm it. Before the probes each went
/// STALE within a second of being resolved, and stayed so.
#[test]
fn next_hop_neighbours_stay_reachable_under_xdp_only_traffic() {
    let bed = Bed::up("y", 1);
    let spines = bed.testbed.shape().spines;
    in_netns(&bed.testbed.ns("leaf"), move || -> std::io::Result<()> {
        for j in 1..=spines {
            let dir = format!("/proc/sys/net/ipv4/neigh/s{j}");
            // Reachable for 250..750 ms after the last confirmation.
            std::fs::write(format!("{dir}/base_reachable_time_ms"), "500")?;
            std::fs::write(format!("{dir}/delay_first_probe_time"), "0")?;
        }
        Ok(())
    })
    .expect("netns")
    .expect("sysctl");
    let daemon = bed
        .daemon(&bed.config(""), &["--refresh-interval-ms", "100"])
        .expect("fabriclb");
    let load = UdpLoad::start(&bed.testbed, 64).expect("traffic");
    let (entries, took) = wait_for(
        "every next hop's entry REACHABLE for 3 s without a change",
        || {
            let entries = neighbours(&bed)?;
            let steady = entries.len() == spines
                && entries
                    .iter()
                    .all(|e| e.state == ["REACHABLE"] && e.updated >= 3);
            Ok(steady.then_some(entries))
        },
    )
    .unwrap_or_else(|e| panic!("{e:#}; now: {:?}", neighbours(&bed)));
    eprintln!("after {took:?}: {entries:?}");
    // Nothing the kernel forwarded confirmed them: XDP forwarded all.
    let report = load.stop(&bed.testbed).expect("traffic");
    let leaf = bed.fresh_counters(&daemon).expect("metrics");
    assert_eq!(
        leaf.forwarded,
        report.sent - report.drops.lost_in("h"),
        "{report:?}"
    );
}

/// One entry of `ip -j -s neigh`.
#[derive(Debug, serde::Deserialize)]
struct Neighbour {
    dst: String,
    state: Vec<String>,
    /// Seconds since the entry last changed state or MAC.
    updated: u64,
}

/// The leaf's entries for the spines' addresses.
fn neighbours(bed: &Bed) -> anyhow::Result<Vec<Neighbour>> {
    let json = bed.ip("leaf", &["-j", "-s", "-4", "neigh", "show"])?;
    let all: Vec<Neighbour> = serde_json::from_str(&json)?;
    // A spine's label is its interface at the leaf and its address.
    let spines: Vec<String> = (1..=bed.testbed.shape().spines)
        .filter_map(|j| Some(bed.testbed.spine_label(j).split_once(' ')?.1.to_owned()))
        .collect();
    Ok(all
        .into_iter()
        .filter(|n| spines.contains(&n.dst))
        .collect())
}
