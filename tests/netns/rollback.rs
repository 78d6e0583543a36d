//! A reload whose map writes fail part way puts back what it wrote: the
//! running tables stay, in the maps as in the daemon.

use anyhow::Context as _;
use fabriclb::config::parse_mac;
use fabriclb::testbed::{LeafMaps, leaf_ifindex};
use lb_common::limits::{MAX_EGRESS_PORTS, MAX_NEXTHOPS_PER_GROUP};

use crate::bed::{Bed, steady, wait_for};

/// Ports besides the four spines that fill the devmap.
const FILLER: u32 = MAX_EGRESS_PORTS - 4;

/// The leaf's config with the spine group's keys `group` and, in groups
/// no route uses, one next hop on each of the links `v1..v{FILLER}`, `last`
/// in place of the last: with the spines, as many egress ports as the
/// devmap holds.
fn full_config(bed: &Bed, group: &str, last: u32) -> String {
    let mut text = bed.config(group);
    let links: Vec<u32> = (1..FILLER).chain([last]).collect();
    for (i, chunk) in links.chunks(MAX_NEXTHOPS_PER_GROUP).enumerate() {
        text.push_str(&format!("[[group]]\nname = \"filler{i}\"\nnext_hops = [\n"));
        for v in chunk {
            text.push_str(&format!(
                "  {{ interface = \"v{v}\", mac = \"02:00:00:00:{:02x}:{:02x}\" }},\n",
                v / 256,
                v % 256
            ));
        }
        text.push_str("]\n");
    }
    text
}

/// Under ECMP traffic over the spines, with the devmap full, a config
/// that moves one filler next hop to a new port: the reload resolves the
/// next hops anew and writes them, then finds no room for the new port
/// (old ports are removed only after the new are in) and is refused. The
/// kernel had meanwhile learnt a wrong MAC for spine 2, which the refused
/// reload wrote into spine 2's next hop: unless it is put back, every
/// packet over spine 2 goes to a MAC nobody has and is lost. What spine 2
/// carried until the rollback is lost all the same: the maps are written
/// in place, so a refused reload is live until it is undone.
#[test]
fn a_reload_whose_map_writes_fail_leaves_the_running_tables() {
    let bed = Bed::up("b", 2);
    // Veth pairs inside the leaf, v1..v{FILLER + 1}: ports for next hops.
    let pairs: Vec<String> = (1..=FILLER + 1)
        .step_by(2)
        .map(|v| format!("link add v{v} type veth peer name v{}", v + 1))
        .collect();
    bed.ip_batch("leaf", &pairs).expect("filler links");
    let spine_mac = bed.ip("s2", &["-o", "link", "show", "leaf"]).expect("mac");
    let spine_mac = spine_mac
        .split_whitespace()
        .skip_while(|w| *w != "link/ether")
        .nth(1)
        .expect("spine 2's MAC")
        .to_owned();
    let neighbour = |mac: &str| {
        let args = ["neigh", "replace", "198.18.2.2", "lladdr", mac, "dev", "s2"];
        bed.ip("leaf", &[&args[..], &["nud", "permanent"]].concat())
    };

    // No refresh during the test: only a reload reads the neighbours.
    let args = ["--no-watch", "--refresh-interval-ms", "3600000"];
    let result = bed.collective_with(&steady(2), &args, |daemon| {
        daemon.reconfigure(&full_config(&bed, "", FILLER))?;
        daemon.wait_for_log("config reloaded")?;

        // Read before the wrong MAC goes in: its event rewrites the next
        // hop at once, and what goes to that MAC belongs in the window.
        let before = bed.counters(daemon)?;
        neighbour("02:00:00:00:99:99")?;
        daemon.reconfigure(&full_config(&bed, "mode = \"per-packet\"", FILLER + 1))?;
        let log = daemon.wait_for_log("new config refused")?;
        neighbour(&spine_mac)?;
        // The window ends once spine 2's next hop has its MAC back: the
        // neighbour event that puts it there is the daemon's to handle,
        // after `neighbour` returned (16 packets beyond it once in CI).
        let maps = LeafMaps::open(&bed.testbed)?;
        let s2 = leaf_ifindex(&bed.testbed, "s2")?;
        let mac = parse_mac(&spine_mac).context("spine 2's MAC")?;
        wait_for("spine 2's MAC back in its next hop", || {
            let ids = maps.next_hops_via(s2)?;
            let back = ids
                .iter()
                .all(|&id| maps.next_hop(id).is_ok_and(|n| n.dst_mac == mac));
            Ok((back && !ids.is_empty()).then_some(()))
        })?;
        anyhow::ensure!(
            log.contains(
                "new config refused, the running one stays: programming the maps: \
                 devmap entry for ifindex"
            ) && !log.contains("restoring the running tables"),
            "{log}"
        );
        // Written after the rollback: spine 2's packets since `before`
        // bound what went to the wrong MAC while the refused tables were
        // partly in the maps.
        let refused = bed.fresh_counters(daemon)?;
        let window = refused.spines[1].packets - before.spines[1].packets;
        let (after, _) = wait_for("traffic after the refused reload", || {
            let c = bed.counters(daemon)?;
            Ok((c.forwarded > refused.forwarded + 4_000).then_some(c))
        })?;
        anyhow::ensure!(
            after.mode == "ecmp" && after.sprayed == 0 && after.spines[1].usable,
            "the refused config is in force: {after:?}"
        );
        anyhow::ensure!(
            after.spines[1].packets > refused.spines[1].packets,
            "no flow over spine 2: {after:?}"
        );

        daemon.reconfigure(&bed.config("mode = \"per-packet\""))?;
        daemon.wait_for_log("config reloaded")?;
        wait_for("sprayed packets once per-packet applies", || {
            let c = bed.counters(daemon)?;
            Ok((c.mode == "per-packet" && c.sprayed > 0).then_some(()))
        })?;
        Ok(window)
    });
    let (report, window) = result.expect("run with a failing reload");
    eprintln!(
        "sent {}, received {}, window {window}; {}",
        report.sent_packets, report.received.packets, report.drops
    );
    // Without the rollback, everything over spine 2 from the refusal to
    // the end is lost: thousands of packets, not a window's few.
    let lost = report.sent_packets - report.received.packets;
    assert!(
        lost <= report.drops.lost() + window,
        "{lost} packets lost: more than the links dropped ({}) and spine 2 carried \
         while the refused reload was in the maps ({window})",
        report.drops
    );
    assert_eq!(
        report.leaf.forwarded,
        report.sent_packets - report.drops.lost_in("h")
    );
}
