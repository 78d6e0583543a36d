use super::*;
use crate::config::NextHopAddr;

/// The daemon's state the literal file renders.
const DAEMON: DaemonSample = DaemonSample {
    last_reload_successful: false,
    last_reload_success_seconds: 1764316800.25,
    flowlet_capacity: 65536,
    flowlet_entries: 12032,
};

/// One group of two next hops, with counters.
fn rendered() -> String {
    let mut verdicts = [VerdictCount::default(); Reason::COUNT as usize];
    verdicts[Reason::Forwarded as usize] = VerdictCount {
        packets: 7,
        bytes: 7 * 1082,
    };
    verdicts[Reason::NoNextHop as usize] = VerdictCount {
        packets: 1,
        bytes: 64,
    };
    let groups = [GroupSample {
        name: "spines",
        mode: Mode::Flowlet.code(),
        stats: GroupStats {
            new_flowlets: 6,
            flowlet_moves: 2,
            sprayed: 0,
            pinned: 7,
        },
    }];
    let specs = [
        NextHopSpec {
            interface: "eth1".into(),
            addr: NextHopAddr::Ip("10.0.2.2".parse().expect("address")),
            vlan: None,
        },
        NextHopSpec {
            interface: "eth2".into(),
            addr: NextHopAddr::Mac([2, 0, 0, 0, 0, 1]),
            vlan: Some(7),
        },
    ];
    let nexthops = [
        NextHopSample {
            group: "spines",
            spec: &specs[0],
            usable: true,
            stats: NextHopStats {
                packets: 5,
                bytes: 640,
                sprayed: 0,
                ..NextHopStats::default()
            },
            quality: 384,
            path: Some(PathSample {
                source: "remote",
                band: 5,
                queued_bytes: 52000,
                drains_at_bytes: 5_000_000,
                age_seconds: 0.0041,
                errors: 3,
                stale: false,
            }),
            destinations: vec![DestinationSample {
                name: "leaf3",
                quality: 128,
                path: Some(PathSample {
                    source: "remote",
                    band: 7,
                    queued_bytes: 90000,
                    drains_at_bytes: 1_250_000,
                    age_seconds: 0.0041,
                    errors: 0,
                    stale: false,
                }),
            }],
        },
        NextHopSample {
            group: "spines",
            spec: &specs[1],
            usable: false,
            stats: NextHopStats {
                packets: 2,
                bytes: 256,
                sprayed: 0,
                ..NextHopStats::default()
            },
            quality: 1024,
            path: None,
            destinations: Vec::new(),
        },
    ];
    let egress = [
        EgressSample {
            interface: "eth1".into(),
            tx_errors: TxErrors {
                refused: 4,
                dropped: 0,
            },
        },
        EgressSample {
            interface: "eth2".into(),
            tx_errors: TxErrors {
                refused: 0,
                dropped: 9,
            },
        },
    ];
    let overrides = [OverrideSample {
        name: "pin-qp",
        group: "spines",
        stats: OverrideStats {
            packets: 3,
            bytes: 384,
            fallbacks: 1,
        },
    }];
    let published = BTreeMap::from([
        (
            ("spines".into(), "flowlet_move".into(), "failover".into()),
            12,
        ),
        (
            ("spines".into(), "next_hop_down".into(), "unusable".into()),
            1,
        ),
    ]);
    let events = EventsSample {
        published: &published,
        unsent: EventBudget {
            over_budget: 40,
            ring_full: 2,
            ..EventBudget::default()
        },
    };
    render(
        &DAEMON,
        &events,
        &verdicts,
        &groups,
        &nexthops,
        &overrides,
        Some(&egress),
    )
}

/// The whole file, spelled out: dashboards and alerts match these
/// names, labels and their order literally, so a change here must be
/// a deliberate one.
#[test]
fn renders_literal_metric_names_and_labels() {
    let build = format!(
        "fabriclb_build_info{{version=\"{}\",commit=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION"),
        crate::COMMIT
    );
    let expected = r#"# HELP fabriclb_build_info The running build (always 1).
# TYPE fabriclb_build_info gauge
BUILD
# HELP fabriclb_config_last_reload_successful 1 when the last attempt to load the config (at start or a reload) took it, 0 when it was refused and the config before it stays.
# TYPE fabriclb_config_last_reload_successful gauge
fabriclb_config_last_reload_successful 0
# HELP fabriclb_config_last_reload_success_timestamp_seconds When the config in force was taken, in seconds since the Unix epoch.
# TYPE fabriclb_config_last_reload_success_timestamp_seconds gauge
fabriclb_config_last_reload_success_timestamp_seconds 1764316800.250
# HELP fabriclb_flowlet_table_capacity Entries of the flowlet table (switch.flowlet_table_size when the program was loaded).
# TYPE fabriclb_flowlet_table_capacity gauge
fabriclb_flowlet_table_capacity 65536
# HELP fabriclb_flowlet_table_entries Flowlet table entries a flow of a group in force holds, estimated from 1024 entries spread evenly over the table; past about half the capacity, new flows often share an entry with another.
# TYPE fabriclb_flowlet_table_entries gauge
fabriclb_flowlet_table_entries 12032
# HELP fabriclb_packets_total Packets seen by the XDP program, by verdict reason.
# TYPE fabriclb_packets_total counter
fabriclb_packets_total{reason="forwarded"} 7
fabriclb_packets_total{reason="not_ip"} 0
fabriclb_packets_total{reason="not_unicast"} 0
fabriclb_packets_total{reason="no_route"} 0
fabriclb_packets_total{reason="ttl_expired"} 0
fabriclb_packets_total{reason="no_nexthop"} 1
fabriclb_packets_total{reason="unsupported"} 0
fabriclb_packets_total{reason="l4_truncated"} 0
fabriclb_packets_total{reason="l2_truncated"} 0
fabriclb_packets_total{reason="l3_malformed"} 0
fabriclb_packets_total{reason="local"} 0
fabriclb_packets_total{reason="other_host"} 0
# HELP fabriclb_bytes_total Bytes of the frames seen by the XDP program as it left them, by verdict reason.
# TYPE fabriclb_bytes_total counter
fabriclb_bytes_total{reason="forwarded"} 7574
fabriclb_bytes_total{reason="not_ip"} 0
fabriclb_bytes_total{reason="not_unicast"} 0
fabriclb_bytes_total{reason="no_route"} 0
fabriclb_bytes_total{reason="ttl_expired"} 0
fabriclb_bytes_total{reason="no_nexthop"} 64
fabriclb_bytes_total{reason="unsupported"} 0
fabriclb_bytes_total{reason="l4_truncated"} 0
fabriclb_bytes_total{reason="l2_truncated"} 0
fabriclb_bytes_total{reason="l3_malformed"} 0
fabriclb_bytes_total{reason="local"} 0
fabriclb_bytes_total{reason="other_host"} 0
# HELP fabriclb_group_mode The mode a group runs in (1 for the current one).
# TYPE fabriclb_group_mode gauge
fabriclb_group_mode{group="spines",mode="ecmp"} 0
fabriclb_group_mode{group="spines",mode="flowlet"} 1
fabriclb_group_mode{group="spines",mode="per-packet"} 0
# HELP fabriclb_group_new_flowlets_total Flowlets started (a flow's first included).
# TYPE fabriclb_group_new_flowlets_total counter
fabriclb_group_new_flowlets_total{group="spines"} 6
# HELP fabriclb_group_flowlet_moves_total New flowlets that took a different next hop than their flow had.
# TYPE fabriclb_group_flowlet_moves_total counter
fabriclb_group_flowlet_moves_total{group="spines"} 2
# HELP fabriclb_group_sprayed_packets_total Packets that picked their own next hop (per-packet mode).
# TYPE fabriclb_group_sprayed_packets_total counter
fabriclb_group_sprayed_packets_total{group="spines"} 0
# HELP fabriclb_group_pinned_packets_total Packets that followed their flowlet (flowlet and per-packet modes).
# TYPE fabriclb_group_pinned_packets_total counter
fabriclb_group_pinned_packets_total{group="spines"} 7
# HELP fabriclb_override_packets_total Packets an override matched and sent to its next hop.
# TYPE fabriclb_override_packets_total counter
fabriclb_override_packets_total{override="pin-qp",group="spines"} 3
# HELP fabriclb_override_bytes_total Bytes an override matched and sent to its next hop (as received).
# TYPE fabriclb_override_bytes_total counter
fabriclb_override_bytes_total{override="pin-qp",group="spines"} 384
# HELP fabriclb_override_fallbacks_total Packets an override matched while its next hop was unusable: they took the group's own choice.
# TYPE fabriclb_override_fallbacks_total counter
fabriclb_override_fallbacks_total{override="pin-qp",group="spines"} 1
# HELP fabriclb_nexthop_packets_total Packets forwarded to the next hop.
# TYPE fabriclb_nexthop_packets_total counter
fabriclb_nexthop_packets_total{group="spines",interface="eth1",address="10.0.2.2"} 5
fabriclb_nexthop_packets_total{group="spines",interface="eth2",address="02:00:00:00:00:01",vlan="7"} 2
# HELP fabriclb_nexthop_bytes_total Bytes forwarded to the next hop (as received).
# TYPE fabriclb_nexthop_bytes_total counter
fabriclb_nexthop_bytes_total{group="spines",interface="eth1",address="10.0.2.2"} 640
fabriclb_nexthop_bytes_total{group="spines",interface="eth2",address="02:00:00:00:00:01",vlan="7"} 256
# HELP fabriclb_nexthop_sprayed_packets_total Of the packets forwarded to the next hop, those sprayed there.
# TYPE fabriclb_nexthop_sprayed_packets_total counter
fabriclb_nexthop_sprayed_packets_total{group="spines",interface="eth1",address="10.0.2.2"} 0
fabriclb_nexthop_sprayed_packets_total{group="spines",interface="eth2",address="02:00:00:00:00:01",vlan="7"} 0
# HELP fabriclb_nexthop_usable 1 when the next hop is selectable (link up, MAC known).
# TYPE fabriclb_nexthop_usable gauge
fabriclb_nexthop_usable{group="spines",interface="eth1",address="10.0.2.2"} 1
fabriclb_nexthop_usable{group="spines",interface="eth2",address="02:00:00:00:00:01",vlan="7"} 0
# HELP fabriclb_nexthop_quality Path quality the data plane weighs the next hop by (1024: default, higher is better); with a destination label, toward that destination of its group.
# TYPE fabriclb_nexthop_quality gauge
fabriclb_nexthop_quality{group="spines",interface="eth1",address="10.0.2.2"} 384
fabriclb_nexthop_quality{group="spines",interface="eth1",address="10.0.2.2",destination="leaf3"} 128
fabriclb_nexthop_quality{group="spines",interface="eth2",address="02:00:00:00:00:01",vlan="7"} 1024
# HELP fabriclb_nexthop_quality_band Quality band from telemetry, 0 (idle) to 7 (congested).
# TYPE fabriclb_nexthop_quality_band gauge
fabriclb_nexthop_quality_band{group="spines",interface="eth1",address="10.0.2.2",source="remote"} 5
fabriclb_nexthop_quality_band{group="spines",interface="eth1",address="10.0.2.2",destination="leaf3",source="remote"} 7
# HELP fabriclb_nexthop_queue_bytes Bytes queued toward the next hop at the last good reading.
# TYPE fabriclb_nexthop_queue_bytes gauge
fabriclb_nexthop_queue_bytes{group="spines",interface="eth1",address="10.0.2.2",source="remote"} 52000
fabriclb_nexthop_queue_bytes{group="spines",interface="eth1",address="10.0.2.2",destination="leaf3",source="remote"} 90000
# HELP fabriclb_nexthop_drain_rate_bytes What the path to the next hop drains at, bytes per second: the lower of the next switch's port speed, where the source reads it, and the rate its queue was seen draining at; 0 while neither is known.
# TYPE fabriclb_nexthop_drain_rate_bytes gauge
fabriclb_nexthop_drain_rate_bytes{group="spines",interface="eth1",address="10.0.2.2",source="remote"} 5000000
fabriclb_nexthop_drain_rate_bytes{group="spines",interface="eth1",address="10.0.2.2",destination="leaf3",source="remote"} 1250000
# HELP fabriclb_telemetry_age_seconds Seconds since the next hop's last good telemetry reading.
# TYPE fabriclb_telemetry_age_seconds gauge
fabriclb_telemetry_age_seconds{group="spines",interface="eth1",address="10.0.2.2",source="remote"} 0.004
fabriclb_telemetry_age_seconds{group="spines",interface="eth1",address="10.0.2.2",destination="leaf3",source="remote"} 0.004
# HELP fabriclb_telemetry_errors_total Telemetry reads for the next hop that failed.
# TYPE fabriclb_telemetry_errors_total counter
fabriclb_telemetry_errors_total{group="spines",interface="eth1",address="10.0.2.2",source="remote"} 3
fabriclb_telemetry_errors_total{group="spines",interface="eth1",address="10.0.2.2",destination="leaf3",source="remote"} 0
# HELP fabriclb_telemetry_stale 1 when the next hop fell back to the default quality for want of readings.
# TYPE fabriclb_telemetry_stale gauge
fabriclb_telemetry_stale{group="spines",interface="eth1",address="10.0.2.2",source="remote"} 0
fabriclb_telemetry_stale{group="spines",interface="eth1",address="10.0.2.2",destination="leaf3",source="remote"} 0
# HELP fabriclb_flow_events_total Flow events (fabriclb watch's) the daemon read from the data plane or made itself, by group, event and cause.
# TYPE fabriclb_flow_events_total counter
fabriclb_flow_events_total{group="spines",event="flowlet_move",cause="failover"} 12
fabriclb_flow_events_total{group="spines",event="next_hop_down",cause="unusable"} 1
# HELP fabriclb_flow_events_unsent_total Flow events the data plane did not send: over its CPU's [events] rate, or with the ring full (the daemon behind).
# TYPE fabriclb_flow_events_unsent_total counter
fabriclb_flow_events_unsent_total{reason="over_budget"} 40
fabriclb_flow_events_unsent_total{reason="ring_full"} 2
# HELP fabriclb_egress_tx_errors_total Frames redirected to the interface that never left (also counted as forwarded and in the next hop's packets), by cause: refused (the kernel refused the redirect, e.g. the interface down) or dropped (the driver's transmit dropped them, e.g. its queue full or its peer down).
# TYPE fabriclb_egress_tx_errors_total counter
fabriclb_egress_tx_errors_total{interface="eth1",cause="refused"} 4
fabriclb_egress_tx_errors_total{interface="eth1",cause="dropped"} 0
fabriclb_egress_tx_errors_total{interface="eth2",cause="refused"} 0
fabriclb_egress_tx_errors_total{interface="eth2",cause="dropped"} 9
"#
    .replace("BUILD", &build);
    let text = rendered();
    for (line, (got, want)) in text.lines().zip(expected.lines()).enumerate() {
        assert_eq!(got, want, "line {}", line + 1);
    }
    assert_eq!(text, expected);
}

#[test]
fn sample_reads_one_value_back() {
    let text = rendered();
    assert_eq!(
        sample(&text, "fabriclb_packets_total", "no_nexthop"),
        Some(1)
    );
    assert_eq!(
        sample(
            &text,
            "fabriclb_nexthop_packets_total",
            "interface=\"eth2\""
        ),
        Some(2)
    );
    assert_eq!(
        sample(&text, "fabriclb_nexthop_usable", "address=\"10.0.2.2\""),
        Some(1)
    );
    // A series without labels, with no filter.
    assert_eq!(
        sample(&text, "fabriclb_flowlet_table_capacity", ""),
        Some(65536)
    );
    // A metric whose name only starts with the one asked for is another.
    assert_eq!(
        sample(&text, "fabriclb_nexthop_packets", "interface=\"eth1\""),
        None
    );
    assert_eq!(
        sample(
            &text,
            "fabriclb_nexthop_packets_total",
            "interface=\"eth3\""
        ),
        None
    );
}

/// A symlink planted at the old fixed temporary name (or any other)
/// is never written through; the snapshot still lands, readable by
/// others, and no temporary file is left behind.
#[test]
fn a_planted_symlink_is_not_written_through() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = std::env::temp_dir().join(format!("fabriclb-metrics-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let victim = dir.join("victim");
    std::fs::write(&victim, "keep").expect("victim");
    let path = dir.join("m.prom");
    std::os::unix::fs::symlink(&victim, dir.join("m.prom.tmp")).expect("symlink");
    write_atomically(&path, "snapshot\n").expect("written");
    write_atomically(&path, "snapshot 2\n").expect("written again");
    assert_eq!(std::fs::read_to_string(&victim).expect("victim"), "keep");
    assert_eq!(
        std::fs::read_to_string(&path).expect("metrics"),
        "snapshot 2\n"
    );
    let mode = std::fs::metadata(&path)
        .expect("metadata")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o644);
    let mut left: Vec<String> = std::fs::read_dir(&dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["m.prom", "m.prom.tmp", "victim"]);
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn label_values_are_escaped() {
    let verdicts = [VerdictCount::default(); Reason::COUNT as usize];
    let groups = [GroupSample {
        name: "a\"b\\c\nd",
        mode: Mode::Ecmp.code(),
        stats: GroupStats::default(),
    }];
    let text = render(
        &DAEMON,
        &EventsSample::none(),
        &verdicts,
        &groups,
        &[],
        &[],
        None,
    );
    assert!(
        text.contains("fabriclb_group_pinned_packets_total{group=\"a\\\"b\\\\c\\nd\"} 0\n"),
        "{text}"
    );
}

/// Uncounted is not zero: without the tracepoints the family is absent.
#[test]
fn tx_errors_not_counted_leave_the_family_out() {
    let verdicts = [VerdictCount::default(); Reason::COUNT as usize];
    let text = render(
        &DAEMON,
        &EventsSample::none(),
        &verdicts,
        &[],
        &[],
        &[],
        None,
    );
    assert!(!text.contains("fabriclb_egress_tx_errors_total"), "{text}");
    let text = render(
        &DAEMON,
        &EventsSample::none(),
        &verdicts,
        &[],
        &[],
        &[],
        Some(&[]),
    );
    assert!(
        text.contains("# TYPE fabriclb_egress_tx_errors_total counter\n"),
        "{text}"
    );
}
