//! `explain`: what the data plane does with one frame, given the maps as
//! they are. The stages are the forwarding path's (`lb-ebpf`'s
//! `forward`), each decided by the very `lb-common` function the program
//! calls: the parser, the route rule, the hash, the flowlet step, the
//! spray rule and the least-cost choice. Only the map reads differ: the
//! kernel's per-CPU values are read for one CPU.

pub mod json;
mod render;

use std::net::IpAddr;

use lb_common::abi::{GroupEntry, NEXTHOP_USABLE, NextHop};
use lb_common::limits::{
    BUCKETS_PER_GROUP, MAX_NEXTHOPS_PER_GROUP, MAX_OVERRIDES_PER_GROUP, NO_NEXTHOP,
};
use lb_common::packet::parse::{FlowFields, Parsed, parse};
use lb_common::route::{self, Destination, table::value_entry};
use lb_common::select::choice::{Drawn, draw_positions, drawn, draws};
use lb_common::select::flowlet::{
    Candidate, FlowletState, FlowletStep, MODE_ECMP, PathChoice, drain, flowlet_index,
    flowlet_rules, sprays, starts_on_ecmp, step,
};
use lb_common::select::hash::{HashFields, HashInput, flow_hash, hash_input};
use lb_common::select::load::member_load;
use lb_common::select::overrides::{matches, override_index};
use lb_common::select::placement::{Placement, placement};
use lb_common::verdict::Reason;

use super::maps::InspectError;
use super::view::MapView;

pub use render::render;

type Result<T> = std::result::Result<T, InspectError>;

/// Every stage a frame went through, up to its verdict.
#[derive(Clone, Debug)]
pub struct Explanation {
    pub len: usize,
    /// `None` when the parser gave the verdict.
    pub parsed: Option<Parsed>,
    pub verdict: Reason,
    pub route: Option<RouteMatch>,
    pub group: Option<(u32, GroupEntry)>,
    pub hash: Option<HashStep>,
    /// The override the packet matched.
    pub pin: Option<PinStep>,
    /// The packet's ingress interface is unknown and the group has
    /// overrides that name one: those were taken as not matching.
    pub ingress_unknown: bool,
    /// The packet's ingress interface is unknown: its destination MAC was
    /// not checked against the port's.
    pub mac_unchecked: bool,
    pub dynamic: Option<DynamicStep>,
    /// The next hop chosen, whether or not it could take the packet.
    pub next_hop: Option<(u32, NextHop)>,
    /// The chosen next hop's egress port is missing from the devmap.
    pub port_missing: bool,
}

/// The route lookup: the longest prefix covering the destination and its
/// value (a group id or `LOCAL_ROUTE`).
#[derive(Clone, Copy, Debug)]
pub struct RouteMatch {
    pub prefix: Option<(IpAddr, u8)>,
    pub value: Option<u32>,
}

/// A matched override: its index in the override table, the member it
/// pins, and whether that one is usable (else the group's own choice
/// stands, counted as a fallback).
#[derive(Clone, Copy, Debug)]
pub struct PinStep {
    pub index: u32,
    pub slot: u32,
    pub usable: bool,
}

/// ECMP's choice: the hash input, its hash, the bucket and what it holds.
#[derive(Clone, Copy, Debug)]
pub struct HashStep {
    pub input: HashInput,
    pub hash: u32,
    pub bucket: u32,
    pub ecmp: u32,
}

/// A group member as a new flowlet's choice sees it on one CPU.
#[derive(Clone, Copy, Debug)]
pub struct Member {
    pub slot: u32,
    pub id: u32,
    pub usable: bool,
    /// Its recent load on the CPU and what the other CPUs' flows put on
    /// it, as the choice adds them.
    pub load: u64,
    pub quality: u32,
}

/// Flowlet and per-packet groups' choice on one CPU.
#[derive(Clone, Debug)]
pub struct DynamicStep {
    pub cpu: usize,
    pub members: Vec<Member>,
    pub kind: Dynamic,
}

#[derive(Clone, Debug)]
pub enum Dynamic {
    /// Sprayed: the spray sequence's next slot on this CPU, or the least
    /// loaded usable member when the one listed is not usable.
    Sprayed {
        index: u32,
        listed: u32,
        stand_in: Option<u32>,
    },
    Flowlet {
        /// The flow's entry in the flowlet table.
        index: u32,
        now_ns: u64,
        /// This CPU's state for the flow, if it has one.
        state: Option<FlowletState>,
        /// Other CPUs holding state of the current generation.
        other_cpus: Vec<usize>,
        step: FlowletStep,
        /// The slot this packet takes.
        slot: Option<u32>,
        /// The flow's own recent load, which a move takes along.
        own: u64,
        /// Where a new flowlet of this flow would go now.
        new_flowlet: Option<u32>,
        /// With a rule that draws, the next hops a new flowlet would weigh
        /// (twice the same one for `weighted`).
        drawn: Option<[u32; 2]>,
        /// An ECMP group draining from a flowlet mode: a flowlet that ends
        /// takes the flow's ECMP slot.
        draining: bool,
    },
}

impl Explanation {
    fn new(len: usize) -> Self {
        Self {
            len,
            parsed: None,
            verdict: Reason::Forwarded,
            route: None,
            group: None,
            hash: None,
            pin: None,
            ingress_unknown: false,
            mac_unchecked: false,
            dynamic: None,
            next_hop: None,
            port_missing: false,
        }
    }

    fn ends(mut self, reason: Reason) -> Self {
        self.verdict = reason;
        self
    }
}

/// What the data plane does with `frame`, come in on interface `ingress`
/// (an ifindex; 0 unknown), on `cpu` at `now_ns` (CLOCK_MONOTONIC, the
/// program's clock). Without a `cpu`, the one
/// holding the flow's most recent flowlet state, else CPU 0.
pub fn explain(
    maps: &dyn MapView,
    frame: &[u8],
    ingress: u32,
    cpu: Option<usize>,
    now_ns: u64,
) -> Result<Explanation> {
    let e = Explanation::new(frame.len());
    let parsed = match parse(frame) {
        Ok(parsed) => parsed,
        Err(reason) => return Ok(e.ends(reason)),
    };
    let mut e = Explanation {
        parsed: Some(parsed),
        mac_unchecked: ingress == 0,
        ..e
    };
    if ingress != 0 && maps.knows_port_macs() {
        let dst: [u8; 6] = frame[..6].try_into().unwrap_or_default();
        if !maps
            .port_macs(ingress)?
            .is_some_and(|port| port.accepts(&dst))
        {
            return Ok(e.ends(Reason::OtherHost));
        }
    }
    let flow = &parsed.flow;
    let dst = if flow.is_ipv6 {
        &flow.dst[..]
    } else {
        &flow.dst[..4]
    };
    let value = maps.route(dst)?;
    e.route = Some(RouteMatch {
        prefix: longest_prefix(maps, dst, value)?,
        value,
    });
    let destination = match route::destination(flow, value_entry(value)) {
        Ok(destination) => destination,
        Err(reason) => return Ok(e.ends(reason)),
    };
    let group_id = destination.group;
    if parsed.ttl <= 1 {
        return Ok(e.ends(Reason::TtlExpired));
    }
    let Some(group) = maps.group_at(group_id)? else {
        return Ok(e.ends(Reason::NoRoute));
    };
    e.group = Some((group_id, group));
    let fields = HashFields(group.hash_fields);
    let input = hash_input(flow, fields);
    let hash = flow_hash(group.hash_seed, flow, fields);
    let bucket = hash & (BUCKETS_PER_GROUP - 1);
    let Some(ecmp) = maps.bucket(group_id * BUCKETS_PER_GROUP + bucket)? else {
        return Ok(e.ends(Reason::NoNextHop));
    };
    e.hash = Some(HashStep {
        input,
        hash,
        bucket,
        ecmp,
    });
    let mut nh_id = ecmp;
    let at = Choice {
        maps,
        destination,
        group: &group,
        len: frame.len() as u64,
    };
    let (pin, ingress_unknown) = at.pinned(flow, ingress)?;
    e.ingress_unknown = ingress_unknown;
    if let Some((index, slot)) = pin {
        e.pin = Some(PinStep {
            index,
            slot,
            usable: at.usable(at.member(slot))?,
        });
    }
    let pinned = e.pin.filter(|p| p.usable).map(|p| p.slot);
    let rules = flowlet_rules(group.mode, group.draining);
    let sprayable = sprays(rules, group.spray, parsed.bth.as_ref());
    // What a draining group's old mode sprayed takes ECMP at once, as in
    // the program.
    let drained_spray = group.mode == MODE_ECMP && sprayable;
    if rules != MODE_ECMP && sprayable && pinned.is_some() {
        nh_id = pinned.map_or(NO_NEXTHOP, |slot| at.member(slot));
    } else if rules != MODE_ECMP && !drained_spray {
        let (step, chosen) = at.dynamic(&parsed, hash, ecmp, pinned, cpu, now_ns)?;
        e.dynamic = Some(step);
        match chosen {
            Some(id) => nh_id = id,
            None => return Ok(e.ends(Reason::NoNextHop)),
        }
    } else if let (MODE_ECMP, Some(slot)) = (rules, pinned) {
        nh_id = at.member(slot);
    }
    if nh_id == NO_NEXTHOP {
        return Ok(e.ends(Reason::NoNextHop));
    }
    let Some(nh) = maps.nexthop(nh_id)? else {
        return Ok(e.ends(Reason::NoNextHop));
    };
    e.next_hop = Some((nh_id, nh));
    if nh.flags & NEXTHOP_USABLE == 0 {
        return Ok(e.ends(Reason::NoNextHop));
    }
    if !maps.has_port(nh.ifindex)? {
        e.port_missing = true;
        return Ok(e.ends(Reason::NoNextHop));
    }
    Ok(e)
}

/// The longest prefix covering `dst` whose value is `value`: the lookup's
/// own match, found by walking the trie's keys (the kernel returns the
/// value only).
fn longest_prefix(
    maps: &dyn MapView,
    dst: &[u8],
    value: Option<u32>,
) -> Result<Option<(IpAddr, u8)>> {
    if value.is_none() {
        return Ok(None);
    }
    let covers = |data: &[u8], len: u32| {
        let (bytes, bits) = ((len / 8) as usize, len % 8);
        data[..bytes] == dst[..bytes]
            && (bits == 0 || (data[bytes] ^ dst[bytes]) >> (8 - bits) == 0)
    };
    let mut best: Option<(IpAddr, u8)> = None;
    for (addr, len) in maps.route_prefixes(dst.len() == 16)? {
        let data = match addr {
            IpAddr::V4(a) => a.octets().to_vec(),
            IpAddr::V6(a) => a.octets().to_vec(),
        };
        if covers(&data, u32::from(len)) && best.is_none_or(|(_, b)| b < len) {
            best = Some((addr, len));
        }
    }
    Ok(best)
}

/// One packet's dynamic choice in its group.
struct Choice<'a> {
    maps: &'a dyn MapView,
    /// The packet's group and class.
    destination: Destination,
    group: &'a GroupEntry,
    len: u64,
}

impl Choice<'_> {
    /// The first of the group's overrides a packet of `flow` from
    /// `ingress` matches, as its index and slot; and whether an override
    /// naming an ingress was passed over for want of one.
    fn pinned(&self, flow: &FlowFields, ingress: u32) -> Result<(Option<(u32, u32)>, bool)> {
        let mut unknown = false;
        for i in 0..self.group.override_count.min(MAX_OVERRIDES_PER_GROUP) {
            let index = override_index(self.destination.group, self.group.override_half, i);
            let Some(entry) = self.maps.override_at(index)? else {
                break;
            };
            unknown |= ingress == 0 && entry.ingress != 0;
            if matches(&entry, flow, ingress) {
                return Ok((Some((index, entry.slot)), unknown));
            }
        }
        Ok((None, unknown))
    }

    /// The next-hop id in `slot`, [`NO_NEXTHOP`] past the members.
    fn member(&self, slot: u32) -> u32 {
        if slot >= self.group.member_count {
            return NO_NEXTHOP;
        }
        self.group.members[slot as usize & (MAX_NEXTHOPS_PER_GROUP - 1)]
    }

    fn usable(&self, id: u32) -> Result<bool> {
        Ok(self
            .maps
            .nexthop(id)?
            .is_some_and(|nh| nh.flags & NEXTHOP_USABLE != 0))
    }

    /// The members up to the first empty slot, as seen on `cpu` at `epoch`.
    fn members(&self, cpu: usize, epoch: u64) -> Result<Vec<Member>> {
        let mut members = Vec::new();
        for slot in 0..MAX_NEXTHOPS_PER_GROUP as u32 {
            let id = self.member(slot);
            if id == NO_NEXTHOP {
                break;
            }
            let own = self.maps.nexthop_stats(id)?;
            let own = own.map_or_else(Default::default, |s| s[cpu].load);
            let peers = self.maps.peer_loads(id)?.map_or(0, |p| p[cpu]);
            members.push(Member {
                slot,
                id,
                usable: self.usable(id)?,
                load: member_load(&own, epoch, peers),
                quality: self.maps.quality(self.destination.quality_index(id))?,
            });
        }
        Ok(members)
    }

    fn dynamic(
        &self,
        parsed: &Parsed,
        hash: u32,
        ecmp: u32,
        pinned: Option<u32>,
        cpu: Option<usize>,
        now_ns: u64,
    ) -> Result<(DynamicStep, Option<u32>)> {
        let size = self.maps.flowlet_capacity();
        let index = flowlet_index(self.destination.group, hash, size);
        let states = self.maps.flowlet(index)?;
        let live: Vec<(usize, FlowletState)> = states
            .iter()
            .flat_map(|s| s.iter().copied().enumerate())
            .filter(|(_, s)| s.generation == self.group.generation)
            .collect();
        let cpu = cpu.unwrap_or_else(|| {
            live.iter()
                .max_by_key(|(_, s)| s.last_seen_ns)
                .map_or(0, |(cpu, _)| *cpu)
        });
        let epochs = self.maps.epochs(self.len)?;
        let Some(&epoch) = epochs.get(cpu) else {
            return Err(InspectError::NoSuchCpu {
                cpu,
                cpus: epochs.len(),
            });
        };
        let members = self.members(cpu, epoch)?;
        let step = |kind| DynamicStep {
            cpu,
            members: members.clone(),
            kind,
        };

        if sprays(self.group.mode, self.group.spray, parsed.bth.as_ref()) {
            let cursor = self.maps.spray_cursor(self.destination.spray_row())?[cpu];
            let index = (cursor as u32) & (BUCKETS_PER_GROUP - 1);
            let Some(listed) = self
                .maps
                .spray_slot(self.destination.spray_row() * BUCKETS_PER_GROUP + index)?
            else {
                return Ok((
                    step(Dynamic::Sprayed {
                        index,
                        listed: NO_NEXTHOP,
                        stand_in: None,
                    }),
                    None,
                ));
            };
            let (stand_in, chosen) = if self.usable(listed)? {
                (None, Some(listed))
            } else {
                let slot = choose(&members, None, 0, Drawn::ALL);
                (slot, slot.map(|s| self.member(s)))
            };
            let kind = Dynamic::Sprayed {
                index,
                listed,
                stand_in,
            };
            return Ok((step(kind), chosen));
        }

        let state = states.map(|s| s[cpu]);
        let own = state.map_or(0, |s| s.load.at(epoch));
        let drawn = self.drawn(hash, cpu)?;
        let next = step_of(state.as_ref(), now_ns, self.group);
        let usable_slot = |slot: u32| members.iter().any(|m| m.slot == slot && m.usable);
        let ecmp_start = match next {
            FlowletStep::Start | FlowletStep::Occupied
                if starts_on_ecmp(
                    self.usable(ecmp)?,
                    self.maps.quality(self.destination.quality_index(ecmp))?,
                ) =>
            {
                members.iter().find(|m| m.id == ecmp).map(|m| m.slot)
            }
            _ => None,
        };
        let place =
            |step, ecmp_start: Option<u32>| match placement(step, usable_slot, || ecmp_start) {
                Placement::Slot(slot) => Some(slot),
                Placement::LeastCost { offered } => {
                    choose(&members, offered, own, drawn).or_else(|| {
                        (!drawn.is_all()).then(|| choose(&members, offered, own, Drawn::ALL))?
                    })
                }
            };
        let current = match next {
            FlowletStep::Continue(slot) => Some(slot),
            FlowletStep::Choose { current } => current,
            FlowletStep::Start | FlowletStep::Occupied => None,
        };
        let draining = self.group.mode == MODE_ECMP;
        let (slot, new_flowlet) = if draining {
            // No slot holds ECMP's next hop (a bucket written before its
            // group entry): the program takes that next hop, no state kept.
            let target = pinned.or_else(|| members.iter().find(|m| m.id == ecmp).map(|m| m.slot));
            let slot = target.map(|target| drain(next, usable_slot, target));
            (slot, target)
        } else if let Some(pinned) = pinned {
            let slot = match next {
                FlowletStep::Continue(slot) if usable_slot(slot) => slot,
                _ => pinned,
            };
            (Some(slot), Some(pinned))
        } else {
            (
                place(next, ecmp_start),
                place(FlowletStep::Choose { current }, None),
            )
        };
        let kind = Dynamic::Flowlet {
            index,
            now_ns,
            state: state.filter(|s| s.generation != 0),
            other_cpus: live.iter().map(|(c, _)| *c).filter(|&c| c != cpu).collect(),
            step: next,
            slot,
            own,
            new_flowlet,
            drawn: (!drawn.is_all()).then(|| drawn.ids()),
            draining,
        };
        let chosen = match slot {
            Some(slot) => Some(self.member(slot)),
            None if draining => Some(ecmp),
            None => None,
        };
        Ok((step(kind), chosen))
    }
}

impl Choice<'_> {
    /// What a new flowlet of flow `hash` on `cpu` weighs, as the program
    /// draws it ([`lb_common::select::choice`]): for a rule that draws,
    /// the spray sequence's entries at its destination's cursor there.
    fn drawn(&self, hash: u32, cpu: usize) -> Result<Drawn> {
        if !draws(self.group.choice) {
            return Ok(Drawn::ALL);
        }
        let cursor = self.maps.spray_cursor(self.destination.spray_row())?[cpu];
        let row = self.destination.spray_row() * BUCKETS_PER_GROUP;
        let [a, b] = draw_positions(
            self.group.draw_flow_mask,
            hash,
            self.group.hash_seed,
            cursor,
        );
        let (a, b) = (
            self.maps.spray_slot(row + a)?,
            self.maps.spray_slot(row + b)?,
        );
        Ok(drawn(self.group.choice, a, b))
    }
}

fn step_of(state: Option<&FlowletState>, now_ns: u64, group: &GroupEntry) -> FlowletStep {
    step(
        state,
        now_ns,
        group.flowlet_gap_ns,
        group.generation,
        group.member_count,
    )
}

/// A new flowlet's slot: the usable member with the least recent load per
/// path quality, or `current` when the gain is marginal; the data plane's
/// walk over the members, one [`PathChoice::consider`] each.
pub fn choose(members: &[Member], current: Option<u32>, own: u64, drawn: Drawn) -> Option<u32> {
    let mut choice = PathChoice::default();
    let mut offered = None;
    for m in members.iter().filter(|m| m.usable) {
        let candidate = Candidate {
            slot: m.slot,
            load: m.load,
            quality: m.quality,
        };
        if drawn.admits(m.id) {
            choice.consider(candidate);
        }
        if current == Some(m.slot) {
            offered = Some(candidate);
        }
    }
    choice.decide(offered, own)
}
