//! The neighbours of next hops as the daemon keeps them: fresh under
//! traffic that only XDP forwards (which never confirms them), and a next
//! hop's new MAC learnt while its link stays up.

use std::time::{Duration, Instant};

use fabriclb::testbed::{Daemon, LeafCounters, UdpLoad, in_netns};

use crate::bed::{Bed, wait_for};

const NEW_MAC: &str = "02:42:00:00:33:33";
/// How long a next hop's share may be lost to a MAC change: the probe
/// interval (50 ms by default) and the answer's way back, with room.
const FOLLOW_WITHIN: Duration = Duration::from_millis(100);

/// Spine 2 takes a new MAC on its leaf-facing interface, unannounced,
/// while UDP flows cross the leaf, at the daemon's default settings: its
/// probes make the kernel learn it, the next hop is rewritten with it
/// (said once), and what spine 2's flows lost is at most what they carry
/// in [`FOLLOW_WITHIN`]. With probes riding on the 10 s refresh the flows
/// were lost for the rest of the run.
#[test]
fn a_next_hops_new_mac_is_followed_within_a_probe_interval() {
    let bed = Bed::up_alone("v", 1);
    let daemon = bed.daemon(&bed.config(""), &[]).expect("fabriclb");
    mac_change(&bed, &daemon, |bed| {
        bed.ip("s2", &["link", "set", "leaf", "address", NEW_MAC])
            .map(drop)
    });
}

/// The same, the spine announcing its new MAC with a gratuitous ARP
/// (`arp_notify`), and the daemon probing only every ten minutes: the
/// kernel takes the announcement at once, and its event rewrites the
/// next hop.
#[test]
fn a_next_hops_announced_mac_is_taken_at_once() {
    let bed = Bed::up_alone("V", 1);
    let daemon = bed
        .daemon(&bed.config(""), &["--probe-interval-ms", "600000"])
        .expect("fabriclb");
    in_netns(&bed.testbed.ns("s2"), || {
        std::fs::write("/proc/sys/net/ipv4/conf/leaf/arp_notify", "1")
    })
    .expect("netns")
    .expect("arp_notify");
    mac_change(&bed, &daemon, |bed| {
        bed.ip("s2", &["link", "set", "leaf", "address", NEW_MAC])
            .map(drop)
    });
}

/// Runs UDP flows over every spine, applies `change` to spine 2's MAC and
/// checks that the leaf followed it: one log line, every datagram not
/// lost on the links received but for at most [`FOLLOW_WITHIN`] of spine
/// 2's share, and spine 2 carrying flows afterwards.
fn mac_change(bed: &Bed, daemon: &Daemon, change: impl FnOnce(&Bed) -> anyhow::Result<()>) {
    let counters = || bed.counters(daemon);
    let s2 = |c: &LeafCounters| c.spines[1].packets;
    // A MAC within a second (ARP's locktime) of the last one is ignored:
    // change it when that is over, as a real one would be.
    wait_for("spine 2's entry a second old", || {
        let entries = neighbours(bed)?;
        Ok(entries
            .iter()
            .any(|n| n.dst == "198.18.2.2" && n.updated >= 2)
            .then_some(()))
    })
    .expect("entry settled");
    let before = counters().expect("metrics");
    let started = Instant::now();
    let load = UdpLoad::start(&bed.testbed, 64).expect("traffic");
    wait_for("spine 2 carrying flows", || {
        Ok((s2(&counters()?) > s2(&before) + 2000).then_some(()))
    })
    .expect("traffic over spine 2");
    daemon.skip_log().expect("log");
    change(bed).expect("new MAC");
    let line = format!(
        "next hop changed next_hop=s2 198.18.2.2 usable=true was_usable=true mac={NEW_MAC}"
    );
    daemon
        .wait_for_log(&line)
        .expect("the daemon learnt the new MAC");
    let mark = counters().expect("metrics");
    wait_for("spine 2 carrying flows after the change", || {
        Ok((s2(&counters()?) > s2(&mark) + 2000).then_some(()))
    })
    .expect("spine 2 in use");
    // Before the receiver waits out what was lost.
    let took = started.elapsed();
    let report = load.stop(&bed.testbed).expect("traffic");
    let (after, _) = wait_for("metrics counting the whole run", || {
        let c = counters()?;
        let reached_leaf = report.sent - report.drops.lost_in("h");
        Ok((c.forwarded - before.forwarded == reached_leaf).then_some(c))
    })
    .expect("every datagram that reached the leaf forwarded");
    let carried = s2(&after) - s2(&before);
    // Spine 2's rate over the run, what it carries in FOLLOW_WITHIN.
    let budget = carried as f64 * FOLLOW_WITHIN.as_secs_f64() / took.as_secs_f64();
    let lost = report.sent - report.received - report.drops.lost();
    eprintln!("{report:?}; spine 2 carried {carried} in {took:?}; lost {lost}, budget {budget:.0}");
    assert!(
        (lost as f64) <= budget,
        "lost {lost} to the MAC change, more than spine 2 carries in {FOLLOW_WITHIN:?} ({budget:.0})"
    );
    let log = daemon.log().expect("log");
    assert_eq!(log.matches(&line).count(), 1, "{log}");
    assert!(!log.contains("cannot probe"), "{log}");
}

/// With the leaf's neighbour entries made to age in under a second (and to
/// go STALE at once, not DELAY), each next hop's entry stays REACHABLE,
/// without a change of state, for several times that while only XDP
/// forwards: the daemon's probes, at its default interval, confirm it. Before the probes each went
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
    let daemon = bed.daemon(&bed.config(""), &[]).expect("fabriclb");
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
