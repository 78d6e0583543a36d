//! A config's `[[override]]`s as the data plane's entries: each in the
//! group whose route carries its destination, pinned to that group's
//! member, most specific first; the half of the group's run of
//! `FL_OVERRIDES` a changed set is written to before the group entry
//! flips to it; and, in an ECMP group, the wait for flowlet state before
//! the flip ([`PendingPins`]).

use std::net::IpAddr;
use std::time::{Duration, Instant};

use lb_common::abi::{GroupEntry, OverrideEntry};
use lb_common::limits::MAX_OVERRIDES_PER_GROUP;
use lb_common::select::overrides::prefix_mask;

use lb_common::select::flowlet::{MODE_ECMP, MODE_FLOWLET};

use super::drains::drain_end;
use super::{GroupTable, Tables};
use crate::config::{Config, Mode, Override, Prefix};
use crate::dataplane::{Dataplane, DataplaneError};

/// A group's overrides: names and entries, in match order.
pub type GroupOverrides = Vec<(String, OverrideEntry)>;

/// Each config group's overrides (by index), ingress ports numbered by
/// `port`, and the overrides that take no effect, with why.
pub(super) fn resolve(
    config: &Config,
    port: &dyn Fn(&str) -> Option<u32>,
) -> (Vec<GroupOverrides>, Vec<(String, String)>) {
    let mut by_group = vec![GroupOverrides::new(); config.groups.len()];
    let mut skipped = Vec::new();
    let mut order: Vec<&Override> = config.overrides.iter().collect();
    // Stable: equally specific ones keep file order.
    order.sort_by_key(|o| std::cmp::Reverse(o.specificity()));
    for entry in order {
        match place(config, entry, port) {
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
fn place(
    config: &Config,
    entry: &Override,
    port: &dyn Fn(&str) -> Option<u32>,
) -> Result<(usize, OverrideEntry), String> {
    let (group, slot) = entry.pinned_slot(&config.routes, &config.groups)?;
    let ingress = match &entry.ingress {
        None => 0,
        Some(name) => port(name).ok_or_else(|| format!("ingress {name:?} does not exist"))?,
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
fn half(old: Option<&GroupTable>, overrides: &GroupOverrides) -> u32 {
    match old {
        Some(old) if old.overrides == *overrides => old.entry.override_half,
        Some(old) => old.entry.override_half ^ 1,
        None => 0,
    }
}

/// An ECMP group's changed overrides, written in the half its entry does
/// not name and flipped to at `at` ([`Tables::flip_pins`]). An ECMP group
/// keeps no flowlet state, so it cannot tell where a flow's burst ends:
/// from the reload on it keeps some (it drains from flowlet mode, its
/// choices as before), and after a gap every flow that is sending has its
/// flowlet; once flipped, a flow moves onto or off its pin when its
/// flowlet ends, as flowlet and per-packet groups move flows at once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingPins {
    pub at: Instant,
    pub half: u32,
    pub overrides: GroupOverrides,
}

/// Whether an ECMP group's overrides change from what `old` runs: then
/// they wait as [`PendingPins`].
pub(super) fn moving(old: Option<&GroupTable>, mode: Mode, wanted: &GroupOverrides) -> bool {
    mode == Mode::Ecmp && old.is_some_and(|o| o.overrides != *wanted)
}

/// Places a group's `wanted` overrides in `entry` (half and count): at
/// once, or, `moving`, as the old ones with `wanted` pending and the group
/// keeping flowlet state. A wait given up (the set back to the one
/// running) drains like a flip's, from now. Returns the overrides the
/// entry names and the pending ones.
pub(super) fn place_set(
    old: Option<&GroupTable>,
    moving: bool,
    wanted: GroupOverrides,
    entry: &mut GroupEntry,
    drain_until: &mut Option<Instant>,
    now: Instant,
) -> (GroupOverrides, Option<PendingPins>) {
    let Some(old) = old.filter(|_| moving) else {
        if old.is_some_and(|o| o.pending.is_some()) && entry.draining != MODE_ECMP {
            *drain_until = (*drain_until).max(Some(drain_end(entry.flowlet_gap_ns, now)));
        }
        entry.override_half = half(old, &wanted);
        entry.override_count = wanted.len() as u32;
        return (wanted, None);
    };
    if entry.draining == MODE_ECMP {
        entry.draining = MODE_FLOWLET;
    }
    entry.override_half = old.entry.override_half;
    entry.override_count = old.overrides.len() as u32;
    let at = match &old.pending {
        Some(p) if p.overrides == wanted => p.at,
        _ => now + Duration::from_nanos(entry.flowlet_gap_ns),
    };
    let pending = PendingPins {
        at,
        half: old.entry.override_half ^ 1,
        overrides: wanted,
    };
    (old.overrides.clone(), Some(pending))
}

impl Tables {
    /// Flips the groups whose pending overrides are due by `now` to them,
    /// in the maps too; each drains [`super::DRAIN_GAPS`] gaps from now, its flows
    /// moving onto and off their pins as their flowlets end. Returns the
    /// groups' names. A group whose write fails stays pending.
    pub fn flip_pins(
        &mut self,
        dp: &mut Dataplane,
        now: Instant,
    ) -> Result<Vec<String>, DataplaneError> {
        let mut flipped = Vec::new();
        for group in &mut self.groups {
            let Some(pending) = group.pending.take_if(|p| p.at <= now) else {
                continue;
            };
            let entry = GroupEntry {
                override_half: pending.half,
                override_count: pending.overrides.len() as u32,
                ..group.entry
            };
            if let Err(e) = dp.set_group(group.id, entry) {
                group.pending = Some(pending);
                return Err(e);
            }
            group.entry = entry;
            group.overrides = pending.overrides;
            let end = drain_end(entry.flowlet_gap_ns, now);
            group.drain_until = group.drain_until.max(Some(end));
            flipped.push(group.name.clone());
        }
        Ok(flipped)
    }
}
