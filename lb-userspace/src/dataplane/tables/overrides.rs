//! A config's `[[override]]`s as the data plane's entries: each in the
//! group whose route carries its destination, pinned to that group's
//! member, most specific first; and the half of the group's run of
//! `FL_OVERRIDES` a changed set is written to before the group entry
//! flips to it.

use std::net::IpAddr;

use lb_common::abi::OverrideEntry;
use lb_common::limits::MAX_OVERRIDES_PER_GROUP;
use lb_common::select::overrides::prefix_mask;

use super::GroupTable;
use crate::config::{Config, Override, Prefix};
use crate::netlink::ifindex;

/// A group's overrides: names and entries, in match order.
pub type GroupOverrides = Vec<(String, OverrideEntry)>;

/// Each config group's overrides (by index), and the overrides that take
/// no effect, with why.
pub(super) fn resolve(config: &Config) -> (Vec<GroupOverrides>, Vec<(String, String)>) {
    let mut by_group = vec![GroupOverrides::new(); config.groups.len()];
    let mut skipped = Vec::new();
    let mut order: Vec<&Override> = config.overrides.iter().collect();
    // Stable: equally specific ones keep file order.
    order.sort_by_key(|o| std::cmp::Reverse(o.specificity()));
    for entry in order {
        match place(config, entry) {
            Ok((group, e)) if by_group[group].len() < MAX_OVERRIDES_PER_GROUP as usize => {
                by_group[group].push((entry.name.clone(), e));
            }
            Ok((group, _)) => skipped.push((
                entry.name.clone(),
                format!(
                    "group {:?} has {MAX_OVERRIDES_PER_GROUP} more specific overrides",
                    config.groups[group].name
                ),
            )),
            Err(why) => skipped.push((entry.name.clone(), why)),
        }
    }
    (by_group, skipped)
}

/// The group index and entry of `entry`, or why it takes no effect.
fn place(config: &Config, entry: &Override) -> Result<(usize, OverrideEntry), String> {
    let (group, slot) = entry.pinned_slot(&config.routes, &config.groups)?;
    let ingress = match &entry.ingress {
        None => 0,
        Some(name) => ifindex(name).ok_or_else(|| format!("ingress {name:?} does not exist"))?,
    };
    let (dst, dst_mask) = masked(entry.dst);
    let (src, src_mask) = entry.src.map_or(([0; 16], [0; 16]), masked);
    Ok((
        group,
        OverrideEntry {
            dst,
            dst_mask,
            src,
            src_mask,
            is_ipv6: u32::from(entry.dst.addr.is_ipv6()),
            ingress,
            dest_qp: entry.dest_qp.unwrap_or(0),
            slot: slot as u32,
        },
    ))
}

/// A prefix's address bytes as the parser lays them (IPv4 in the first
/// four), masked, and the mask.
fn masked(prefix: Prefix) -> ([u8; 16], [u8; 16]) {
    let mut addr = [0u8; 16];
    match prefix.addr {
        IpAddr::V4(a) => addr[..4].copy_from_slice(&a.octets()),
        IpAddr::V6(a) => addr = a.octets(),
    }
    let mask = prefix_mask(prefix.len);
    for (a, m) in addr.iter_mut().zip(mask) {
        *a &= m;
    }
    (addr, mask)
}

/// The half the group writes `overrides` to: the old one while they stay
/// as they were, the other one when they change (written whole before the
/// group entry flips to it).
pub(super) fn half(old: Option<&GroupTable>, overrides: &GroupOverrides) -> u32 {
    match old {
        Some(old) if old.overrides == *overrides => old.entry.override_half,
        Some(old) => old.entry.override_half ^ 1,
        None => 0,
    }
}
