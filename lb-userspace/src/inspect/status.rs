//! `status`: what an instance's maps hold and counted, per group, as text
//! or JSON. Per-CPU values are summed; a recent load is summed over CPUs
//! each at its own CPU's load epoch, as the data plane would read it.

use std::fmt::Write as _;

use lb_common::abi::{GroupEntry, NEXTHOP_USABLE};
use lb_common::limits::{BUCKETS_PER_GROUP, MAX_CLASSES, MAX_GROUPS};
use lb_common::route::quality_index;
use lb_common::verdict::Reason;
use serde::Serialize;

use super::maps::{InspectError, MapSet, map_err};
use super::names::Names;
use super::view::MapView;
use super::{group_line, hash_field_names, mode_name, spray_name};
use crate::config::format_mac;

#[derive(Debug, Serialize)]
pub struct Status {
    /// Packets per verdict reason, all of them, in the counters' order.
    pub verdicts: Vec<Verdict>,
    pub flowlet_entries: u64,
    pub flowlet_capacity: u32,
    /// The ports the program takes frames from, and the MACs it takes
    /// them for.
    pub ports: Vec<PortStatus>,
    pub groups: Vec<GroupStatus>,
    /// Why some groups go by id.
    pub notes: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct Verdict {
    pub reason: &'static str,
    pub packets: u64,
    /// Their frames' bytes as the program left them.
    pub bytes: u64,
}

#[derive(Debug, Serialize)]
pub struct PortStatus {
    pub interface: String,
    pub ifindex: u32,
    pub mac: String,
    /// The switch's DLB MAC; `null` for none.
    pub dlb_mac: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct GroupStatus {
    pub id: u32,
    /// From the config; `null` when it does not name the group.
    pub name: Option<String>,
    pub mode: String,
    pub flowlet_gap_us: u64,
    pub spray: String,
    pub hash_fields: Vec<&'static str>,
    pub hash_seed: u32,
    pub generation: u32,
    /// Flowlet table entries of this group.
    pub flowlets: u64,
    pub new_flowlets: u64,
    pub flowlet_moves: u64,
    pub sprayed: u64,
    pub pinned: u64,
    pub next_hops: Vec<NextHopStatus>,
    #[serde(skip)]
    entry: GroupEntry,
}

#[derive(Debug, Serialize)]
pub struct NextHopStatus {
    pub slot: u32,
    pub id: u32,
    /// The config's spec (`eth4 10.0.1.1`); `null` when not named.
    pub name: Option<String>,
    pub interface: String,
    pub ifindex: u32,
    pub mac: String,
    pub vlan: u16,
    pub usable: bool,
    /// Its own quality (class 0): what routes without a destination use.
    pub quality: u32,
    /// Its quality toward each destination class its group is rated for:
    /// what routes with a destination use (on a fabric leaf, every route).
    pub destinations: Vec<DestinationQuality>,
    /// Recent bytes, what a new flowlet compares next hops by.
    pub load: u64,
    /// Of the group's buckets, those ECMP sends here.
    pub buckets: u32,
    pub packets: u64,
    pub bytes: u64,
    pub sprayed: u64,
}

#[derive(Debug, Serialize)]
pub struct DestinationQuality {
    pub class: u32,
    /// From the config; `null` when it does not name the class.
    pub destination: Option<String>,
    pub quality: u32,
}

/// The destination classes `members` are rated for, each with their
/// qualities in it, in `members`' order: the classes in which any of them
/// has a quality (the daemon writes one for every member of a class's
/// group; unused entries are 0). A next hop in several groups shows the
/// classes of each.
fn rated_classes(maps: &MapSet, members: &[u32]) -> Result<Vec<(u32, Vec<u32>)>, InspectError> {
    let mut rated = Vec::new();
    for class in 1..MAX_CLASSES {
        let row = (members.iter())
            .map(|&id| maps.quality(quality_index(class, id)))
            .collect::<Result<Vec<u32>, _>>()?;
        if row.iter().any(|&q| q != 0) {
            rated.push((class, row));
        }
    }
    Ok(rated)
}

impl Status {
    pub fn read(maps: &MapSet, names: &Names) -> Result<Self, InspectError> {
        let verdicts = Reason::ALL
            .iter()
            .zip(maps.verdicts()?)
            .map(|(r, count)| Verdict {
                reason: r.name(),
                packets: count.packets,
                bytes: count.bytes,
            })
            .collect();
        let generations: Vec<(u32, u32)> = (0..MAX_GROUPS)
            .filter_map(|id| match maps.group_at(id) {
                Ok(Some(g)) if g.in_use != 0 => Some(Ok((g.generation, id))),
                Ok(_) => None,
                Err(e) => Some(Err(e)),
            })
            .collect::<Result<_, _>>()?;
        let mut per_group = [0u64; MAX_GROUPS as usize];
        let mut flowlet_entries = 0;
        for states in maps.typed.flowlets.iter() {
            let states = states.map_err(map_err(lb_common::abi::FLOWLETS))?;
            // An entry counts for each group with state in it on some CPU.
            let mut held = [false; MAX_GROUPS as usize];
            for state in states.iter() {
                if let Some(&(_, id)) = generations.iter().find(|(g, _)| *g == state.generation) {
                    held[id as usize] = true;
                }
            }
            flowlet_entries += u64::from(held.contains(&true));
            for (n, held) in per_group.iter_mut().zip(held) {
                *n += u64::from(held);
            }
        }
        let epochs = maps.epochs(0)?;
        let mut groups = Vec::new();
        for id in 0..MAX_GROUPS {
            let Some(entry) = maps.group_at(id)?.filter(|g| g.in_use != 0) else {
                continue;
            };
            let stats = maps.group_stats(id)?;
            let sum = |f: fn(&lb_common::abi::GroupStats) -> u64| stats.iter().map(f).sum();
            let mut buckets = Vec::with_capacity(BUCKETS_PER_GROUP as usize);
            for b in 0..BUCKETS_PER_GROUP {
                buckets.extend(maps.bucket(id * BUCKETS_PER_GROUP + b)?);
            }
            let members = &entry.members[..entry.member_count as usize];
            let classes = rated_classes(maps, members)?;
            let mut next_hops = Vec::new();
            for (slot, &nh_id) in (0u32..).zip(members) {
                let destinations = (classes.iter())
                    .map(|(class, row)| DestinationQuality {
                        class: *class,
                        destination: names.class(*class).map(str::to_owned),
                        quality: row[slot as usize],
                    })
                    .collect();
                let nh = maps.nexthop(nh_id)?.unwrap_or_default();
                let stats = maps.nexthop_stats(nh_id)?;
                let stats: &[lb_common::abi::NextHopStats] = stats.as_deref().map_or(&[], |s| s);
                let total = |f: fn(&lb_common::abi::NextHopStats) -> u64| stats.iter().map(f).sum();
                next_hops.push(NextHopStatus {
                    slot,
                    id: nh_id,
                    name: names.nexthop(nh_id).map(str::to_owned),
                    interface: names.interface(nh.ifindex),
                    ifindex: nh.ifindex,
                    mac: format_mac(nh.dst_mac),
                    vlan: nh.vlan,
                    usable: nh.flags & NEXTHOP_USABLE != 0,
                    quality: maps.quality(nh_id)?,
                    destinations,
                    load: stats
                        .iter()
                        .zip(&epochs)
                        .map(|(s, &epoch)| s.load.at(epoch))
                        .sum(),
                    buckets: buckets.iter().filter(|&&b| b == nh_id).count() as u32,
                    packets: total(|s| s.packets),
                    bytes: total(|s| s.bytes),
                    sprayed: total(|s| s.sprayed),
                });
            }
            groups.push(GroupStatus {
                id,
                name: names.group_name(id).map(str::to_owned),
                mode: mode_name(entry.mode),
                flowlet_gap_us: entry.flowlet_gap_ns / 1000,
                spray: spray_name(entry.spray),
                hash_fields: hash_field_names(entry.hash_fields),
                hash_seed: entry.hash_seed,
                generation: entry.generation,
                flowlets: per_group[id as usize],
                new_flowlets: sum(|s| s.new_flowlets),
                flowlet_moves: sum(|s| s.flowlet_moves),
                sprayed: sum(|s| s.sprayed),
                pinned: sum(|s| s.pinned),
                next_hops,
                entry,
            });
        }
        let mut ports: Vec<PortStatus> = maps
            .ports()?
            .into_iter()
            .map(|p| PortStatus {
                interface: names.interface(p.ifindex),
                ifindex: p.ifindex,
                mac: format_mac(p.own),
                dlb_mac: (p.dlb != [0; 6]).then(|| format_mac(p.dlb)),
            })
            .collect();
        ports.sort_by_key(|p| p.ifindex);
        Ok(Self {
            verdicts,
            flowlet_entries,
            flowlet_capacity: maps.flowlet_capacity,
            ports,
            groups,
            notes: names.notes.clone(),
        })
    }

    /// The text `fabriclb status` prints.
    pub fn render(&self, names: &Names) -> String {
        let mut out = String::new();
        let counted: Vec<String> = self
            .verdicts
            .iter()
            .map(|v| format!("{} {}", v.reason, v.packets))
            .collect();
        writeln!(out, "verdicts: {}", counted.join(", ")).unwrap();
        writeln!(
            out,
            "flowlet table: {} of {} entries",
            self.flowlet_entries, self.flowlet_capacity
        )
        .unwrap();
        let ports: Vec<String> = self
            .ports
            .iter()
            .map(|p| {
                let dlb = p
                    .dlb_mac
                    .as_ref()
                    .map_or_else(String::new, |m| format!(", dlb {m}"));
                format!("{} (ifindex {}) {}{dlb}", p.interface, p.ifindex, p.mac)
            })
            .collect();
        writeln!(out, "ingress ports: {}", ports.join("; ")).unwrap();
        for note in &self.notes {
            writeln!(out, "note: {note}").unwrap();
        }
        for g in &self.groups {
            writeln!(out, "\ngroup {}", group_line(g.id, &g.entry, names)).unwrap();
            writeln!(
                out,
                "  flowlets {}, new flowlets {}, moves {}, sprayed {}, pinned {}",
                g.flowlets, g.new_flowlets, g.flowlet_moves, g.sprayed, g.pinned
            )
            .unwrap();
            writeln!(
                out,
                "  {:<4} {:<4} {:<32} {:<6} {:>7} {:>12} {:>7} {:>12} {:>14} {:>10}",
                "slot",
                "id",
                "next hop",
                "usable",
                "quality",
                "load",
                "buckets",
                "packets",
                "bytes",
                "sprayed"
            )
            .unwrap();
            for nh in &g.next_hops {
                let vlan = match nh.vlan {
                    0 => String::new(),
                    v => format!(" vlan {v}"),
                };
                let what = nh
                    .name
                    .clone()
                    .unwrap_or_else(|| format!("{} {}{vlan}", nh.interface, nh.mac));
                writeln!(
                    out,
                    "  {:<4} {:<4} {:<32} {:<6} {:>7} {:>12} {:>7} {:>12} {:>14} {:>10}",
                    nh.slot,
                    nh.id,
                    what,
                    if nh.usable { "yes" } else { "no" },
                    nh.quality,
                    nh.load,
                    nh.buckets,
                    nh.packets,
                    nh.bytes,
                    nh.sprayed
                )
                .unwrap();
                if !nh.destinations.is_empty() {
                    let toward: Vec<String> = (nh.destinations.iter())
                        .map(|d| match &d.destination {
                            Some(name) => format!("{name} {}", d.quality),
                            None => format!("class {} {}", d.class, d.quality),
                        })
                        .collect();
                    writeln!(out, "       quality toward {}", toward.join(", ")).unwrap();
                }
            }
        }
        out
    }
}
