//! `[ars_profile]`, `[telemetry]`, a group's `telemetry` and its next
//! hops' telemetry keys.

use lb_common::select::quality::Scale;

use super::{SWITCH, err, ok, warnings, with_group_key, with_next_hop, with_switch_key};
use crate::config::{ArsProfile, GroupTelemetry, TelemetrySettings};
use crate::telemetry::remote::Target;

/// A remote next hop's keys.
const REMOTE: &str = "ip = \"10.0.0.1\", telemetry_url = \"http://10.0.0.1:9100/metrics\", \
                      telemetry_device = \"eth9\"";

#[test]
fn defaults_weigh_the_queue_alone() {
    let config = ok(&with_group_key(""));
    assert_eq!(config.ars_profile, ArsProfile::default());
    assert_eq!(config.ars_profile.sampling_interval_us, 10_000);
    let q = config.ars_profile.quality;
    assert_eq!((q.past_load.weight, q.current_load.weight), (0, 0));
    assert_eq!((q.smoothing_us, q.worst_hold_us), (30_000, 20_000));
    assert_eq!(
        q.future_load,
        Scale {
            min: 2000,
            max: 10000,
            weight: 1
        }
    );
    assert_eq!(config.telemetry, TelemetrySettings::default());
    assert_eq!(
        (config.telemetry.stale_after_ms, config.telemetry.timeout_ms),
        (100, 50)
    );
    assert_eq!(config.groups[0].telemetry, None);
}

/// SONiC's names; loads in Mbit/s become bytes per second; a measure
/// given thresholds but no weight counts with weight 1.
#[test]
fn ars_profile_keys() {
    let text = format!(
        "{SWITCH}[ars_profile]\nalgorithm = \"ewma\"\nsampling_interval = 5000\n\
         ewma_time_constant = 120000\nworst_band_hold = 0\n\
         past_load_min_value = 100\npast_load_max_value = 900\n\
         future_load_min_value = 0\nfuture_load_max_value = 16384\nfuture_load_weight = 3\n\
         [telemetry]\nstale_after_ms = 30\ntimeout_ms = 5\n{}",
        &with_group_key("telemetry = \"linux\"")[SWITCH.len()..]
    );
    let config = ok(&text);
    let p = config.ars_profile;
    assert_eq!(p.sampling_interval_us, 5000);
    assert_eq!(
        (p.quality.smoothing_us, p.quality.worst_hold_us),
        (120_000, 0)
    );
    assert_eq!(
        p.quality.past_load,
        Scale {
            min: 12_500_000,
            max: 112_500_000,
            weight: 1
        }
    );
    assert_eq!(p.quality.current_load.weight, 0);
    assert_eq!(
        p.quality.future_load,
        Scale {
            min: 0,
            max: 16384,
            weight: 3
        }
    );
    assert_eq!(
        (config.telemetry.stale_after_ms, config.telemetry.timeout_ms),
        (30, 5)
    );
    assert_eq!(config.groups[0].telemetry, Some(GroupTelemetry::Linux));
}

#[test]
fn ars_profile_refusals() {
    let profile =
        |keys: &str| with_switch_key(&with_group_key(""), &format!("[ars_profile]\n{keys}"));
    assert_eq!(
        err(&profile("algorithm = \"max\"")),
        "configs/x.toml:4:13: unsupported ars_profile algorithm \"max\" (supported: \"ewma\")"
    );
    assert_eq!(
        err(&profile("sampling_interval = 16")),
        "configs/x.toml:4:21: ars_profile sampling_interval (microseconds) 16 is out of \
         range 1000..=1000000"
    );
    assert_eq!(
        err(&profile("ewma_time_constant = 20000000")),
        "configs/x.toml:4:22: ars_profile ewma_time_constant (microseconds) 20000000 is out \
         of range 0..=10000000"
    );
    assert_eq!(
        err(&profile("worst_band_hold = -1")),
        "configs/x.toml:4:19: ars_profile worst_band_hold (microseconds) -1 is out of range \
         0..=10000000"
    );
    assert_eq!(
        err(&profile(
            "future_load_min_value = 9000\nfuture_load_max_value = 9000"
        )),
        "configs/x.toml:5:25: ars_profile future_load_max_value must be above \
         future_load_min_value (9000 <= 9000, in the file's units)"
    );
    assert_eq!(
        err(&profile("future_load_weight = 0")),
        "configs/x.toml:3:1: ars_profile weighs nothing: past_load_weight, current_load_weight \
         and future_load_weight are all 0, so every path would always look idle"
    );
    assert_eq!(
        err(&profile("past_load_weight = 101")),
        "configs/x.toml:4:20: ars_profile past_load_weight 101 is out of range 0..=100"
    );
    let telemetry =
        |keys: &str| with_switch_key(&with_group_key(""), &format!("[telemetry]\n{keys}"));
    assert_eq!(
        err(&telemetry("stale_after_ms = 10")),
        "configs/x.toml:4:18: telemetry stale_after_ms 10 is not above the sampling interval \
         (10000 us): every path would always be stale"
    );
    assert_eq!(
        err(&telemetry("timeout_ms = 0")),
        "configs/x.toml:4:14: telemetry timeout_ms 0 is out of range 1..=10000"
    );
}

#[test]
fn remote_targets_per_next_hop() {
    let config =
        ok(&with_next_hop(REMOTE).replace("name = \"g\"", "name = \"g\"\ntelemetry = \"remote\""));
    assert_eq!(
        config.groups[0].telemetry,
        Some(GroupTelemetry::Remote {
            targets: vec![Target {
                url: "http://10.0.0.1:9100/metrics".into(),
                device: "eth9".into()
            }]
        })
    );
    // The keys do not change the next hop itself (its id stays on reload).
    assert_eq!(
        config.groups[0].next_hops,
        ok(&with_next_hop("ip = \"10.0.0.1\"")).groups[0].next_hops
    );
}

#[test]
fn telemetry_key_refusals() {
    assert_eq!(
        err(&with_group_key("telemetry = \"sflow\"")),
        "configs/x.toml:5:13: unknown telemetry source \"sflow\" \
         (sources: \"linux\", \"counters-db\", \"remote\")"
    );
    assert_eq!(
        err(&with_next_hop(REMOTE)),
        "configs/x.toml:5:69: telemetry_url is set but group \"g\" has no `telemetry` source"
    );
    let group = |source: &str, next_hop: &str| {
        with_next_hop(next_hop).replace(
            "name = \"g\"",
            &format!("name = \"g\"\ntelemetry = \"{source}\""),
        )
    };
    assert_eq!(
        err(&group(
            "remote",
            "ip = \"10.0.0.1\", telemetry_url = \"http://h:1/\""
        )),
        "configs/x.toml:6:14: next hop of group \"g\" (telemetry = \"remote\") needs \
         telemetry_url and telemetry_device"
    );
    assert_eq!(
        err(&group(
            "linux",
            "ip = \"10.0.0.1\", sonic_port = \"Ethernet0\""
        )),
        "configs/x.toml:6:66: sonic_port does not apply to group \"g\"'s telemetry = \"linux\""
    );
    assert_eq!(
        err(&group("counters-db", "ip = \"10.0.0.1\"")),
        "configs/x.toml:5:13: group \"g\" reads counters-db, but [telemetry] has no \
         counters_db address (e.g. \"unix:/var/run/redis/redis.sock\") and not every next hop \
         names its own"
    );
    // Each next hop its own switch's (the next switch's COUNTERS_DB).
    let own = ok(&group(
        "counters-db",
        "ip = \"10.0.0.1\", counters_db = \"redis://198.18.255.129:6379\", sonic_port = \"l2\"",
    ));
    let Some(GroupTelemetry::CountersDb { ports, switches }) = &own.groups[0].telemetry else {
        panic!("{:?}", own.groups[0].telemetry)
    };
    assert_eq!(ports, &["l2"]);
    assert_eq!(
        switches[0].as_ref().map(ToString::to_string).as_deref(),
        Some("redis://198.18.255.129:6379")
    );
    assert_eq!(
        err(&group(
            "counters-db",
            "ip = \"10.0.0.1\", counters_db = \"tcp://x\""
        )),
        "configs/x.toml:6:67: counters_db \"tcp://x\": expected `unix:/path/to/redis.sock` or \
         `redis://host:port`, got `tcp://x`"
    );
    assert_eq!(
        err(&group(
            "remote",
            "ip = \"10.0.0.1\", counters_db = \"redis://198.18.255.129:6379\""
        )),
        "configs/x.toml:6:67: counters_db does not apply to group \"g\"'s telemetry = \"remote\""
    );
}

/// `[ars_profile]` and `[telemetry]` only shape what sources read: with no
/// group reading one, each is warned about at its header.
#[test]
fn telemetry_tables_no_group_reads() {
    let tables = "[ars_profile]\nsampling_interval = 20000\n[telemetry]\ntimeout_ms = 10\n";
    let text = format!("{}{tables}", with_group_key(""));
    assert_eq!(
        warnings(&text),
        [
            "configs/x.toml:10:1: warning: [ars_profile] has no effect: no group has a \
             telemetry source",
            "configs/x.toml:12:1: warning: [telemetry] has no effect: no group has a \
             telemetry source",
        ]
    );
    let read = format!(
        "{}{tables}",
        with_group_key("mode = \"flowlet\"\ntelemetry = \"linux\"")
    );
    assert!(warnings(&read).is_empty());
}

/// Exporter devices and SONiC ports are names like group names: not
/// empty, at most 64 bytes.
#[test]
fn telemetry_names_are_bounded() {
    let long = "d".repeat(65);
    let remote = with_next_hop(&REMOTE.replace("\"eth9\"", &format!("\"{long}\"")))
        .replace("name = \"g\"", "name = \"g\"\ntelemetry = \"remote\"");
    assert_eq!(
        err(&remote),
        format!(
            "configs/x.toml:6:120: telemetry_device \"{}…\" (65 bytes) is 65 bytes long; \
             at most 64 are allowed",
            "d".repeat(64)
        )
    );
    let counters = with_next_hop("ip = \"10.0.0.1\", sonic_port = \"\"")
        .replace("name = \"g\"", "name = \"g\"\ntelemetry = \"counters-db\"")
        + "[telemetry]\ncounters_db = \"unix:/run/redis.sock\"\n";
    assert_eq!(err(&counters), "configs/x.toml:6:66: sonic_port is empty");
}
