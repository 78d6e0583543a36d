//! A traffic-engineering controller's overrides (pure): APPL_DB rows
//! `FABRICLB_OVERRIDE_TABLE:<name>`, in SONiC's APPL_DB style (a hash per
//! key, `:` after the table, fields as strings), read into the same
//! [`Override`]s as the config file's `[[override]]` tables and laid over
//! its own.
//!
//! | field | | meaning |
//! |---|---|---|
//! | `dst` | required | destination prefix, `198.19.1.0/24` |
//! | `src` | optional | source prefix, same family |
//! | `ingress` | optional | ingress port, one of `switch.interfaces` |
//! | `dest_qp` | optional | RoCEv2 destination QP, decimal or `0x` hex, 1..=0xffffff |
//! | `nexthop` | required | the pinned next hop's IP or MAC, as the group names it |
//! | `ifname` | required | its interface |
//! | `vlan` | optional | its VLAN, where the group's next hop has one |
//!
//! A row is taken whole or refused whole, with its key, field and reason
//! (an unknown field too: it may be a misspelt one that would have made
//! the override narrower). What the config decides (the name free, the
//! ingress one of the switch's ports, the next hop one of the carrying
//! group's, the table's bounds) is checked where the rows are laid over
//! the config ([`OverrideRows::apply`]), with the same words as the
//! config's checks.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use lb_common::limits::{MAX_GROUPS, MAX_OVERRIDES_PER_GROUP};

use super::overlay::Refusal;
use super::rows::{OVERRIDE_TABLE, Rows};
use crate::config::{
    Config, NAME_MAX_LEN, NextHopAddr, NextHopSpec, Override, Prefix, QP_MAX, VLAN_MAX, VLAN_MIN,
    parse_mac,
};

const FIELDS: [&str; 7] = [
    "dst", "src", "ingress", "dest_qp", "nexthop", "ifname", "vlan",
];

/// The rows read, in key order, and the rows refused.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OverrideRows {
    /// Key and override.
    pub entries: Vec<(String, Override)>,
    pub refusals: Vec<Refusal>,
}

impl OverrideRows {
    pub fn from_rows(rows: &Rows) -> Self {
        let mut out = Self::default();
        for (key, row) in rows.appl.range(OVERRIDE_TABLE.to_owned()..) {
            let Some(name) = key.strip_prefix(OVERRIDE_TABLE) else {
                break;
            };
            let read = match row {
                Ok(fields) => entry(key, name, fields),
                Err(why) => Err(refusal(key, None, why.clone())),
            };
            match read {
                Ok(entry) => out.entries.push((key.clone(), entry)),
                Err(refusal) => out.refusals.push(refusal),
            }
        }
        out
    }

    /// Lays the rows over `config`, after its own overrides; what cannot
    /// be laid is returned with its key and why, and the rest applies.
    pub fn apply(&self, config: &mut Config) -> Vec<Refusal> {
        let mut refusals = Vec::new();
        let mut per_group = HashMap::new();
        for own in &config.overrides {
            // The file's were checked when it was read.
            let _ = own.count_into(&config.routes, &config.groups, &mut per_group);
        }
        let most = (MAX_GROUPS * MAX_OVERRIDES_PER_GROUP) as usize;
        for (key, entry) in &self.entries {
            let why = if config.overrides.len() >= most {
                Some(format!(
                    "the table is full: at most {most} overrides in all"
                ))
            } else if config.overrides.iter().any(|o| o.name == entry.name) {
                Some(format!(
                    "override {:?} is the config file's; a row may not replace it",
                    entry.name
                ))
            } else if let Some(why) = entry
                .ingress
                .as_ref()
                .and_then(|i| entry.ingress_error(&config.switch, i))
            {
                Some(why)
            } else {
                entry
                    .count_into(&config.routes, &config.groups, &mut per_group)
                    .err()
            };
            match why {
                Some(why) => refusals.push(refusal(key, None, why)),
                None => config.overrides.push(entry.clone()),
            }
        }
        refusals
    }
}

fn refusal(key: &str, field: Option<&str>, reason: String) -> Refusal {
    Refusal {
        key: key.to_owned(),
        field: field.map(str::to_owned),
        reason,
    }
}

fn entry(key: &str, name: &str, fields: &BTreeMap<String, String>) -> Result<Override, Refusal> {
    if name.is_empty() || name.len() > NAME_MAX_LEN {
        return Err(refusal(
            key,
            None,
            format!("an override's name is 1 to {NAME_MAX_LEN} bytes"),
        ));
    }
    if let Some(unknown) = fields.keys().find(|f| !FIELDS.contains(&f.as_str())) {
        return Err(refusal(
            key,
            Some(unknown),
            format!(
                "not a field of an override (they are {})",
                FIELDS.join(", ")
            ),
        ));
    }
    let field = |f: &str| fields.get(f).map(String::as_str);
    let required = |f: &str| field(f).ok_or_else(|| refusal(key, Some(f), "missing".into()));
    let prefix =
        |f: &str, text: &str| Prefix::parse(text).map_err(|e| refusal(key, Some(f), e.to_string()));
    let dst = prefix("dst", required("dst")?)?;
    let src = field("src").map(|text| prefix("src", text)).transpose()?;
    let dest_qp = field("dest_qp").map(|text| qp(key, text)).transpose()?;
    let ingress = field("ingress").map(str::to_owned);
    let address = required("nexthop")?;
    let addr = match (address.parse::<IpAddr>(), parse_mac(address)) {
        (Ok(ip), _) => NextHopAddr::Ip(ip),
        (_, Some(mac)) => NextHopAddr::Mac(mac),
        _ => {
            return Err(refusal(
                key,
                Some("nexthop"),
                format!("{address:?} is neither an IP nor a MAC address"),
            ));
        }
    };
    let interface = required("ifname")?.to_owned();
    let vlan = field("vlan")
        .map(|text| {
            text.parse::<u16>()
                .ok()
                .filter(|v| (VLAN_MIN..=VLAN_MAX).contains(v))
                .ok_or_else(|| {
                    refusal(
                        key,
                        Some("vlan"),
                        format!("{text:?} is not a VLAN id ({VLAN_MIN}..={VLAN_MAX})"),
                    )
                })
        })
        .transpose()?;
    let entry = Override {
        name: name.to_owned(),
        dst,
        src,
        ingress,
        dest_qp,
        next_hop: NextHopSpec {
            interface,
            addr,
            vlan,
        },
    };
    if let Some(why) = src.and_then(|src| entry.src_family_error(src)) {
        return Err(refusal(key, Some("src"), why));
    }
    Ok(entry)
}

/// A QP number, decimal or `0x` hex.
fn qp(key: &str, text: &str) -> Result<u32, Refusal> {
    crate::config::parse_number(text)
        .filter(|qp| (1..=QP_MAX).contains(qp))
        .ok_or_else(|| {
            refusal(
                key,
                Some("dest_qp"),
                format!("{text:?} is not a RoCEv2 queue pair number (1..=0xffffff)"),
            )
        })
}

#[cfg(test)]
mod tests;
