//! A group's destination classes (`destinations` in the config): each has
//! an id the routes toward it carry in their value, a row of path
//! qualities over the group's next hops and a spray sequence weighted by
//! them; members, buckets and flowlet state stay the group's. Class 0 is
//! no class: the next hops' own qualities and the group's sequence. What
//! telemetry changes is written here: qualities, and the sequences they
//! weigh.

use std::collections::{BTreeSet, HashMap};

use lb_common::limits::{MAX_CLASSES, NO_NEXTHOP};
use lb_common::route::{Destination, quality_index, quality_path};
use lb_common::select::flowlet::PATH_QUALITY_DEFAULT;

use super::{BUCKETS_PER_GROUP, GroupTable, Ids, Tables, TablesError};
use crate::config::Config;
use crate::dataplane::{Dataplane, DataplaneError};

/// One destination class of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassTable {
    /// `1..MAX_CLASSES`.
    pub id: u32,
    /// The destination's name in the config.
    pub name: String,
    /// The spray sequence by the class's qualities.
    pub spray: Vec<u32>,
}

impl ClassTable {
    fn new(id: u32, name: &str) -> Self {
        Self {
            id,
            name: name.to_owned(),
            spray: vec![NO_NEXTHOP; BUCKETS_PER_GROUP as usize],
        }
    }
}

/// Each config group's classes, in destination order, ids kept from
/// `previous` where group and destination names stay (as group ids are,
/// so a reload never points a route at a row another class still uses).
pub(super) fn build(
    config: &Config,
    previous: Option<&Tables>,
) -> Result<Vec<Vec<ClassTable>>, TablesError> {
    let old: HashMap<(String, String), u32> = (previous.into_iter())
        .flat_map(|p| &p.groups)
        .flat_map(|g| {
            g.classes
                .iter()
                .map(|c| ((g.name.clone(), c.name.clone()), c.id))
        })
        .collect();
    let mut ids = Ids::new(old, MAX_CLASSES, "destinations");
    // Class 0 is no class.
    ids.reserve(0);
    config
        .groups
        .iter()
        .map(|group| {
            let keys: Vec<(String, String)> = (group.destinations.iter())
                .map(|d| (group.name.clone(), d.name.clone()))
                .collect();
            let classes = ids.ids(&keys)?;
            Ok((classes.into_iter().zip(&group.destinations))
                .map(|(id, d)| ClassTable::new(id, &d.name))
                .collect())
        })
        .collect()
}

/// The qualities by [`quality_index`]: each next hop's own (class 0) and
/// each class's over its group's `members`; a path that stays keeps what
/// telemetry gave it, a new one starts at the default, unused entries are
/// 0.
pub(super) fn qualities(
    members: &[Vec<u32>],
    classes: &[Vec<ClassTable>],
    previous: Option<&Tables>,
) -> Vec<u32> {
    let indices: Vec<u32> = (members.iter().zip(classes))
        .flat_map(|(ids, classes)| {
            class_ids(classes)
                .flat_map(move |class| ids.iter().map(move |&id| quality_index(class, id)))
        })
        .collect();
    let len = indices.iter().max().map_or(0, |m| *m as usize + 1);
    let mut quality = vec![0; len];
    let old = |index: u32| previous.and_then(|p| p.quality.get(index as usize).copied());
    for index in indices {
        quality[index as usize] = old(index)
            .filter(|&q| q != 0)
            .unwrap_or(PATH_QUALITY_DEFAULT);
    }
    quality
}

impl Tables {
    /// Sets the path qualities in `changes` ([`quality_index`], quality),
    /// in the maps too, and refits the spray sequences of the groups they
    /// are in.
    pub fn write_qualities(
        &mut self,
        dp: &mut Dataplane,
        changes: &[(u32, u32)],
    ) -> Result<(), DataplaneError> {
        let mut touched = BTreeSet::new();
        for &(index, quality) in changes {
            let Some(slot) = self.quality.get_mut(index as usize) else {
                continue;
            };
            *slot = quality;
            dp.set_path_quality(index, quality)?;
            let (_, id) = quality_path(index);
            touched
                .extend((0..self.groups.len()).filter(|&g| self.groups[g].members.contains(&id)));
        }
        for g in touched {
            let (nexthops, quality) = (&self.nexthops, &self.quality);
            let group = &mut self.groups[g];
            let before: Vec<(u32, Vec<u32>)> = group
                .sprays()
                .map(|(row, seq)| (row, seq.to_vec()))
                .collect();
            group.rebalance(nexthops, quality);
            let before: Vec<(u32, &[u32])> =
                (before.iter()).map(|(r, s)| (*r, s.as_slice())).collect();
            group.write_sprays(dp, &before)?;
        }
        Ok(())
    }
}

/// Class 0 (the next hops' own), then each of `classes`' ids.
pub(super) fn class_ids(classes: &[ClassTable]) -> impl Iterator<Item = u32> + '_ {
    std::iter::once(0).chain(classes.iter().map(|c| c.id))
}

impl GroupTable {
    /// Class 0 (the next hops' own), then each of the group's classes.
    pub fn class_ids(&self) -> impl Iterator<Item = u32> + '_ {
        class_ids(&self.classes)
    }

    /// Each spray sequence with its row of `FL_SPRAY`: the group's, then
    /// its classes'.
    pub fn sprays(&self) -> impl Iterator<Item = (u32, &[u32])> {
        let row = |class: u32| {
            Destination {
                group: self.id,
                class,
            }
            .spray_row()
        };
        let classes = (self.classes.iter()).map(move |c| (row(c.id), c.spray.as_slice()));
        std::iter::once((row(0), self.spray.as_slice())).chain(classes)
    }

    /// Writes each spray sequence that differs from `old`'s at its row
    /// (every one with no old sequence there).
    pub(super) fn write_sprays(
        &self,
        dp: &mut Dataplane,
        old: &[(u32, &[u32])],
    ) -> Result<(), DataplaneError> {
        for (row, sequence) in self.sprays() {
            let was = old.iter().find(|(r, _)| *r == row).map(|(_, s)| *s);
            dp.write_spray(row, was, sequence)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use lb_common::abi::NextHop;

    use super::*;
    use crate::config;

    /// Group "g" over two remote next hops with `destinations` (name,
    /// prefix), routes to each prefix and to 198.19.9.0/24.
    fn tables(destinations: &[(&str, &str)], previous: Option<&Tables>) -> Tables {
        let mut text = String::from(
            "[switch]\ninterfaces = [\"eth0\"]\n[[group]]\nname = \"g\"\ntelemetry = \"remote\"\n\
             next_hops = [\n",
        );
        for ip in ["10.0.0.1", "10.0.0.2"] {
            text.push_str(&format!(
                "{{ interface = \"eth1\", ip = \"{ip}\", telemetry_url = \
                 \"http://{ip}:9100/metrics\", telemetry_device = \"own\" }},\n"
            ));
        }
        text.push_str("]\ndestinations = [\n");
        for (name, prefix) in destinations {
            text.push_str(&format!(
                "{{ name = \"{name}\", prefixes = [\"{prefix}\"], telemetry_device = \"{name}\" }},\n"
            ));
        }
        text.push_str("]\n");
        for (_, prefix) in destinations.iter().chain(&[("", "198.19.9.0/24")]) {
            text.push_str(&format!(
                "[[route]]\nprefix = \"{prefix}\"\ngroup = \"g\"\n"
            ));
        }
        let config = config::parse(&text, Path::new("classes.toml")).expect("valid config");
        Tables::build(&config, previous, |_| NextHop::default()).expect("tables")
    }

    fn route_value(tables: &Tables, prefix: &str) -> Destination {
        let (_, value) = (tables.routes.iter())
            .find(|(p, _)| p.to_string() == prefix)
            .expect("route");
        Destination::of_value(*value)
    }

    /// Classes take ids from 1 in config order; each route carries its
    /// destination's; each class has a quality row over the members at
    /// the default, and a spray sequence over them; a reload that drops
    /// one class and adds another keeps the staying one's id and does not
    /// hand out the dropped one's.
    #[test]
    fn classes_carry_their_ids_rows_and_sequences_through_reloads() {
        let first = tables(&[("l2", "198.19.2.0/24"), ("l3", "198.19.3.0/24")], None);
        let group = &first.groups[0];
        let ids: Vec<(&str, u32)> = group
            .classes
            .iter()
            .map(|c| (c.name.as_str(), c.id))
            .collect();
        assert_eq!(ids, [("l2", 1), ("l3", 2)]);
        let to = |prefix| route_value(&first, prefix);
        assert_eq!(
            to("198.19.2.0/24"),
            Destination {
                group: group.id,
                class: 1
            }
        );
        assert_eq!(
            to("198.19.3.0/24"),
            Destination {
                group: group.id,
                class: 2
            }
        );
        assert_eq!(
            to("198.19.9.0/24"),
            Destination {
                group: group.id,
                class: 0
            }
        );
        for class in [0, 1, 2] {
            for &id in &group.members {
                assert_eq!(first.quality[quality_index(class, id) as usize], 1024);
            }
        }
        for class in &group.classes {
            assert_eq!(class.spray, group.spray, "equal qualities, equal sequences");
        }
        let second = tables(
            &[("l3", "198.19.3.0/24"), ("l4", "198.19.4.0/24")],
            Some(&first),
        );
        let ids: Vec<(&str, u32)> = second.groups[0]
            .classes
            .iter()
            .map(|c| (c.name.as_str(), c.id))
            .collect();
        assert_eq!(ids, [("l3", 2), ("l4", 3)]);
        assert_eq!(route_value(&second, "198.19.4.0/24").class, 3);
    }
}
