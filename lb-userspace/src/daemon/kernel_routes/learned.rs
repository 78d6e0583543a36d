//! Kernel routes become fabriclb routes and groups: routes with the same
//! next hops (and weights) share a group, named after the group that
//! follows the kernel (`uplinks#1`, `uplinks#2`, ...). A group keeps its
//! name while its routes stay together, whatever happens to its next hops:
//! when a BGP session drops, every route of the set loses the next hop,
//! one message per prefix, and the group that held them takes the new
//! set in place, so the next hops that stay keep their buckets
//! (`Tables::build` keeps a group's buckets by name) and only the leaving
//! one's flows move.

use std::collections::{BTreeMap, BTreeSet};

use lb_common::limits::{MAX_GROUPS, MAX_NEXTHOPS, MAX_ROUTES};

use super::kernel::{NextHopSet, Selected, Skip};
use crate::config::{Config, Group, Prefix, Route, learned_group_name};

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct LearnedGroup {
    /// The group that follows the kernel.
    pub(super) parent: String,
    /// Its number among the parent's: the `1` of `uplinks#1`.
    pub(super) n: usize,
    pub(super) set: NextHopSet,
    pub(super) routes: BTreeSet<Prefix>,
}

/// What the kernel's routes have become.
#[derive(Debug, Default)]
pub(super) struct Learned {
    pub(super) groups: Vec<LearnedGroup>,
    /// The routes not learned, and why.
    pub(super) skipped: BTreeMap<Prefix, Skip>,
}

/// What an update changed, for the log: said once, when it happens.
#[derive(Debug, Default, PartialEq, Eq)]
pub(in crate::daemon) struct Report {
    /// Routes newly skipped, or skipped for another reason.
    pub(super) skipped: Vec<(Prefix, Skip)>,
    /// Routes skipped before and learned now or gone.
    pub(super) unskipped: Vec<Prefix>,
    /// Groups that appeared, changed next hops, or went.
    pub(super) groups: Vec<String>,
    /// New groups and the group most of their routes came from, whose
    /// buckets they start from.
    pub(in crate::daemon) splits: Vec<(String, String)>,
}

/// What the tables have room for beyond the file's own.
struct Budget {
    groups: usize,
    routes: usize,
    nexthops: usize,
}

impl Budget {
    fn of(config: &Config) -> Self {
        let own = config.groups.iter().filter(|g| !g.learns_routes());
        let (groups, nexthops) =
            own.fold((0, 0), |(g, n), group| (g + 1, n + group.next_hops.len()));
        Self {
            groups: MAX_GROUPS as usize - groups.min(MAX_GROUPS as usize),
            routes: MAX_ROUTES as usize - config.routes.len().min(MAX_ROUTES as usize),
            nexthops: MAX_NEXTHOPS as usize - nexthops.min(MAX_NEXTHOPS as usize),
        }
    }
}

impl Learned {
    /// Learns what `selected` (per kernel-following group of `config`, by
    /// name) holds. A new set of next hops takes over the group whose
    /// routes it holds most of; sets that no group's routes went to get a
    /// number no group had.
    pub(super) fn update(
        &mut self,
        config: &Config,
        selected: &BTreeMap<String, Selected>,
    ) -> Report {
        let mut budget = Budget::of(config);
        let mut groups = Vec::new();
        let mut skipped = BTreeMap::new();
        let mut splits = Vec::new();
        for parent in config.groups.iter().filter(|g| g.learns_routes()) {
            let Some(routes) = selected.get(&parent.name) else {
                continue;
            };
            let mut sets: BTreeMap<&NextHopSet, BTreeSet<Prefix>> = BTreeMap::new();
            for (prefix, learned) in routes {
                match learned {
                    Ok(set) => {
                        sets.entry(&**set).or_default().insert(*prefix);
                    }
                    Err(skip) => {
                        skipped.insert(*prefix, skip.clone());
                    }
                }
            }
            let old: Vec<&LearnedGroup> = self
                .groups
                .iter()
                .filter(|g| g.parent == parent.name)
                .collect();
            let numbers = heirs(&sets, &old);
            // Where the routes of a set no group goes on as came from.
            let origin = |prefixes: &BTreeSet<Prefix>| {
                old.iter()
                    .map(|g| (prefixes.intersection(&g.routes).count(), g.n))
                    .filter(|&(shared, _)| shared > 0)
                    .max_by_key(|&(shared, n)| (shared, std::cmp::Reverse(n)))
                    .map(|(_, n)| learned_group_name(&parent.name, n))
            };
            let taken: BTreeSet<usize> = old.iter().map(|g| g.n).collect();
            let mut fresh = (1..).filter(|n| !taken.contains(n));
            // Groups that go on first: they keep their room.
            let mut order: Vec<_> = sets.iter().collect();
            order.sort_by_key(|(set, _)| !numbers.contains_key(*set));
            for (set, prefixes) in order {
                if budget.groups == 0 || budget.nexthops < set.len() {
                    let skip = if budget.groups == 0 {
                        Skip::NoGroupLeft
                    } else {
                        Skip::NextHopTableFull
                    };
                    skipped.extend(prefixes.iter().map(|p| (*p, skip.clone())));
                    continue;
                }
                let room = budget.routes.min(prefixes.len());
                skipped.extend(
                    prefixes
                        .iter()
                        .skip(room)
                        .map(|p| (*p, Skip::RouteTableFull)),
                );
                if room == 0 {
                    continue;
                }
                budget.groups -= 1;
                budget.nexthops -= set.len();
                budget.routes -= room;
                let n = match numbers.get(*set) {
                    Some(&n) => n,
                    None => {
                        let n = fresh.next().unwrap_or(usize::MAX);
                        if let Some(from) = origin(prefixes) {
                            splits.push((learned_group_name(&parent.name, n), from));
                        }
                        n
                    }
                };
                groups.push(LearnedGroup {
                    parent: parent.name.clone(),
                    n,
                    set: (*set).clone(),
                    routes: prefixes.iter().take(room).copied().collect(),
                });
            }
        }
        groups.sort_by(|a, b| {
            let at = |g: &LearnedGroup| config.groups.iter().position(|p| p.name == g.parent);
            (at(a), a.n).cmp(&(at(b), b.n))
        });
        let mut report = self.report(&groups, &skipped);
        report.splits = splits;
        self.groups = groups;
        self.skipped = skipped;
        report
    }

    fn report(&self, groups: &[LearnedGroup], skipped: &BTreeMap<Prefix, Skip>) -> Report {
        let name = |g: &LearnedGroup| learned_group_name(&g.parent, g.n);
        let mut report = Report {
            skipped: skipped
                .iter()
                .filter(|(p, s)| self.skipped.get(p) != Some(s))
                .map(|(p, s)| (*p, s.clone()))
                .collect(),
            unskipped: self
                .skipped
                .keys()
                .filter(|p| !skipped.contains_key(p))
                .copied()
                .collect(),
            groups: Vec::new(),
            splits: Vec::new(),
        };
        for group in groups {
            let was = self.groups.iter().find(|g| name(g) == name(group));
            let line = match was {
                None => "learned".to_string(),
                Some(was) if was.set != group.set => {
                    format!("next hops changed (was {})", show(&was.set))
                }
                Some(_) => continue,
            };
            report.groups.push(format!(
                "group {}: {line}: {}, {} routes",
                name(group),
                show(&group.set),
                group.routes.len()
            ));
        }
        for was in &self.groups {
            if !groups.iter().any(|g| name(g) == name(was)) {
                report.groups.push(format!(
                    "group {}: gone (no route has its next hops)",
                    name(was)
                ));
            }
        }
        report
    }

    /// `config` with the learned groups and routes in place of the groups
    /// that follow the kernel: what the tables are built from.
    pub(super) fn effective(&self, config: &Config) -> Config {
        let mut out = config.clone();
        let mut index = Vec::with_capacity(config.groups.len());
        out.groups.clear();
        for group in &config.groups {
            index.push((!group.learns_routes()).then_some(out.groups.len()));
            if !group.learns_routes() {
                out.groups.push(group.clone());
            }
        }
        // Validation lets no [[route]] point at a group that follows the
        // kernel: each keeps its group.
        out.routes = config
            .routes
            .iter()
            .filter_map(|r| index[r.group].map(|group| Route { group, ..*r }))
            .collect();
        for learned in &self.groups {
            let Some(parent) = config.groups.iter().find(|g| g.name == learned.parent) else {
                continue;
            };
            let (next_hops, weights): (Vec<_>, Vec<_>) = learned.set.iter().cloned().unzip();
            let equal = weights.windows(2).all(|w| w[0] == w[1]);
            let group = out.groups.len();
            let telemetry = (parent.telemetry.as_ref()).map(|t| t.for_learned(&next_hops));
            out.groups.push(Group {
                name: learned_group_name(&parent.name, learned.n),
                telemetry,
                next_hops,
                weights: if equal { Vec::new() } else { weights },
                kernel_routes: None,
                sonic_routes: None,
                ..parent.clone()
            });
            out.routes
                .extend(learned.routes.iter().map(|&prefix| Route { prefix, group }));
        }
        out
    }
}

/// Which old group's number each new set takes: each old group, lowest
/// number first, goes on as the set not yet taken that holds most of its
/// routes. So a group whose routes take a new set over several writes
/// keeps its number through them, and at the last write takes the new set
/// in place while the group split off for the early movers goes.
fn heirs<'a>(
    sets: &BTreeMap<&'a NextHopSet, BTreeSet<Prefix>>,
    old: &[&LearnedGroup],
) -> BTreeMap<&'a NextHopSet, usize> {
    let mut order: Vec<&LearnedGroup> = old.to_vec();
    order.sort_by_key(|g| g.n);
    let mut heirs = BTreeMap::new();
    for group in order {
        let best = sets
            .iter()
            .filter(|(set, _)| !heirs.contains_key(**set))
            .map(|(set, prefixes)| (prefixes.intersection(&group.routes).count(), *set))
            .filter(|&(shared, _)| shared > 0)
            .max_by_key(|&(shared, set)| (shared, std::cmp::Reverse(set)));
        if let Some((_, set)) = best {
            heirs.insert(set, group.n);
        }
    }
    heirs
}

/// `eth1 198.18.1.2, eth2 198.18.2.2 weight 3`.
fn show(set: &NextHopSet) -> String {
    let hops: Vec<String> = set
        .iter()
        .map(|(spec, weight)| match weight {
            1 => spec.to_string(),
            w => format!("{spec} weight {w}"),
        })
        .collect();
    hops.join(", ")
}
