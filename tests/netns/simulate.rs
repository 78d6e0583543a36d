//! `fabriclb simulate` against the testbed: the same leaf config and
//! collective, run in memory and through the leaf.

use std::process::Command;

use fabriclb::testbed::scenario::{Name, equal_paths, simulated};

use crate::bed::{Bed, fabriclb};

/// `simulate-16` at full length (a shorter run varies more from run to
/// run, simulated or not): 64 QPs over 16 equal spines. ECMP's shares are
/// the simulation's to the byte (the same five-tuples, seed and hash);
/// flowlet and per-packet rows differ by 1.4-2.4 points of share at most
/// per spine at full length (four runs), where two testbed runs of one
/// row differ by 1.1-3.8 points: the two CPUs' per-CPU state and their
/// timing are what the one-CPU simulation leaves out. `simulate` on the
/// command line says what the scenario's simulation said.
#[test]
fn simulate_predicts_the_testbeds_spine_shares() {
    let scenario = equal_paths::simulate_16(equal_paths::MESSAGES);
    let bed = Bed::shaped_alone("sm", scenario.shape.clone());
    let rows = Name::Simulate16.modes();
    let report = bed.scenario(&scenario, &rows).expect("scenario run");
    eprintln!("{report:#?}");
    let names: Vec<&str> = report.modes.iter().map(|m| m.mode.as_str()).collect();
    assert_eq!(names, ["ecmp", "flowlet", "per-packet"]);
    for row in &report.modes {
        let sim = row.simulated.as_ref().expect("every row simulated");
        assert_eq!(sim.spine_share.len(), 16, "{row:?}");
        let tolerance = if row.mode == "ecmp" { 0.0005 } else { 0.035 };
        assert!(sim.share_gap <= tolerance, "{}: {sim:?}", row.mode);
    }
    let ecmp = &report.modes[0];
    let sim = ecmp.simulated.as_ref().unwrap();
    assert!((sim.spine_mmr - ecmp.spine_mmr).abs() < 0.01, "{ecmp:?}");
    assert_eq!(sim.flowlet_moves, 0);

    // The command line, on the leaf's ECMP config and the scenario's
    // collective as `--collective` spells it.
    let config = bed.workdir().join("simulate-leaf.toml");
    std::fs::write(&config, bed.testbed.leaf_config(&rows[0].group)).expect("config");
    let output = Command::new(fabriclb())
        .arg("simulate")
        .arg("--config")
        .arg(&config)
        .args(["--collective", &simulated::spec(&scenario).describe()])
        .args(["--mode", "ecmp", "--path-rate", "50Mbit", "--json"])
        .output()
        .expect("fabriclb simulate");
    assert!(output.status.success(), "{output:?}");
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let row = &json["modes"][0];
    assert_eq!(row["mode"], "ecmp");
    assert_eq!(row["sent"], ecmp.sent);
    let shares: Vec<f64> = (row["paths"].as_array().expect("paths").iter())
        .map(|p| p["share"].as_f64().expect("share"))
        .collect();
    assert_eq!(shares, sim.spine_share);
}
