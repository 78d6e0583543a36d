//! Prometheus text-format snapshot of the data plane's counters, written
//! atomically to a file (for node_exporter's textfile collector, scripts and
//! tests).

use std::fmt::Write as _;
use std::path::Path;

use lb_common::abi::tx_errors::TxErrors;
use lb_common::abi::{GroupStats, NextHopStats, OverrideStats};
use lb_common::verdict::Reason;

use crate::config::Mode;

/// One group's identity and counters.
pub struct GroupSample<'a> {
    pub name: &'a str,
    /// The data plane's mode code.
    pub mode: u32,
    pub stats: GroupStats,
}

/// One override's counters.
pub struct OverrideSample<'a> {
    pub name: &'a str,
    /// The group whose route carries its destination.
    pub group: &'a str,
    pub stats: OverrideStats,
}

/// One next hop's identity and counters.
pub struct NextHopSample<'a> {
    pub group: &'a str,
    pub id: u32,
    /// The config's description, e.g. `eth1 10.0.2.2`.
    pub label: String,
    pub usable: bool,
    pub stats: NextHopStats,
    /// The data plane's path quality for it.
    pub quality: u32,
    /// Its telemetry, when its group has a source.
    pub path: Option<PathSample>,
    /// Its quality and telemetry toward each of its group's destinations.
    pub destinations: Vec<DestinationSample<'a>>,
}

/// A next hop rated toward one of its group's destinations.
pub struct DestinationSample<'a> {
    pub name: &'a str,
    pub quality: u32,
    pub path: Option<PathSample>,
}

/// One next hop's telemetry.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PathSample {
    /// The source's config name.
    pub source: &'static str,
    pub band: u32,
    /// Bytes queued toward it at the last good reading.
    pub queued_bytes: u64,
    /// Seconds since the last good reading (since start if none).
    pub age_seconds: f64,
    /// Reads that failed.
    pub errors: u64,
    /// Whether it fell back to the default quality for want of readings.
    pub stale: bool,
}

/// What one egress interface failed to send of what the program
/// redirected to it.
pub struct EgressSample {
    pub interface: String,
    pub tx_errors: TxErrors,
}

/// `egress` is `None` when transmit errors are not counted (the kernel's
/// tracepoints could not be used): their family is left out rather than
/// shown as zeros.
pub fn render(
    verdicts: &[u64; Reason::COUNT as usize],
    groups: &[GroupSample<'_>],
    nexthops: &[NextHopSample<'_>],
    overrides: &[OverrideSample<'_>],
    egress: Option<&[EgressSample]>,
) -> String {
    let mut out = String::new();
    out.push_str(
        "# HELP fabriclb_packets_total Packets seen by the XDP program, by verdict reason.\n",
    );
    out.push_str("# TYPE fabriclb_packets_total counter\n");
    for reason in Reason::ALL {
        let _ = writeln!(
            out,
            "fabriclb_packets_total{{reason=\"{}\"}} {}",
            reason.name(),
            verdicts[reason as usize]
        );
    }
    out.push_str("# HELP fabriclb_group_mode The mode a group runs in (1 for the current one).\n");
    out.push_str("# TYPE fabriclb_group_mode gauge\n");
    for g in groups {
        for (name, mode) in Mode::NAMES {
            let _ = writeln!(
                out,
                "fabriclb_group_mode{{group=\"{}\",mode=\"{name}\"}} {}",
                escape(g.name),
                u64::from(mode.code() == g.mode)
            );
        }
    }
    type GroupValue = fn(&GroupStats) -> u64;
    let per_group: [(&str, &str, GroupValue); 4] = [
        (
            "fabriclb_group_new_flowlets_total",
            "Flowlets started (a flow's first included).",
            |s| s.new_flowlets,
        ),
        (
            "fabriclb_group_flowlet_moves_total",
            "New flowlets that took a different next hop than their flow had.",
            |s| s.flowlet_moves,
        ),
        (
            "fabriclb_group_sprayed_packets_total",
            "Packets that picked their own next hop (per-packet mode).",
            |s| s.sprayed,
        ),
        (
            "fabriclb_group_pinned_packets_total",
            "Packets that followed their flowlet (flowlet and per-packet modes).",
            |s| s.pinned,
        ),
    ];
    for (metric, help, value) in per_group {
        let _ = writeln!(out, "# HELP {metric} {help}\n# TYPE {metric} counter");
        for g in groups {
            let _ = writeln!(
                out,
                "{metric}{{group=\"{}\"}} {}",
                escape(g.name),
                value(&g.stats)
            );
        }
    }
    type OverrideValue = fn(&OverrideStats) -> u64;
    let per_override: [(&str, &str, OverrideValue); 3] = [
        (
            "fabriclb_override_packets_total",
            "Packets an override matched and sent to its next hop.",
            |s| s.packets,
        ),
        (
            "fabriclb_override_bytes_total",
            "Bytes an override matched and sent to its next hop (as received).",
            |s| s.bytes,
        ),
        (
            "fabriclb_override_fallbacks_total",
            "Packets an override matched while its next hop was unusable: they took the \
             group's own choice.",
            |s| s.fallbacks,
        ),
    ];
    for (metric, help, value) in per_override {
        let _ = writeln!(out, "# HELP {metric} {help}\n# TYPE {metric} counter");
        for o in overrides {
            let _ = writeln!(
                out,
                "{metric}{{override=\"{}\",group=\"{}\"}} {}",
                escape(o.name),
                escape(o.group),
                value(&o.stats)
            );
        }
    }
    type Value = fn(&NextHopSample<'_>) -> u64;
    let per_nexthop: [(&str, &str, &str, Value); 4] = [
        (
            "fabriclb_nexthop_packets_total",
            "Packets forwarded to the next hop.",
            "counter",
            |n| n.stats.packets,
        ),
        (
            "fabriclb_nexthop_bytes_total",
            "Bytes forwarded to the next hop (as received).",
            "counter",
            |n| n.stats.bytes,
        ),
        (
            "fabriclb_nexthop_sprayed_packets_total",
            "Of the packets forwarded to the next hop, those sprayed there.",
            "counter",
            |n| n.stats.sprayed,
        ),
        (
            "fabriclb_nexthop_usable",
            "1 when the next hop is selectable (link up, MAC known).",
            "gauge",
            |n| u64::from(n.usable),
        ),
    ];
    for (metric, help, kind, value) in per_nexthop {
        let _ = writeln!(out, "# HELP {metric} {help}\n# TYPE {metric} {kind}");
        for n in nexthops {
            let _ = writeln!(out, "{metric}{{{}}} {}", nexthop_labels(n), value(n));
        }
    }
    let metric = "fabriclb_nexthop_quality";
    let _ = writeln!(
        out,
        "# HELP {metric} Path quality the data plane weighs the next hop by (1024: default, \
         higher is better); with a destination label, toward that destination of its group.\n\
         # TYPE {metric} gauge"
    );
    for n in nexthops {
        let labels = nexthop_labels(n);
        let _ = writeln!(out, "{metric}{{{labels}}} {}", n.quality);
        for d in &n.destinations {
            let _ = writeln!(
                out,
                "{metric}{{{labels},destination=\"{}\"}} {}",
                escape(d.name),
                d.quality
            );
        }
    }
    render_telemetry(&mut out, nexthops);
    if let Some(egress) = egress {
        render_tx_errors(&mut out, egress);
    }
    out
}

/// Per interface rather than per next hop: next hops that differ only by
/// VLAN share an interface, and the kernel reports losses per device.
fn render_tx_errors(out: &mut String, egress: &[EgressSample]) {
    let metric = "fabriclb_egress_tx_errors_total";
    let _ = writeln!(
        out,
        "# HELP {metric} Frames redirected to the interface that never left (also counted as \
         forwarded and in the next hop's packets), by cause: refused (the kernel refused the \
         redirect, e.g. the interface down) or dropped (the driver's transmit dropped them, e.g. \
         its queue full or its peer down).\n# TYPE {metric} counter"
    );
    for e in egress {
        let interface = escape(&e.interface);
        for (cause, count) in [
            ("refused", e.tx_errors.refused),
            ("dropped", e.tx_errors.dropped),
        ] {
            let _ = writeln!(
                out,
                "{metric}{{interface=\"{interface}\",cause=\"{cause}\"}} {count}"
            );
        }
    }
}

/// The telemetry of the next hops that have a source.
fn render_telemetry(out: &mut String, nexthops: &[NextHopSample<'_>]) {
    type Value = fn(&PathSample) -> String;
    let per_path: [(&str, &str, &str, Value); 5] = [
        (
            "fabriclb_nexthop_quality_band",
            "Quality band from telemetry, 0 (idle) to 7 (congested).",
            "gauge",
            |p| p.band.to_string(),
        ),
        (
            "fabriclb_nexthop_queue_bytes",
            "Bytes queued toward the next hop at the last good reading.",
            "gauge",
            |p| p.queued_bytes.to_string(),
        ),
        (
            "fabriclb_telemetry_age_seconds",
            "Seconds since the next hop's last good telemetry reading.",
            "gauge",
            |p| format!("{:.3}", p.age_seconds),
        ),
        (
            "fabriclb_telemetry_errors_total",
            "Telemetry reads for the next hop that failed.",
            "counter",
            |p| p.errors.to_string(),
        ),
        (
            "fabriclb_telemetry_stale",
            "1 when the next hop fell back to the default quality for want of readings.",
            "gauge",
            |p| u64::from(p.stale).to_string(),
        ),
    ];
    for (metric, help, kind, value) in per_path {
        let _ = writeln!(out, "# HELP {metric} {help}\n# TYPE {metric} {kind}");
        for n in nexthops {
            let labels = nexthop_labels(n);
            let toward = n.destinations.iter().filter_map(|d| {
                let destination = format!(",destination=\"{}\"", escape(d.name));
                Some((destination, d.path.as_ref()?))
            });
            let own = n.path.as_ref().map(|p| (String::new(), p));
            for (destination, path) in own.into_iter().chain(toward) {
                let _ = writeln!(
                    out,
                    "{metric}{{{labels}{destination},source=\"{}\"}} {}",
                    path.source,
                    value(path)
                );
            }
        }
    }
}

/// A next hop's labels, the same on each of its metrics.
fn nexthop_labels(n: &NextHopSample<'_>) -> String {
    format!(
        "group=\"{}\",nexthop=\"{}\",id=\"{}\"",
        escape(n.group),
        escape(&n.label),
        n.id
    )
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Writes `text` to `path` through a temporary file and a rename, so a
/// reader never sees half a snapshot.
///
/// The directory is often writable by others (node_exporter's textfile
/// directory): a fixed temporary name there could be a planted symlink,
/// and the daemon, as root, would write through it. So the temporary file
/// gets a name nobody can guess, and is created new, never opened if
/// anything (a symlink included) already has that name.
pub fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};

    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    const ATTEMPTS: u32 = 16;
    for attempt in 0..ATTEMPTS {
        let tmp = dir.join(format!(
            ".{name}.{}.{attempt}.{:x}.tmp",
            std::process::id(),
            unguessable()
        ));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp);
        let mut file = match file {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        };
        // Readable by the exporter whatever the daemon's umask.
        let written = file
            .set_permissions(std::fs::Permissions::from_mode(0o644))
            .and_then(|()| file.write_all(text.as_bytes()))
            .and_then(|()| std::fs::rename(&tmp, path));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        return written;
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        format!(
            "{ATTEMPTS} temporary names beside {} were all taken",
            path.display()
        ),
    ))
}

/// 64 bits an attacker cannot predict: the kernel's random bytes, or the
/// clock's nanoseconds should those be unavailable.
fn unguessable() -> u64 {
    let mut bytes = [0u8; 8];
    // SAFETY: the kernel writes at most `bytes.len()` bytes into `bytes`.
    let got = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    match got {
        8 => u64::from_ne_bytes(bytes),
        _ => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
    }
}

/// Reads one sample back from rendered text: the value of `metric` on the
/// line whose labels contain `label_filter`.
pub fn sample(text: &str, metric: &str, label_filter: &str) -> Option<u64> {
    text.lines()
        .filter(|l| l.starts_with(metric) && l[metric.len()..].starts_with('{'))
        .find(|l| l.contains(label_filter))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One group of two next hops, with counters.
    fn rendered() -> String {
        let mut verdicts = [0; Reason::COUNT as usize];
        verdicts[Reason::Forwarded as usize] = 7;
        verdicts[Reason::NoNextHop as usize] = 1;
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
        let nexthops = [
            NextHopSample {
                group: "spines",
                id: 0,
                label: "eth1 10.0.2.2".into(),
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
                        age_seconds: 0.0041,
                        errors: 0,
                        stale: false,
                    }),
                }],
            },
            NextHopSample {
                group: "spines",
                id: 1,
                label: "eth2 02:00:00:00:00:01 vlan 7".into(),
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
        render(&verdicts, &groups, &nexthops, &overrides, Some(&egress))
    }

    /// The whole file, spelled out: dashboards and alerts match these
    /// names, labels and their order literally, so a change here must be
    /// a deliberate one.
    #[test]
    fn renders_literal_metric_names_and_labels() {
        let expected = r#"# HELP fabriclb_packets_total Packets seen by the XDP program, by verdict reason.
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
fabriclb_nexthop_packets_total{group="spines",nexthop="eth1 10.0.2.2",id="0"} 5
fabriclb_nexthop_packets_total{group="spines",nexthop="eth2 02:00:00:00:00:01 vlan 7",id="1"} 2
# HELP fabriclb_nexthop_bytes_total Bytes forwarded to the next hop (as received).
# TYPE fabriclb_nexthop_bytes_total counter
fabriclb_nexthop_bytes_total{group="spines",nexthop="eth1 10.0.2.2",id="0"} 640
fabriclb_nexthop_bytes_total{group="spines",nexthop="eth2 02:00:00:00:00:01 vlan 7",id="1"} 256
# HELP fabriclb_nexthop_sprayed_packets_total Of the packets forwarded to the next hop, those sprayed there.
# TYPE fabriclb_nexthop_sprayed_packets_total counter
fabriclb_nexthop_sprayed_packets_total{group="spines",nexthop="eth1 10.0.2.2",id="0"} 0
fabriclb_nexthop_sprayed_packets_total{group="spines",nexthop="eth2 02:00:00:00:00:01 vlan 7",id="1"} 0
# HELP fabriclb_nexthop_usable 1 when the next hop is selectable (link up, MAC known).
# TYPE fabriclb_nexthop_usable gauge
fabriclb_nexthop_usable{group="spines",nexthop="eth1 10.0.2.2",id="0"} 1
fabriclb_nexthop_usable{group="spines",nexthop="eth2 02:00:00:00:00:01 vlan 7",id="1"} 0
# HELP fabriclb_nexthop_quality Path quality the data plane weighs the next hop by (1024: default, higher is better); with a destination label, toward that destination of its group.
# TYPE fabriclb_nexthop_quality gauge
fabriclb_nexthop_quality{group="spines",nexthop="eth1 10.0.2.2",id="0"} 384
fabriclb_nexthop_quality{group="spines",nexthop="eth1 10.0.2.2",id="0",destination="leaf3"} 128
fabriclb_nexthop_quality{group="spines",nexthop="eth2 02:00:00:00:00:01 vlan 7",id="1"} 1024
# HELP fabriclb_nexthop_quality_band Quality band from telemetry, 0 (idle) to 7 (congested).
# TYPE fabriclb_nexthop_quality_band gauge
fabriclb_nexthop_quality_band{group="spines",nexthop="eth1 10.0.2.2",id="0",source="remote"} 5
fabriclb_nexthop_quality_band{group="spines",nexthop="eth1 10.0.2.2",id="0",destination="leaf3",source="remote"} 7
# HELP fabriclb_nexthop_queue_bytes Bytes queued toward the next hop at the last good reading.
# TYPE fabriclb_nexthop_queue_bytes gauge
fabriclb_nexthop_queue_bytes{group="spines",nexthop="eth1 10.0.2.2",id="0",source="remote"} 52000
fabriclb_nexthop_queue_bytes{group="spines",nexthop="eth1 10.0.2.2",id="0",destination="leaf3",source="remote"} 90000
# HELP fabriclb_telemetry_age_seconds Seconds since the next hop's last good telemetry reading.
# TYPE fabriclb_telemetry_age_seconds gauge
fabriclb_telemetry_age_seconds{group="spines",nexthop="eth1 10.0.2.2",id="0",source="remote"} 0.004
fabriclb_telemetry_age_seconds{group="spines",nexthop="eth1 10.0.2.2",id="0",destination="leaf3",source="remote"} 0.004
# HELP fabriclb_telemetry_errors_total Telemetry reads for the next hop that failed.
# TYPE fabriclb_telemetry_errors_total counter
fabriclb_telemetry_errors_total{group="spines",nexthop="eth1 10.0.2.2",id="0",source="remote"} 3
fabriclb_telemetry_errors_total{group="spines",nexthop="eth1 10.0.2.2",id="0",destination="leaf3",source="remote"} 0
# HELP fabriclb_telemetry_stale 1 when the next hop fell back to the default quality for want of readings.
# TYPE fabriclb_telemetry_stale gauge
fabriclb_telemetry_stale{group="spines",nexthop="eth1 10.0.2.2",id="0",source="remote"} 0
fabriclb_telemetry_stale{group="spines",nexthop="eth1 10.0.2.2",id="0",destination="leaf3",source="remote"} 0
# HELP fabriclb_egress_tx_errors_total Frames redirected to the interface that never left (also counted as forwarded and in the next hop's packets), by cause: refused (the kernel refused the redirect, e.g. the interface down) or dropped (the driver's transmit dropped them, e.g. its queue full or its peer down).
# TYPE fabriclb_egress_tx_errors_total counter
fabriclb_egress_tx_errors_total{interface="eth1",cause="refused"} 4
fabriclb_egress_tx_errors_total{interface="eth1",cause="dropped"} 0
fabriclb_egress_tx_errors_total{interface="eth2",cause="refused"} 0
fabriclb_egress_tx_errors_total{interface="eth2",cause="dropped"} 9
"#;
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
            sample(&text, "fabriclb_nexthop_packets_total", "id=\"1\""),
            Some(2)
        );
        assert_eq!(
            sample(&text, "fabriclb_nexthop_usable", "id=\"0\""),
            Some(1)
        );
        // A metric whose name only starts with the one asked for is another.
        assert_eq!(sample(&text, "fabriclb_nexthop_packets", "id=\"0\""), None);
        assert_eq!(
            sample(&text, "fabriclb_nexthop_packets_total", "id=\"2\""),
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
        let verdicts = [0; Reason::COUNT as usize];
        let groups = [GroupSample {
            name: "a\"b\\c\nd",
            mode: Mode::Ecmp.code(),
            stats: GroupStats::default(),
        }];
        let text = render(&verdicts, &groups, &[], &[], None);
        assert!(
            text.contains("fabriclb_group_pinned_packets_total{group=\"a\\\"b\\\\c\\nd\"} 0\n"),
            "{text}"
        );
    }

    /// Uncounted is not zero: without the tracepoints the family is absent.
    #[test]
    fn tx_errors_not_counted_leave_the_family_out() {
        let verdicts = [0; Reason::COUNT as usize];
        let text = render(&verdicts, &[], &[], &[], None);
        assert!(!text.contains("fabriclb_egress_tx_errors_total"), "{text}");
        let text = render(&verdicts, &[], &[], &[], Some(&[]));
        assert!(
            text.contains("# TYPE fabriclb_egress_tx_errors_total counter\n"),
            "{text}"
        );
    }
}
