//! An `[[override]]`, from the file or a controller's rows, and the checks
//! both share: what the config's validation and SONiC's override rows
//! refuse with the same words.

use std::collections::HashMap;
use std::fmt;

use lb_common::limits::MAX_OVERRIDES_PER_GROUP;

use super::schema::{Group, NextHopSpec, Prefix, Route, Switch};

/// The largest RoCEv2 queue pair number (24 bits) an override matches;
/// 0 is none.
pub const QP_MAX: u32 = 0xff_ffff;

/// An `[[override]]`: packets it matches take `next_hop` of the group
/// whose route carries `dst`, instead of that group's own choice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Override {
    /// Unique; its counters' label.
    pub name: String,
    pub dst: Prefix,
    /// Same family as `dst`.
    pub src: Option<Prefix>,
    /// One of `switch.interfaces`.
    pub ingress: Option<String>,
    /// RoCEv2 destination QP, 1..=0xffffff.
    pub dest_qp: Option<u32>,
    pub next_hop: NextHopSpec,
}

impl fmt::Display for Override {
    /// `198.19.1.0/24 from 10.1.0.0/16 in h1 qp 0x42 -> s2 198.18.2.2`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.dst)?;
        if let Some(src) = self.src {
            write!(f, " from {src}")?;
        }
        if let Some(ingress) = &self.ingress {
            write!(f, " in {ingress}")?;
        }
        if let Some(qp) = self.dest_qp {
            write!(f, " qp {qp:#x}")?;
        }
        write!(f, " -> {}", self.next_hop)
    }
}

impl Override {
    /// The index of the group whose route (of `routes`) carries `dst`, and
    /// the slot of `next_hop` among its next hops; or why there is none.
    pub fn pinned_slot(
        &self,
        routes: &[Route],
        groups: &[Group],
    ) -> Result<(usize, usize), String> {
        let route = Route::carrying(routes, self.dst)
            .ok_or_else(|| format!("no route carries {}", self.dst))?;
        let group = &groups[route.group];
        let slot = group
            .next_hops
            .iter()
            .position(|nh| *nh == self.next_hop)
            .ok_or_else(|| {
                format!(
                    "next hop \"{}\" is not one of group {:?}, whose route carries {}",
                    self.next_hop, group.name, self.dst
                )
            })?;
        Ok((route.group, slot))
    }

    /// Why `src` cannot go with this override's `dst`: another family.
    pub fn src_family_error(&self, src: Prefix) -> Option<String> {
        (src.addr.is_ipv4() != self.dst.addr.is_ipv4()).then(|| {
            format!(
                "override {:?}: src {src} is not of dst {}'s family",
                self.name, self.dst
            )
        })
    }

    /// Why `ingress` cannot be this override's: not a port of `switch`.
    pub fn ingress_error(&self, switch: &Switch, ingress: &str) -> Option<String> {
        (!switch.interfaces.iter().any(|i| i == ingress)).then(|| {
            format!(
                "override {:?}: ingress {ingress:?} is not one of switch.interfaces",
                self.name
            )
        })
    }

    /// Counts this override into `per_group` (the overrides each group
    /// has so far), or says why it cannot be placed: its next hop is not
    /// one of the group whose route carries `dst`, or that group has its
    /// most. A route of a group that learns its routes (from the kernel
    /// or SONiC) is checked only once learned, by the tables.
    pub fn count_into(
        &self,
        routes: &[Route],
        groups: &[Group],
        per_group: &mut HashMap<usize, usize>,
    ) -> Result<(), String> {
        let learned = groups.iter().any(Group::learns_routes);
        let carrier = Route::carrying(routes, self.dst).map(|r| &groups[r.group]);
        if carrier.map_or(learned, Group::learns_routes) {
            return Ok(());
        }
        let (index, _) = self
            .pinned_slot(routes, groups)
            .map_err(|why| format!("override {:?}: {why}", self.name))?;
        let count = per_group.entry(index).or_default();
        if *count >= MAX_OVERRIDES_PER_GROUP as usize {
            return Err(format!(
                "override {:?}: group {:?} has {MAX_OVERRIDES_PER_GROUP} overrides already, \
                 the most a group may have",
                self.name, groups[index].name
            ));
        }
        *count += 1;
        Ok(())
    }

    /// Most specific first: a QP, then the longer destination, then the
    /// longer source, then an ingress interface.
    pub fn specificity(&self) -> (bool, u8, u8, bool) {
        (
            self.dest_qp.is_some(),
            self.dst.len,
            self.src.map_or(0, |s| s.len),
            self.ingress.is_some(),
        )
    }
}
