//! Prometheus text-format snapshot of the data plane's counters, written
//! atomically to a file (for node_exporter's textfile collector, scripts and
//! tests: [`textfile`]) or served over HTTP.

mod textfile;

pub use textfile::write_atomically;

use std::fmt::Write as _;

use std::collections::BTreeMap;

use lb_common::abi::events::EventBudget;
use lb_common::abi::tx_errors::TxErrors;
use lb_common::abi::{GroupStats, NextHopStats, OverrideStats, VerdictCount};
use lb_common::verdict::Reason;

use crate::config::{Mode, NextHopSpec};

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
    /// As the config (or the route it was learned from) gives it: its
    /// labels, which stay while the next hop does, whatever else an edit
    /// moves.
    pub spec: &'a NextHopSpec,
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
    /// What its path drains at, bytes per second (its port's speed or its
    /// measured drain rate, the lower); 0 while neither is known.
    pub drains_at_bytes: u64,
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

/// The daemon's own state, beside the data plane's counters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DaemonSample {
    /// Whether the last attempt to load the config (the start's, or a
    /// reload's) took it.
    pub last_reload_successful: bool,
    /// When the config in force was taken, seconds since the Unix epoch.
    pub last_reload_success_seconds: f64,
    /// The flowlet table's size, fixed when the program was loaded.
    pub flowlet_capacity: u32,
    /// Of those, entries a flow of a group in force holds (estimated).
    pub flowlet_entries: u64,
}

/// The flow events (`fabriclb watch`'s): those the daemon read from the
/// data plane or made itself, and those the data plane did not send.
pub struct EventsSample<'a> {
    /// By group, event and cause (words of a few each, so the series
    /// stay few: groups times about ten).
    pub published: &'a BTreeMap<(String, String, String), u64>,
    pub unsent: EventBudget,
}

#[cfg(test)]
impl EventsSample<'static> {
    /// No flow events, none unsent.
    pub fn none() -> Self {
        static NONE: BTreeMap<(String, String, String), u64> = BTreeMap::new();
        Self {
            published: &NONE,
            unsent: EventBudget::default(),
        }
    }
}

/// `egress` is `None` when transmit errors are not counted (the kernel's
/// tracepoints could not be used): their family is left out rather than
/// shown as zeros.
pub fn render(
    daemon: &DaemonSample,
    events: &EventsSample<'_>,
    verdicts: &[VerdictCount; Reason::COUNT as usize],
    groups: &[GroupSample<'_>],
    nexthops: &[NextHopSample<'_>],
    overrides: &[OverrideSample<'_>],
    egress: Option<&[EgressSample]>,
) -> String {
    let mut out = String::new();
    render_daemon(&mut out, daemon);
    let per_verdict: [Family<VerdictCount>; 2] = [
        (
            "fabriclb_packets_total",
            "Packets seen by the XDP program, by verdict reason.",
            |c| c.packets,
        ),
        (
            "fabriclb_bytes_total",
            "Bytes of the frames seen by the XDP program as it left them, by verdict reason.",
            |c| c.bytes,
        ),
    ];
    let rows = Reason::ALL.map(|r| (format!("reason=\"{}\"", r.name()), &verdicts[r as usize]));
    families(&mut out, "counter", &per_verdict, &rows);
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
    let per_group: [Family<GroupStats>; 4] = [
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
    let rows: Vec<_> = (groups.iter())
        .map(|g| (format!("group=\"{}\"", escape(g.name)), &g.stats))
        .collect();
    families(&mut out, "counter", &per_group, &rows);
    let per_override: [Family<OverrideStats>; 3] = [
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
    let rows: Vec<_> = (overrides.iter())
        .map(|o| {
            let labels = format!(
                "override=\"{}\",group=\"{}\"",
                escape(o.name),
                escape(o.group)
            );
            (labels, &o.stats)
        })
        .collect();
    families(&mut out, "counter", &per_override, &rows);
    let per_nexthop: [Family<NextHopSample<'_>>; 3] = [
        (
            "fabriclb_nexthop_packets_total",
            "Packets forwarded to the next hop.",
            |n| n.stats.packets,
        ),
        (
            "fabriclb_nexthop_bytes_total",
            "Bytes forwarded to the next hop (as received).",
            |n| n.stats.bytes,
        ),
        (
            "fabriclb_nexthop_sprayed_packets_total",
            "Of the packets forwarded to the next hop, those sprayed there.",
            |n| n.stats.sprayed,
        ),
    ];
    let rows: Vec<_> = nexthops.iter().map(|n| (nexthop_labels(n), n)).collect();
    families(&mut out, "counter", &per_nexthop, &rows);
    let usable: Family<NextHopSample<'_>> = (
        "fabriclb_nexthop_usable",
        "1 when the next hop is selectable (link up, MAC known).",
        |n| u64::from(n.usable),
    );
    families(&mut out, "gauge", &[usable], &rows);
    let metric = "fabriclb_nexthop_quality";
    let _ = writeln!(
        out,
        "# HELP {metric} Path quality the data plane weighs the next hop by (1024: default, \
         higher is better); with a destination label, toward that destination of its group.\n\
         # TYPE {metric} gauge"
    );
    for (labels, n) in &rows {
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
    render_events(&mut out, events);
    if let Some(egress) = egress {
        render_tx_errors(&mut out, egress);
    }
    out
}

fn render_events(out: &mut String, events: &EventsSample<'_>) {
    let published: Family<u64> = (
        "fabriclb_flow_events_total",
        "Flow events (fabriclb watch's) the daemon read from the data plane or made itself, \
         by group, event and cause.",
        |n| *n,
    );
    let rows: Vec<_> = (events.published.iter())
        .map(|((group, event, cause), n)| {
            let labels = format!(
                "group=\"{}\",event=\"{}\",cause=\"{}\"",
                escape(group),
                escape(event),
                escape(cause)
            );
            (labels, n)
        })
        .collect();
    families(out, "counter", &[published], &rows);
    let unsent: Family<u64> = (
        "fabriclb_flow_events_unsent_total",
        "Flow events the data plane did not send: over its CPU's [events] rate, or with the \
         ring full (the daemon behind).",
        |n| *n,
    );
    let rows = [
        (
            "reason=\"over_budget\"".to_owned(),
            &events.unsent.over_budget,
        ),
        ("reason=\"ring_full\"".to_owned(), &events.unsent.ring_full),
    ];
    families(out, "counter", &[unsent], &rows);
}

/// The build, the config's loads and the table sizes: one series each.
fn render_daemon(out: &mut String, daemon: &DaemonSample) {
    let _ = writeln!(
        out,
        "# HELP fabriclb_build_info The running build (always 1).\n\
         # TYPE fabriclb_build_info gauge\n\
         fabriclb_build_info{{version=\"{}\",commit=\"{}\"}} 1",
        escape(env!("CARGO_PKG_VERSION")),
        escape(crate::COMMIT)
    );
    let series: [(&str, &str, String); 4] = [
        (
            "fabriclb_config_last_reload_successful",
            "1 when the last attempt to load the config (at start or a reload) took it, 0 \
             when it was refused and the config before it stays.",
            u64::from(daemon.last_reload_successful).to_string(),
        ),
        (
            "fabriclb_config_last_reload_success_timestamp_seconds",
            "When the config in force was taken, in seconds since the Unix epoch.",
            format!("{:.3}", daemon.last_reload_success_seconds),
        ),
        (
            "fabriclb_flowlet_table_capacity",
            "Entries of the flowlet table (switch.flowlet_table_size when the program was \
             loaded).",
            daemon.flowlet_capacity.to_string(),
        ),
        (
            "fabriclb_flowlet_table_entries",
            "Flowlet table entries a flow of a group in force holds, estimated from 1024 \
             entries spread evenly over the table; past about half the capacity, new flows \
             often share an entry with another.",
            daemon.flowlet_entries.to_string(),
        ),
    ];
    for (metric, help, value) in series {
        let _ = writeln!(
            out,
            "# HELP {metric} {help}\n# TYPE {metric} gauge\n{metric} {value}"
        );
    }
}

/// A metric family: its name, its help, and its value in a row.
type Family<T> = (&'static str, &'static str, fn(&T) -> u64);

/// `families` of type `kind` (counter or gauge) over `rows`: each family's
/// HELP and TYPE, then a sample per row with its labels (`k="v",...`,
/// escaped).
fn families<T>(out: &mut String, kind: &str, families: &[Family<T>], rows: &[(String, &T)]) {
    for (family, help, value) in families {
        let _ = writeln!(out, "# HELP {family} {help}\n# TYPE {family} {kind}");
        for (labels, row) in rows {
            let _ = writeln!(out, "{family}{{{labels}}} {}", value(row));
        }
    }
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
    let per_path: [(&str, &str, &str, Value); 6] = [
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
            "fabriclb_nexthop_drain_rate_bytes",
            "What the path to the next hop drains at, bytes per second: the lower of the next switch's port speed, where the source reads it, and the rate its queue was seen draining at; 0 while neither is known.",
            "gauge",
            |p| p.drains_at_bytes.to_string(),
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

/// A next hop's labels, the same on each of its metrics: its group, then
/// its [`nexthop_identity`].
fn nexthop_labels(n: &NextHopSample<'_>) -> String {
    let vlan = n.spec.vlan.map(|v| v.to_string());
    format!(
        "group=\"{}\",{}",
        escape(n.group),
        nexthop_identity(&n.spec.interface, &n.spec.addr.to_string(), vlan.as_deref())
    )
}

/// The labels that name a next hop within its group: its egress
/// `interface` (as the transmit errors' and node_exporter's `device` name
/// it) and `address` (an IP address, or a MAC where the config gives
/// one), and `vlan` where it is tagged. No id: ids follow the config's
/// order, and a series must not change name when the file is edited
/// around the next hop.
pub fn nexthop_identity(interface: &str, address: &str, vlan: Option<&str>) -> String {
    let mut labels = format!(
        "interface=\"{}\",address=\"{}\"",
        escape(interface),
        escape(address)
    );
    if let Some(vlan) = vlan {
        let _ = write!(labels, ",vlan=\"{}\"", escape(vlan));
    }
    labels
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Reads one sample back from rendered text: the value of `metric` on the
/// line whose labels contain `label_filter`.
pub fn sample(text: &str, metric: &str, label_filter: &str) -> Option<u64> {
    text.lines()
        .filter(|l| (l.strip_prefix(metric)).is_some_and(|rest| rest.starts_with(['{', ' '])))
        .find(|l| l.contains(label_filter))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[cfg(test)]
mod tests;
