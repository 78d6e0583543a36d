//! What SONiC's rows mean for a config: [`Overlay::from_rows`] reads them
//! (refusing what is invalid, field by field), [`Overlay::apply`] lays
//! them over the file's config. Pure: no Redis, no kernel.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::ops::RangeInclusive;
use std::str::FromStr;

use lb_common::select::hash::HashFields;
use lb_common::select::quality::Scale;

use super::rows::{self, Row, Rows};
use crate::config::{
    ARS_WEIGHT_MAX, ArsProfile, BYTES_PER_SEC_PER_MBIT, Config, Group, Mode, NextHopAddr,
    SAMPLING_INTERVAL_MAX_US, SAMPLING_INTERVAL_MIN_US,
};

/// A row or field of SONiC's that was not taken, and why.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Refusal {
    /// The Redis key, `ARS_OBJECT|spines`.
    pub key: String,
    pub field: Option<String>,
    pub reason: String,
}

impl fmt::Display for Refusal {
    /// `"ARS_OBJECT|spines" field "assign_mode": ...`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.key)?;
        if let Some(field) = &self.field {
            write!(f, " field {field:?}")?;
        }
        write!(f, ": {}", self.reason)
    }
}

/// SONiC's `flowlet_idle_time` bounds (`sonic-ars.yang`), microseconds,
/// and its default (`arsorch.h`'s `ARS_OBJECT_DEFAULT_FLOWLET_IDLE_TIME_US`).
const IDLE_TIME: RangeInclusive<u32> = 2..=2047;
const IDLE_TIME_DEFAULT: u32 = 256;
/// The ARS_PROFILE load values are `uint16` in `sonic-ars.yang`.
const LOAD_VALUE: RangeInclusive<u64> = 0..=u16::MAX as u64;

/// `sonic-hash.yang`'s hash fields fabriclb does not hash on; the six it
/// does are `HashFields::NAMES` in upper case.
const UNHASHED: [&str; 15] = [
    "IN_PORT",
    "DST_MAC",
    "SRC_MAC",
    "ETHERTYPE",
    "VLAN_ID",
    "INNER_DST_MAC",
    "INNER_SRC_MAC",
    "INNER_ETHERTYPE",
    "INNER_IP_PROTOCOL",
    "INNER_DST_IP",
    "INNER_SRC_IP",
    "INNER_L4_DST_PORT",
    "INNER_L4_SRC_PORT",
    "IPV6_FLOW_LABEL",
    "RDMA_BTH_OPCODE",
];

/// Fields of each row that SONiC defines and fabriclb does not apply: not
/// read, and not "unknown" either. A list field is named without its `@`.
const SWITCH_HASH_UNREAD: [&str; 13] = [
    "ecmp_hash_ipv4",
    "ecmp_hash_ipv6",
    "ecmp_hash_ipnip",
    "ecmp_hash_ipv4_rdma",
    "ecmp_hash_ipv6_rdma",
    "lag_hash",
    "lag_hash_ipv4",
    "lag_hash_ipv6",
    "lag_hash_ipnip",
    "lag_hash_ipv4_rdma",
    "lag_hash_ipv6_rdma",
    "ecmp_hash_algorithm",
    "lag_hash_algorithm",
];
const PROFILE_UNREAD: [&str; 5] = [
    "profile_name",
    "ars_lag_path_selector_mode",
    "max_flows",
    "ipv4_enable",
    "ipv6_enable",
];
const OBJECT_UNREAD: [&str; 4] = [
    "ars_obj_name",
    "max_flows",
    "primary_path_threshold",
    "alternative_path_cost",
];
const INTERFACE_UNREAD: [&str; 2] = ["if_name", "scaling_factor"];
const NEXTHOP_UNREAD: [&str; 3] = ["vrf_name", "nexthop_ip", "role"];

/// What SONiC's rows set, ready to lay over any config.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Overlay {
    /// `SWITCH_HASH|GLOBAL` `ecmp_hash`: every group's hash fields.
    pub hash_fields: Option<HashFields>,
    /// `SWITCH_TABLE:switch` `ecmp_hash_seed`.
    pub hash_seed: Option<u32>,
    /// Present when an `ARS_PROFILE` row is.
    pub ars: Option<Ars>,
    /// What the rows held that was not taken, in key order.
    pub refusals: Vec<Refusal>,
}

/// SONiC's adaptive routing: the profile and the ARS objects groups take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ars {
    /// `ARS_PROFILE|<name>`.
    key: String,
    sampling_interval_us: Option<u32>,
    /// Past, current and future load.
    scales: [ScaleEdit; 3],
    selector: Selector,
    /// `default_ars_object`, where it names an object.
    default_object: Option<String>,
    objects: BTreeMap<String, ArsObject>,
    /// Port -> object, `ARS_INTERFACE`.
    interfaces: BTreeMap<String, String>,
    /// Next-hop IP -> object, `ARS_NEXTHOP|default|<ip>`.
    nexthops: BTreeMap<IpAddr, String>,
}

/// `ars_nhg_path_selector_mode`: what decides a next-hop group's ARS object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Selector {
    Global,
    Interface,
    Nexthop,
}

/// One measure's `_min_value`, `_max_value` and `_weight`, as given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct ScaleEdit {
    min: Option<u64>,
    max: Option<u64>,
    weight: Option<u32>,
}

/// An `ARS_OBJECT`: `None` where its field was invalid, so groups keep the
/// file's value for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ArsObject {
    mode: Option<Mode>,
    gap_us: Option<u32>,
}

/// The profile's measures: name, unit of one SONiC value in the profile's
/// own (bytes per second for loads, microseconds of queueing), and the
/// min, max and weight fields (`sonic-ars.yang` has no current-load
/// weight).
const MEASURES: [(&str, u64, [Option<&str>; 3]); 3] = [
    (
        "past_load",
        BYTES_PER_SEC_PER_MBIT,
        [
            Some("past_load_min_value"),
            Some("past_load_max_value"),
            Some("past_load_weight"),
        ],
    ),
    (
        "current_load",
        BYTES_PER_SEC_PER_MBIT,
        [
            Some("current_load_min_value"),
            Some("current_load_max_value"),
            None,
        ],
    ),
    (
        "future_load",
        1,
        [
            Some("future_load_min_value"),
            Some("future_load_max_value"),
            Some("future_load_weight"),
        ],
    ),
];

/// A row's fields as they are checked, refusals collected.
struct Fields<'a> {
    key: String,
    fields: &'a BTreeMap<String, String>,
    refusals: &'a mut Vec<Refusal>,
}

impl<'a> Fields<'a> {
    /// The row at `key`; `None`, refused, when it is no hash.
    fn of(key: String, row: &'a Row, refusals: &'a mut Vec<Refusal>) -> Option<Self> {
        match row {
            Ok(fields) => Some(Self {
                key,
                fields,
                refusals,
            }),
            Err(why) => {
                refusals.push(Refusal {
                    key,
                    field: None,
                    reason: why.clone(),
                });
                None
            }
        }
    }

    fn refuse(&mut self, field: &str, reason: String) {
        self.refusals.push(Refusal {
            key: self.key.clone(),
            field: Some(field.to_owned()),
            reason,
        });
    }

    /// Refuses each field that is neither in `read` nor in `unread`.
    fn unknown(&mut self, read: &[&str], unread: &[&str]) {
        let unknown: Vec<String> = self
            .fields
            .keys()
            .filter(|f| {
                let name = f.strip_suffix('@').unwrap_or(f);
                !read.contains(&f.as_str()) && !unread.contains(&name)
            })
            .cloned()
            .collect();
        for field in unknown {
            self.refuse(&field, "unknown field, ignored".into());
        }
    }

    /// `field` as a number within `range`; `None` when absent or refused.
    fn number<T>(&mut self, field: &str, range: RangeInclusive<T>, what: &str) -> Option<T>
    where
        T: FromStr + PartialOrd + fmt::Display,
    {
        let text = self.fields.get(field)?;
        match text.trim().parse::<T>() {
            Ok(n) if range.contains(&n) => Some(n),
            _ => {
                let reason = format!(
                    "{text:?} is not a number in {}..={} ({what})",
                    range.start(),
                    range.end()
                );
                self.refuse(field, reason);
                None
            }
        }
    }

    /// `field` as one of `names`; `None` when absent or refused.
    fn choice<T: Copy>(&mut self, field: &str, names: &[(&str, T)]) -> Option<T> {
        let text = self.fields.get(field)?;
        match names.iter().find(|(n, _)| n == text) {
            Some(&(_, value)) => Some(value),
            None => {
                let valid: Vec<&str> = names.iter().map(|(n, _)| *n).collect();
                self.refuse(
                    field,
                    format!("{text:?} is not one of {}", valid.join(", ")),
                );
                None
            }
        }
    }
}

impl Overlay {
    /// Reads SONiC's rows. Never fails: what cannot be taken is in
    /// [`Self::refusals`] and left out.
    pub fn from_rows(rows: &Rows) -> Self {
        let mut refusals = Vec::new();
        let hash_fields = rows
            .config
            .get(rows::SWITCH_HASH)
            .and_then(|row| Fields::of(rows::SWITCH_HASH.into(), row, &mut refusals))
            .and_then(|mut row| {
                row.unknown(&["ecmp_hash", "ecmp_hash@"], &SWITCH_HASH_UNREAD);
                hash_fields(&mut row)
            });
        let hash_seed = rows
            .appl
            .get(rows::SWITCH_TABLE)
            .and_then(|row| Fields::of(rows::SWITCH_TABLE.into(), row, &mut refusals))
            .and_then(|mut row| row.number("ecmp_hash_seed", 0..=u32::MAX, "a 32-bit seed"));
        let ars = Ars::from_rows(rows, &mut refusals);
        refusals.sort();
        Self {
            hash_fields,
            hash_seed,
            ars,
            refusals,
        }
    }

    /// `base` with SONiC's settings over it, and what SONiC set that this
    /// config cannot take (a group split between ARS objects, a profile
    /// that weighs nothing once laid over the file's).
    pub fn apply(&self, base: &Config) -> (Config, Vec<Refusal>) {
        let mut config = base.clone();
        let mut refusals = Vec::new();
        if let Some(seed) = self.hash_seed {
            config.switch.hash_seed = seed;
        }
        if let Some(fields) = self.hash_fields {
            for group in &mut config.groups {
                group.hash_fields = fields;
            }
        }
        if let Some(ars) = &self.ars {
            match ars.profile(config.ars_profile) {
                Ok(profile) => config.ars_profile = profile,
                Err(reason) => refusals.push(Refusal {
                    key: ars.key.clone(),
                    field: None,
                    reason,
                }),
            }
            for group in &mut config.groups {
                match ars.object_of(group) {
                    Ok(Some(name)) => {
                        let object = &ars.objects[name];
                        group.mode = object.mode.unwrap_or(group.mode);
                        group.flowlet_gap_us = object.gap_us.unwrap_or(group.flowlet_gap_us);
                    }
                    Ok(None) => {}
                    Err(refusal) => refusals.push(refusal),
                }
            }
        }
        (config, refusals)
    }
}

/// `ecmp_hash@` (ConfigDBConnector's encoding of a list) or `ecmp_hash`
/// (one written by hand): SONiC's names, comma-separated.
fn hash_fields(row: &mut Fields<'_>) -> Option<HashFields> {
    let field = ["ecmp_hash@", "ecmp_hash"]
        .into_iter()
        .find(|f| row.fields.contains_key(*f))?;
    let list = row.fields[field].clone();
    let mut fields = HashFields(0);
    let mut unhashed = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let ours = name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b == b'_' || b.is_ascii_digit())
            .then(|| HashFields::from_name(&name.to_ascii_lowercase()))
            .flatten();
        match ours {
            Some(f) => fields = fields.union(f),
            None if UNHASHED.contains(&name) => unhashed.push(name),
            None => {
                row.refuse(
                    field,
                    format!(
                        "{name:?} is no SONiC hash field (sonic-hash.yang); the list is ignored"
                    ),
                );
                return None;
            }
        }
    }
    if !unhashed.is_empty() {
        row.refuse(
            field,
            format!(
                "fabriclb does not hash on {}; hashing on the rest",
                unhashed.join(", ")
            ),
        );
    }
    if fields == HashFields(0) {
        row.refuse(
            field,
            "names none of SRC_IP, DST_IP, IP_PROTOCOL, L4_SRC_PORT, L4_DST_PORT, \
             RDMA_BTH_DEST_QP; the list is ignored"
                .into(),
        );
        return None;
    }
    Some(fields)
}

impl Ars {
    fn from_rows(rows: &Rows, refusals: &mut Vec<Refusal>) -> Option<Self> {
        let mut profiles = rows.table(rows::ARS_PROFILE);
        let (name, row) = profiles.next()?;
        for (extra, _) in profiles {
            refusals.push(Refusal {
                key: format!("{}|{extra}", rows::ARS_PROFILE),
                field: None,
                reason: format!(
                    "SONiC has one ARS profile (sonic-ars.yang); \"{}|{name}\" is used",
                    rows::ARS_PROFILE
                ),
            });
        }
        let key = format!("{}|{name}", rows::ARS_PROFILE);
        let mut ars = Self {
            key: key.clone(),
            sampling_interval_us: None,
            scales: [ScaleEdit::default(); 3],
            selector: Selector::Interface,
            default_object: None,
            objects: BTreeMap::new(),
            interfaces: BTreeMap::new(),
            nexthops: BTreeMap::new(),
        };
        let mut default_object = None;
        if let Some(mut row) = Fields::of(key, row, refusals) {
            ars.profile_fields(&mut row);
            default_object = row.fields.get("default_ars_object").cloned();
        }
        for (name, row) in rows.table(rows::ARS_OBJECT) {
            let key = format!("{}|{name}", rows::ARS_OBJECT);
            if let Some(mut row) = Fields::of(key, row, refusals) {
                row.unknown(&["assign_mode", "flowlet_idle_time"], &OBJECT_UNREAD);
                let mode = match row.fields.contains_key("assign_mode") {
                    false => Some(Mode::Flowlet),
                    true => row.choice(
                        "assign_mode",
                        &[
                            ("per_flowlet_quality", Mode::Flowlet),
                            ("per_packet_quality", Mode::PerPacket),
                        ],
                    ),
                };
                let gap_us = match row.fields.contains_key("flowlet_idle_time") {
                    false => Some(IDLE_TIME_DEFAULT),
                    true => row.number("flowlet_idle_time", IDLE_TIME, "microseconds"),
                };
                ars.objects
                    .insert(name.to_owned(), ArsObject { mode, gap_us });
            }
        }
        ars.default_object = default_object
            .filter(|object| ars.known_object(&ars.key, "default_ars_object", object, refusals));
        ars.members(rows, refusals);
        Some(ars)
    }

    fn profile_fields(&mut self, row: &mut Fields<'_>) {
        let mut read = vec![
            "algorithm",
            "sampling_interval",
            "ars_nhg_path_selector_mode",
            "default_ars_object",
        ];
        read.extend(
            MEASURES
                .iter()
                .flat_map(|(_, _, fields)| fields.iter().flatten()),
        );
        row.unknown(&read, &PROFILE_UNREAD);
        row.choice("algorithm", &[("ewma", ())]);
        self.sampling_interval_us = row.number(
            "sampling_interval",
            SAMPLING_INTERVAL_MIN_US..=SAMPLING_INTERVAL_MAX_US,
            "microseconds fabriclb polls telemetry at",
        );
        for (edit, (_, _, [min, max, weight])) in self.scales.iter_mut().zip(MEASURES) {
            let value = |row: &mut Fields<'_>, field: Option<&str>| {
                field.and_then(|f| row.number(f, LOAD_VALUE, "uint16, sonic-ars.yang"))
            };
            edit.min = value(row, min);
            edit.max = value(row, max);
            edit.weight = weight.and_then(|f| row.number(f, 0..=ARS_WEIGHT_MAX, "a weight"));
        }
        if let Some(selector) = row.choice(
            "ars_nhg_path_selector_mode",
            &[
                ("global", Selector::Global),
                ("interface", Selector::Interface),
                ("nexthop", Selector::Nexthop),
            ],
        ) {
            self.selector = selector;
        }
    }

    /// Whether `object` names an `ARS_OBJECT`; refused at `key` `field` if not.
    fn known_object(
        &self,
        key: &str,
        field: &str,
        object: &str,
        refusals: &mut Vec<Refusal>,
    ) -> bool {
        let known = self.objects.contains_key(object);
        if !known {
            refusals.push(Refusal {
                key: key.to_owned(),
                field: Some(field.to_owned()),
                reason: format!("no {}|{object}", rows::ARS_OBJECT),
            });
        }
        known
    }

    /// `ARS_INTERFACE` and `ARS_NEXTHOP`: which object each port and
    /// next-hop IP leads to (its own `ars_obj_name`, else the default).
    fn members(&mut self, rows: &Rows, refusals: &mut Vec<Refusal>) {
        for table in [rows::ARS_INTERFACE, rows::ARS_NEXTHOP] {
            for (name, row) in rows.table(table) {
                let key = format!("{table}|{name}");
                let Some(mut fields) = Fields::of(key.clone(), row, refusals) else {
                    continue;
                };
                let unread: &[&str] = match table {
                    rows::ARS_INTERFACE => &INTERFACE_UNREAD,
                    _ => &NEXTHOP_UNREAD,
                };
                fields.unknown(&["ars_obj_name"], unread);
                let object = match fields.fields.get("ars_obj_name") {
                    Some(object) => {
                        let object = object.clone();
                        self.known_object(&key, "ars_obj_name", &object, refusals)
                            .then_some(object)
                    }
                    None => self.default_object.clone(),
                };
                let Some(object) = object else { continue };
                if table == rows::ARS_INTERFACE {
                    self.interfaces.insert(name.to_owned(), object);
                    continue;
                }
                let refuse = |reason: String| Refusal {
                    key: key.clone(),
                    field: None,
                    reason,
                };
                match name.split_once('|') {
                    Some(("default", ip)) => match ip.parse() {
                        Ok(ip) => {
                            self.nexthops.insert(ip, object);
                        }
                        Err(_) => refusals.push(refuse(format!("{ip:?} is not an IP address"))),
                    },
                    Some((vrf, _)) => refusals.push(refuse(format!(
                        "VRF {vrf:?}: fabriclb forwards in the default VRF only"
                    ))),
                    None => refusals.push(refuse("expected ARS_NEXTHOP|<vrf>|<ip>".into())),
                }
            }
        }
    }

    /// The file's profile with SONiC's values over it; `Err` when the
    /// result cannot work, as the file's validation would say.
    fn profile(&self, base: ArsProfile) -> Result<ArsProfile, String> {
        let mut profile = base;
        if let Some(interval) = self.sampling_interval_us {
            profile.sampling_interval_us = interval;
        }
        let q = &mut profile.quality;
        let scales = [&mut q.past_load, &mut q.current_load, &mut q.future_load];
        for ((scale, edit), (name, unit, _)) in scales.into_iter().zip(&self.scales).zip(MEASURES) {
            *scale = Scale {
                min: edit.min.map_or(scale.min, |v| v * unit),
                max: edit.max.map_or(scale.max, |v| v * unit),
                // As in the file: a measure given bounds counts.
                weight: match edit.weight {
                    Some(w) => w,
                    None if edit.min.is_some() || edit.max.is_some() => 1,
                    None => scale.weight,
                },
            };
            if scale.weight > 0 && scale.max <= scale.min {
                return Err(format!(
                    "{name}_max_value must be above {name}_min_value ({} <= {}); \
                     the profile is not applied",
                    scale.max / unit,
                    scale.min / unit
                ));
            }
        }
        if [q.past_load, q.current_load, q.future_load]
            .iter()
            .all(|s| s.weight == 0)
        {
            return Err(
                "weighs nothing: every load weight is 0, so every path would \
                 always look idle; the profile is not applied"
                    .into(),
            );
        }
        Ok(profile)
    }

    /// The ARS object `group` takes: `None` when none of its next hops
    /// lead to one, a refusal when they lead to different ones.
    fn object_of(&self, group: &Group) -> Result<Option<&str>, Refusal> {
        let lead: Vec<(String, Option<&str>)> = group
            .next_hops
            .iter()
            .map(|nh| match self.selector {
                Selector::Global => (self.key.clone(), self.default_object.as_deref()),
                Selector::Interface => (
                    format!("{}|{}", rows::ARS_INTERFACE, nh.interface),
                    self.interfaces.get(&nh.interface).map(String::as_str),
                ),
                Selector::Nexthop => match nh.addr {
                    NextHopAddr::Ip(ip) => (
                        format!("{}|default|{ip}", rows::ARS_NEXTHOP),
                        self.nexthops.get(&ip).map(String::as_str),
                    ),
                    NextHopAddr::Mac(_) => (format!("{nh} (no IP)"), None),
                },
            })
            .collect();
        // A group that learns its routes lists no next hops: it takes no
        // ARS object, its learned groups do when the daemon lays the
        // overlay over them.
        let Some(&(_, first)) = lead.first() else {
            return Ok(None);
        };
        if lead.iter().all(|(_, object)| *object == first) {
            return Ok(first);
        }
        let says: Vec<String> = lead
            .iter()
            .map(|(key, object)| match object {
                Some(object) => format!("{key} -> {object:?}"),
                None => format!("{key} -> none"),
            })
            .collect();
        Err(Refusal {
            key: lead
                .iter()
                .find(|(_, o)| o.is_some())
                .map_or_else(String::new, |(key, _)| key.clone()),
            field: None,
            reason: format!(
                "group {:?} is split between ARS objects ({}); ARS applies to a whole \
                 next-hop group, so it keeps the file's mode and flowlet gap",
                group.name,
                says.join(", ")
            ),
        })
    }
}

#[cfg(test)]
mod tests;
