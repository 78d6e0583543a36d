//! Prometheus text-format snapshot of the data plane's counters, written
//! atomically to a file (for node_exporter's textfile collector, scripts and
//! tests).

use std::fmt::Write as _;
use std::path::Path;

use lb_common::abi::{GroupStats, NextHopStats};
use lb_common::verdict::Reason;

use crate::config::Mode;

/// One group's identity and counters.
pub struct GroupSample<'a> {
    pub name: &'a str,
    /// The data plane's mode code.
    pub mode: u32,
    pub stats: GroupStats,
}

/// One next hop's identity and counters.
pub struct NextHopSample<'a> {
    pub group: &'a str,
    pub id: u32,
    /// The config's description, e.g. `eth1 10.0.2.2`.
    pub label: String,
    pub usable: bool,
    pub stats: NextHopStats,
}

pub fn render(
    verdicts: &[u64; Reason::COUNT as usize],
    groups: &[GroupSample<'_>],
    nexthops: &[NextHopSample<'_>],
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
            let _ = writeln!(
                out,
                "{metric}{{group=\"{}\",nexthop=\"{}\",id=\"{}\"}} {}",
                escape(n.group),
                escape(&n.label),
                n.id,
                value(n)
            );
        }
    }
    out
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Writes `text` to `path` through a temporary file and a rename, so a
/// reader never sees half a snapshot.
pub fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
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

    #[test]
    fn renders_every_reason_and_next_hop() {
        let mut verdicts = [0; Reason::COUNT as usize];
        verdicts[Reason::Forwarded as usize] = 7;
        verdicts[Reason::NoRoute as usize] = 2;
        let nexthops = [NextHopSample {
            group: "spines",
            id: 3,
            label: "eth1 10.0.2.2".into(),
            usable: true,
            stats: NextHopStats {
                packets: 5,
                bytes: 640,
                sprayed: 4,
                ..NextHopStats::default()
            },
        }];
        let groups = [GroupSample {
            name: "spines",
            mode: Mode::PerPacket.code(),
            stats: GroupStats {
                spray_cursor: 99,
                new_flowlets: 6,
                flowlet_moves: 2,
                sprayed: 4,
                pinned: 1,
            },
        }];
        let text = render(&verdicts, &groups, &nexthops);
        for line in [
            "fabriclb_group_mode{group=\"spines\",mode=\"ecmp\"} 0\n",
            "fabriclb_group_mode{group=\"spines\",mode=\"per-packet\"} 1\n",
            "fabriclb_group_new_flowlets_total{group=\"spines\"} 6\n",
            "fabriclb_group_flowlet_moves_total{group=\"spines\"} 2\n",
            "fabriclb_group_sprayed_packets_total{group=\"spines\"} 4\n",
            "fabriclb_group_pinned_packets_total{group=\"spines\"} 1\n",
            "fabriclb_nexthop_sprayed_packets_total{group=\"spines\",nexthop=\"eth1 10.0.2.2\",id=\"3\"} 4\n",
        ] {
            assert!(text.contains(line), "{line}");
        }
        assert!(text.contains("fabriclb_packets_total{reason=\"forwarded\"} 7\n"));
        assert!(text.contains("fabriclb_packets_total{reason=\"l3_malformed\"} 0\n"));
        assert!(text.contains(
            "fabriclb_nexthop_bytes_total{group=\"spines\",nexthop=\"eth1 10.0.2.2\",id=\"3\"} 640\n"
        ));
        assert_eq!(sample(&text, "fabriclb_packets_total", "no_route"), Some(2));
        assert_eq!(
            sample(&text, "fabriclb_nexthop_packets_total", "id=\"3\""),
            Some(5)
        );
        assert_eq!(
            sample(&text, "fabriclb_nexthop_usable", "id=\"3\""),
            Some(1)
        );
        assert_eq!(
            sample(&text, "fabriclb_nexthop_packets_total", "id=\"4\""),
            None
        );
    }
}
