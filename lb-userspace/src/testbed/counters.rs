//! What the leaf's fabriclb counted, read back from its metrics file.
//!
//! Every sample read must be there: a test that expects a counter to stay
//! at 0 would otherwise pass when the metric is renamed or gone.

use anyhow::{Result, bail, ensure};
use lb_common::verdict::Reason;

use super::Testbed;
use crate::config::Mode;
use crate::metrics;

/// One spine as the leaf's fabriclb counted it: all zero, and not
/// `in_group`, while the group does not have it as a next hop (a route
/// learned without it).
#[derive(Clone, Debug, Default)]
pub struct SpineCount {
    pub label: String,
    /// Whether the group has it as a next hop now.
    pub in_group: bool,
    pub packets: u64,
    pub bytes: u64,
    /// Of `packets`, those sprayed (per-packet mode).
    pub sprayed: u64,
    /// Whether the daemon's tables have it selectable.
    pub usable: bool,
    /// Of `packets`, those that never left the leaf's egress interface
    /// toward it (each spine has an interface of its own).
    pub tx_errors: u64,
}

/// What the leaf's fabriclb counted, from its metrics file.
#[derive(Clone, Debug, Default)]
pub struct LeafCounters {
    pub spines: Vec<SpineCount>,
    pub forwarded: u64,
    pub passed_to_kernel: u64,
    /// Of `forwarded`, the frames that never left the leaf.
    pub tx_errors: u64,
    /// The spine group's counters.
    pub new_flowlets: u64,
    pub flowlet_moves: u64,
    pub sprayed: u64,
    pub pinned: u64,
    /// The mode the group runs in.
    pub mode: String,
}

/// The value of `metric` on the line whose labels contain `labels`; an
/// error naming both when there is none.
pub fn read_metric(text: &str, metric: &str, labels: &str) -> Result<u64> {
    match metrics::sample(text, metric, labels) {
        Some(value) => Ok(value),
        None => bail!("metric {metric} with labels {labels} is missing from the metrics file"),
    }
}

/// The metrics' labels of the next hop the config writes `label`
/// (`s1 198.18.1.2`, `eth2 02:00:00:00:00:01 vlan 7`): its `interface`,
/// `address` and, where tagged, `vlan`, as a filter for [`read_metric`].
pub fn nexthop_labels(label: &str) -> String {
    let mut words = label.split(' ');
    let interface = words.next().unwrap_or_default();
    let address = words.next().unwrap_or_default();
    let vlan = match (words.next(), words.next()) {
        (Some("vlan"), vlan) => vlan,
        _ => None,
    };
    metrics::nexthop_identity(interface, address, vlan)
}

impl LeafCounters {
    /// Reads the counters of the testbed's spine group.
    pub fn from_metrics(bed: &Testbed, text: &str) -> Result<Self> {
        let labels: Vec<String> = (1..=bed.shape().spines)
            .map(|j| bed.spine_label(j))
            .collect();
        Self::parse(bed.spine_group(), &labels, text)
    }

    /// Reads the counters of group `group`, whose next hops are labelled
    /// `labels`.
    pub fn parse(group: &str, labels: &[String], text: &str) -> Result<Self> {
        let spines = labels
            .iter()
            .map(|label| {
                // The group too: another group may have the same next hop.
                let filter = format!("group=\"{group}\",{}", nexthop_labels(label));
                let read = |metric| read_metric(text, metric, &filter);
                let interface = label.split(' ').next().unwrap_or_default();
                // Per egress interface, whether or not the group has the
                // spine now: frames given up while it was leaving count.
                // The daemon writes every next hop's interface; one that
                // left is written once it has failed to send.
                let in_group = text.contains(&filter);
                let mut tx_errors = 0;
                for cause in ["refused", "dropped"] {
                    tx_errors += egress_errors(text, interface, cause, in_group)?;
                }
                if !in_group {
                    return Ok(SpineCount {
                        label: label.clone(),
                        tx_errors,
                        ..SpineCount::default()
                    });
                }
                Ok(SpineCount {
                    in_group: true,
                    tx_errors,
                    packets: read("fabriclb_nexthop_packets_total")?,
                    bytes: read("fabriclb_nexthop_bytes_total")?,
                    sprayed: read("fabriclb_nexthop_sprayed_packets_total")?,
                    usable: read("fabriclb_nexthop_usable")? == 1,
                    label: label.clone(),
                })
            })
            .collect::<Result<Vec<SpineCount>>>()?;
        // A group named wrong would read as every spine left out: said.
        if !spines.iter().any(|s| s.in_group) {
            bail!("group {group} has none of the next hops {labels:?} in the metrics");
        }
        let count = |reason: Reason| {
            read_metric(
                text,
                "fabriclb_packets_total",
                &format!("reason=\"{}\"", reason.name()),
            )
        };
        let mut passed_to_kernel = 0;
        for reason in Reason::ALL.into_iter().filter(|r| *r != Reason::Forwarded) {
            passed_to_kernel += count(reason)?;
        }
        let group_label = format!("group=\"{group}\"");
        let group_total = |metric| read_metric(text, metric, &group_label);
        let mut modes = Vec::new();
        for (name, _) in Mode::NAMES {
            let filter = format!("{group_label},mode=\"{name}\"");
            if read_metric(text, "fabriclb_group_mode", &filter)? == 1 {
                modes.push(name);
            }
        }
        ensure!(
            modes.len() == 1,
            "group {group} runs in {} modes at once: {modes:?}",
            modes.len()
        );
        Ok(Self {
            tx_errors: spines.iter().map(|s| s.tx_errors).sum(),
            spines,
            forwarded: count(Reason::Forwarded)?,
            passed_to_kernel,
            new_flowlets: group_total("fabriclb_group_new_flowlets_total")?,
            flowlet_moves: group_total("fabriclb_group_flowlet_moves_total")?,
            sprayed: group_total("fabriclb_group_sprayed_packets_total")?,
            pinned: group_total("fabriclb_group_pinned_packets_total")?,
            mode: modes[0].to_owned(),
        })
    }

    /// Each spine's share of the bytes forwarded, in spine order (0..=1).
    pub fn byte_shares(&self) -> Vec<f64> {
        let total: u64 = self.spines.iter().map(|s| s.bytes).sum();
        self.spines
            .iter()
            .map(|s| s.bytes as f64 / total.max(1) as f64)
            .collect()
    }

    /// Busiest spine's bytes over the mean; `None` when none carried any.
    pub fn byte_mmr(&self) -> Option<f64> {
        mmr(self.spines.iter().map(|s| s.bytes))
    }

    /// Busiest spine's sprayed packets over the mean; `None` when none
    /// was sprayed.
    pub fn sprayed_mmr(&self) -> Option<f64> {
        mmr(self.spines.iter().map(|s| s.sprayed))
    }

    /// Packets all spines but number `j` (1-based) carried.
    pub fn packets_except(&self, j: usize) -> u64 {
        self.spines
            .iter()
            .enumerate()
            .filter(|(i, _)| i + 1 != j)
            .map(|(_, s)| s.packets)
            .sum()
    }
}

/// What the leaf's egress `interface` failed to send for `cause`; a
/// missing metric is an error where it must be there (`required`: the
/// interface of a next hop in the group), 0 elsewhere.
fn egress_errors(text: &str, interface: &str, cause: &str, required: bool) -> Result<u64> {
    let labels = format!("interface=\"{interface}\",cause=\"{cause}\"");
    let metric = "fabriclb_egress_tx_errors_total";
    if required || text.contains(&format!("{metric}{{{labels}")) {
        read_metric(text, metric, &labels)
    } else {
        Ok(0)
    }
}

/// Max over mean; `None` for nothing (no values, or all 0), which no
/// upper bound may pass for an even spread.
pub fn mmr(values: impl Iterator<Item = u64> + Clone) -> Option<f64> {
    let n = values.clone().count() as f64;
    let sum = values.clone().sum::<u64>();
    let max = values.max()?;
    (sum > 0).then(|| max as f64 / (sum as f64 / n))
}

#[cfg(test)]
mod tests {
    use lb_common::abi::{GroupStats, NextHopStats, VerdictCount, tx_errors::TxErrors};

    use super::*;
    use crate::config::{NextHopAddr, NextHopSpec};
    use crate::metrics::{DaemonSample, EgressSample, GroupSample, NextHopSample, render};

    #[test]
    fn max_over_mean_is_none_without_data() {
        assert_eq!(mmr([3u64, 1, 2, 2].into_iter()), Some(1.5));
        assert_eq!(mmr([0u64, 0].into_iter()), None);
        assert_eq!(mmr(std::iter::empty::<u64>()), None);
    }

    fn text() -> String {
        let verdicts = [VerdictCount {
            packets: 3,
            bytes: 192,
        }; Reason::COUNT as usize];
        let groups = [GroupSample {
            name: "spines",
            mode: Mode::Flowlet.code(),
            stats: GroupStats {
                pinned: 9,
                ..GroupStats::default()
            },
        }];
        let spec = NextHopSpec {
            interface: "s1".into(),
            addr: NextHopAddr::Ip("198.18.1.2".parse().unwrap()),
            vlan: None,
        };
        let nexthops = [NextHopSample {
            group: "spines",
            spec: &spec,
            usable: true,
            stats: NextHopStats {
                packets: 5,
                ..NextHopStats::default()
            },
            quality: 1024,
            path: None,
            destinations: Vec::new(),
        }];
        let egress = [EgressSample {
            interface: "s1".into(),
            tx_errors: TxErrors {
                refused: 2,
                dropped: 1,
            },
        }];
        let daemon = DaemonSample {
            last_reload_successful: true,
            last_reload_success_seconds: 0.0,
            flowlet_capacity: 1024,
            flowlet_entries: 0,
        };
        render(
            &daemon,
            &crate::metrics::EventsSample::none(),
            &verdicts,
            &groups,
            &nexthops,
            &[],
            Some(&egress),
        )
    }

    #[test]
    fn a_next_hops_labels_are_its_interface_address_and_vlan() {
        assert_eq!(
            nexthop_labels("s1 198.18.1.2"),
            "interface=\"s1\",address=\"198.18.1.2\""
        );
        assert_eq!(
            nexthop_labels("eth2 02:00:00:00:00:01 vlan 7"),
            "interface=\"eth2\",address=\"02:00:00:00:00:01\",vlan=\"7\""
        );
    }

    #[test]
    fn reads_every_counter_of_the_group() {
        let counters = LeafCounters::parse("spines", &["s1 198.18.1.2".into()], &text()).unwrap();
        assert_eq!(counters.mode, "flowlet");
        assert_eq!(counters.pinned, 9);
        assert_eq!(counters.forwarded, 3);
        assert_eq!(
            counters.passed_to_kernel,
            3 * (u64::from(Reason::COUNT) - 1)
        );
        assert_eq!(counters.spines[0].packets, 5);
        assert!(counters.spines[0].usable);
        assert_eq!(counters.spines[0].tx_errors, 3);
        assert_eq!(counters.tx_errors, 3);
    }

    #[test]
    fn a_missing_metric_is_an_error_naming_it_and_its_labels() {
        let labels = ["s1 198.18.1.2".to_owned()];
        for (line, metric, filter) in [
            (
                "fabriclb_group_sprayed_packets_total{",
                "fabriclb_group_sprayed_packets_total",
                "group=\"spines\"",
            ),
            (
                "fabriclb_nexthop_sprayed_packets_total{",
                "fabriclb_nexthop_sprayed_packets_total",
                "interface=\"s1\",address=\"198.18.1.2\"",
            ),
            (
                "fabriclb_egress_tx_errors_total{interface=\"s1\",cause=\"dropped\"}",
                "fabriclb_egress_tx_errors_total",
                "interface=\"s1\",cause=\"dropped\"",
            ),
            (
                "fabriclb_packets_total{reason=\"no_route\"}",
                "fabriclb_packets_total",
                "reason=\"no_route\"",
            ),
            (
                "fabriclb_group_mode{group=\"spines\",mode=\"ecmp\"}",
                "fabriclb_group_mode",
                "mode=\"ecmp\"",
            ),
        ] {
            let without: String = text()
                .lines()
                .filter(|l| !l.starts_with(line))
                .map(|l| format!("{l}\n"))
                .collect();
            let error = LeafCounters::parse("spines", &labels, &without)
                .expect_err(line)
                .to_string();
            assert!(
                error.contains(metric) && error.contains(filter),
                "{line}: {error}"
            );
        }
        let other_group = text().replace("group=\"spines\"", "group=\"leaves\"");
        assert!(LeafCounters::parse("spines", &labels, &other_group).is_err());
    }
}
