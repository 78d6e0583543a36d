use std::collections::BTreeMap;
use std::path::Path;

use super::collective::CollectiveSpec;
use super::*;
use crate::config;
use crate::inspect::explain::explain;

/// Four spines, 500 us flowlet gap; `extra` adds group keys.
fn config(extra: &str) -> Config {
    config_and(extra, "")
}

/// [`config`] with `after` (overrides) after its route.
fn config_and(extra: &str, after: &str) -> Config {
    let text = format!(
        r#"
[switch]
hash_seed = 0x5eed
interfaces = ["h1"]

[[group]]
name = "spines"
mode = "ecmp"
flowlet_gap_us = 500
{extra}
next_hops = [
  {{ interface = "s1", mac = "02:00:00:00:00:01" }},
  {{ interface = "s2", mac = "02:00:00:00:00:02" }},
  {{ interface = "s3", mac = "02:00:00:00:00:03" }},
  {{ interface = "s4", mac = "02:00:00:00:00:04" }},
]

[[route]]
prefix = "198.19.0.0/16"
group = "spines"
{after}
"#
    );
    config::parse(&text, Path::new("simulate.toml")).expect("config")
}

fn run(config: &Config, mode: Mode, spec: &str, rates: &PathRates) -> Outcome {
    let spec: CollectiveSpec = spec.parse().expect("spec");
    let mut runs = run_modes(config, &[mode], &spec.frames(), rates, None).expect("simulation");
    runs.remove(0).outcome
}

fn rates(default: u64, slow: &[(&str, u64)]) -> PathRates {
    PathRates {
        default,
        by_interface: slow.iter().map(|(i, r)| (i.to_string(), *r)).collect(),
    }
}

fn packets(outcome: &Outcome) -> Vec<u64> {
    outcome.paths.iter().map(|p| p.packets).collect()
}

/// Eight fat flows, a message each per round and a pause longer than
/// the flowlet gap after it.
const RING: &str = "ranks=8,message=64KiB,messages=20,rate=10Gbit,gap=1ms";

/// ECMP's paths are explain's: each flow's packets on the next hop
/// explain names for its first frame.
#[test]
fn ecmp_sends_each_flow_where_explain_says() {
    let config = config("");
    let spec: CollectiveSpec = RING.parse().unwrap();
    let frames = spec.frames();
    let tables = Offline::build(&config).unwrap();
    let outcome = simulate(&tables, &frames, &rates(10_000_000_000, &[]), 0).unwrap();
    let mut expected: BTreeMap<String, u64> = BTreeMap::new();
    for f in &frames {
        let e = explain(&tables, &f.frame, 0, None, 0).unwrap();
        let (id, _) = e.next_hop.expect("a next hop");
        let spec = &tables.groups()[0].specs[id as usize];
        *expected.entry(spec.to_string()).or_default() += 1;
    }
    let got: BTreeMap<String, u64> = (outcome.paths.iter())
        .map(|p| (p.next_hop.clone(), p.packets))
        .collect();
    assert_eq!(got, expected);
    // 8 flows of 20 messages of 16 packets: the hash put 1, 3, 2 and 2
    // flows on the four spines.
    assert_eq!(packets(&outcome), [320, 960, 640, 640]);
    assert_eq!(outcome.busiest_over_mean(), Some(1.5));
    assert_eq!(outcome.verdicts, BTreeMap::from([("forwarded", 2560)]));
    assert_eq!((outcome.new_flowlets, outcome.flowlet_moves), (0, 0));
}

/// Flowlets spread what the hash piled on one spine: each message a
/// flowlet of its own, the first on ECMP's next hop, the moves all the
/// choice's, and no message reordered (a move waits for the pause).
#[test]
fn flowlets_spread_the_flows_ecmp_piled_up() {
    let outcome = run(
        &config(""),
        Mode::Flowlet,
        RING,
        &rates(10_000_000_000, &[]),
    );
    assert_eq!(outcome.new_flowlets, 8 * 20);
    assert!(outcome.flowlet_moves > 0, "{outcome:?}");
    assert_eq!(
        outcome.moves,
        BTreeMap::from([("choice", outcome.flowlet_moves)])
    );
    let busiest = outcome.busiest_over_mean().unwrap();
    assert!(busiest < 1.05, "{busiest} {outcome:?}");
    assert_eq!(outcome.reorders, 0);
}

/// Single-packet messages are self-contained: per-packet mode sprays
/// each, evenly over the four spines by the spray sequence.
#[test]
fn per_packet_sprays_single_packet_messages_evenly() {
    let spec = "ranks=8,message=4KiB,messages=200,rate=10Gbit";
    let outcome = run(
        &config(""),
        Mode::PerPacket,
        spec,
        &rates(10_000_000_000, &[]),
    );
    assert_eq!(outcome.sprayed, 1600);
    assert_eq!(packets(&outcome), [400; 4]);
    assert_eq!(outcome.reorders, 0);
}

/// Spraying every packet over a spine at a fifth of the others' rate
/// reorders messages, which flowlets do not; seven ranks, so that the
/// spray sequence does not give each flow one spine of its own.
#[test]
fn spraying_over_a_slow_spine_reorders_messages_and_flowlets_do_not() {
    let config = config(r#"spray = "all""#);
    let spec = "ranks=7,message=64KiB,messages=20,rate=10Gbit,gap=1ms";
    let slow = rates(25_000_000_000, &[("s4", 5_000_000_000)]);
    let sprayed = run(&config, Mode::PerPacket, spec, &slow);
    assert_eq!(sprayed.sprayed, sprayed.sent_packets);
    assert!(sprayed.reorders > 500, "{sprayed:?}");
    let flowlets = run(&config, Mode::Flowlet, spec, &slow);
    assert_eq!(flowlets.reorders, 0);
    // s4 sent its quarter of the bytes at a fifth of the rate: it ends
    // the run, later than the four equal links of the same traffic.
    let equal = run(&config, Mode::PerPacket, spec, &rates(25_000_000_000, &[]));
    assert!(sprayed.completion_ns > equal.completion_ns, "{sprayed:?}");
}

/// Traffic no route covers is counted by its verdict, and a rate for an
/// interface the config does not use is refused by name.
#[test]
fn unrouted_traffic_and_unknown_interfaces_are_reported() {
    let outcome = run(
        &config(""),
        Mode::Ecmp,
        "ranks=2,message=4KiB,messages=3,dst=10.9.0.1",
        &rates(10_000_000_000, &[]),
    );
    assert_eq!(outcome.verdicts, BTreeMap::from([("no_route", 6)]));
    assert!(outcome.paths.is_empty());
    let spec: CollectiveSpec = RING.parse().unwrap();
    let error = run_modes(
        &config(""),
        &[Mode::Ecmp],
        &spec.frames(),
        &rates(1_000_000_000, &[("s9", 1_000_000_000)]),
        None,
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "a path rate for interface \"s9\", which no next hop of the config uses"
    );
}

/// An override on an ingress port pins what comes in there: with
/// `--ingress h1` every flow takes its member, without it none matches
/// and ECMP's hash stands; an unknown ingress is refused by name. The
/// config's interfaces need not exist on this machine.
#[test]
fn an_override_on_the_ingress_pins_what_comes_in_there() {
    let config = config_and(
        "",
        r#"
[[override]]
name = "ring-to-s3"
dst = "198.19.0.0/16"
ingress = "h1"
next_hop = { interface = "s3", mac = "02:00:00:00:00:03" }
"#,
    );
    let spec: CollectiveSpec = RING.parse().unwrap();
    let rates = rates(10_000_000_000, &[]);
    let run = |ingress| {
        let runs = run_modes(&config, &[Mode::Ecmp], &spec.frames(), &rates, ingress);
        runs.map(|mut runs| packets(&runs.remove(0).outcome))
    };
    assert_eq!(run(Some("h1")).unwrap(), [0, 0, 2560, 0]);
    assert_eq!(run(None).unwrap(), [320, 960, 640, 640]);
    assert_eq!(
        run(Some("h9")).unwrap_err().to_string(),
        "ingress \"h9\" is not one of the config's interfaces"
    );
}
