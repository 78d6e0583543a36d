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
use lb_common::packet::parse::{Bth, FlowFields, Parsed, parse};
use lb_common::route::{self, Destination, table::value_entry};
use lb_common::select::choice::Drawn;
use lb_common::select::flowlet::{
    FlowletState, FlowletStep, MODE_ECMP, flowlet_index, flowlet_rules,
};
use lb_common::select::hash::{HashFields, HashInput, flow_hash, hash_input};
use lb_common::select::overrides::{matches, override_index};
use lb_common::steer::{self, Decision, Maps as _, Pin, Spray};
use lb_common::verdict::Reason;

use super::cpu_state::CpuState;
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
    Sprayed(Spray),
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
        /// The least quality of a member it would weigh besides those
        /// while the member is idle: the idle peers of the flow's path.
        peers_from: Option<u32>,
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

/// A frame's stages before its group's choice, which depend on its flow
/// alone: where the choice starts.
#[derive(Clone, Copy, Debug)]
pub struct Ahead {
    pub destination: Destination,
    pub group: GroupEntry,
    pub hash: u32,
    /// The next hop ECMP's bucket holds.
    pub ecmp: u32,
    /// The override the packet matched, usable or not.
    pub pin: Pin,
}

impl Ahead {
    /// The group's choice for a packet of `len` bytes (with `bth`) over
    /// `maps`: the program's own, [`steer::next_hop`].
    pub fn choose(
        &self,
        maps: &mut impl steer::Maps,
        len: u64,
        bth: Option<&Bth>,
    ) -> std::result::Result<steer::Choice, Reason> {
        let mut choice = steer::Choice::ecmp(self.ecmp);
        steer::next_hop(
            maps,
            self.destination,
            &self.group,
            self.hash,
            len,
            bth,
            self.pin,
            &mut choice,
        )?;
        Ok(choice)
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
    let (mut e, ahead) = up_to_the_choice(maps, frame, ingress)?;
    let Some(ahead) = ahead else {
        return Ok(e);
    };
    let Ahead {
        destination,
        ref group,
        hash,
        ecmp,
        pin,
    } = ahead;
    let at = InGroup {
        maps,
        destination,
        group,
        len: frame.len() as u64,
        ecmp,
    };
    // The program's own choice over the CPU's state ([`CpuState`]): the
    // CPU asked for, else the one holding the flow's latest flowlet.
    let (cpu, flowlets) = match flowlet_rules(group.mode, group.draining) {
        MODE_ECMP => (0, Vec::new()),
        _ => at.cpu(hash, cpu)?,
    };
    let mut state = CpuState::new(maps, cpu, now_ns);
    let bth = e.parsed.and_then(|p| p.bth);
    let chosen = ahead.choose(&mut state, frame.len() as u64, bth.as_ref());
    state.failed()?;
    if let Some(decision) = state.take_decision() {
        e.dynamic = Some(at.dynamic_step(decision, cpu, &flowlets, now_ns, pin)?);
    }
    let nh_id = match chosen {
        Ok(choice) => choice.nh_id,
        Err(reason) => return Ok(e.ends(reason)),
    };
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

/// `frame`'s stages up to its group's choice, come in on `ingress`: what
/// explain says of them, and where the choice starts, or `None` when the
/// verdict came before it.
pub fn up_to_the_choice(
    maps: &dyn MapView,
    frame: &[u8],
    ingress: u32,
) -> Result<(Explanation, Option<Ahead>)> {
    let e = Explanation::new(frame.len());
    let parsed = match parse(frame) {
        Ok(parsed) => parsed,
        Err(reason) => return Ok((e.ends(reason), None)),
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
            return Ok((e.ends(Reason::OtherHost), None));
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
        Err(reason) => return Ok((e.ends(reason), None)),
    };
    let group_id = destination.group;
    if parsed.ttl <= 1 {
        return Ok((e.ends(Reason::TtlExpired), None));
    }
    let Some(group) = maps.group_at(group_id)? else {
        return Ok((e.ends(Reason::NoRoute), None));
    };
    e.group = Some((group_id, group));
    let fields = HashFields(group.hash_fields);
    let input = hash_input(flow, fields);
    let hash = flow_hash(group.hash_seed, flow, fields);
    let bucket = hash & (BUCKETS_PER_GROUP - 1);
    let Some(ecmp) = maps.bucket(group_id * BUCKETS_PER_GROUP + bucket)? else {
        return Ok((e.ends(Reason::NoNextHop), None));
    };
    e.hash = Some(HashStep {
        input,
        hash,
        bucket,
        ecmp,
    });
    let at = InGroup {
        maps,
        destination,
        group: &group,
        len: frame.len() as u64,
        ecmp,
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
    let pin = pin.map_or(Pin::NONE, |(index, slot)| Pin { index, slot });
    let ahead = Ahead {
        destination,
        group,
        hash,
        ecmp,
        pin,
    };
    Ok((e, Some(ahead)))
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

/// One packet in its group: what explain reads beside the choice.
struct InGroup<'a> {
    maps: &'a dyn MapView,
    /// The packet's group and class.
    destination: Destination,
    group: &'a GroupEntry,
    len: u64,
    /// The next hop ECMP's bucket holds.
    ecmp: u32,
}

impl InGroup<'_> {
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

    /// The members up to the first empty slot, each with its load at
    /// `epoch` as the choice weighs it on `state`'s CPU.
    fn members(&self, state: &CpuState, epoch: u64) -> Result<Vec<Member>> {
        let mut members = Vec::new();
        for slot in 0..MAX_NEXTHOPS_PER_GROUP as u32 {
            let id = self.member(slot);
            if id == NO_NEXTHOP {
                break;
            }
            members.push(Member {
                slot,
                id,
                usable: self.usable(id)?,
                load: state.weighed_load(self.destination, slot, id, epoch),
                quality: self.maps.quality(self.destination.quality_index(id))?,
            });
        }
        state.failed()?;
        Ok(members)
    }

    /// The CPU whose state a flowlet of flow `hash` is explained on:
    /// `asked`, else the one holding its latest flowlet of the group's
    /// generation, else 0; and every CPU's entry of the flow.
    fn cpu(&self, hash: u32, asked: Option<usize>) -> Result<(usize, Vec<FlowletState>)> {
        let index = flowlet_index(self.destination.group, hash, self.maps.flowlet_capacity());
        let states = self.maps.flowlet(index)?.unwrap_or_default();
        let cpu = asked.unwrap_or_else(|| {
            (states.iter().enumerate())
                .filter(|(_, s)| s.generation == self.group.generation)
                .max_by_key(|(_, s)| s.last_seen_ns)
                .map_or(0, |(cpu, _)| cpu)
        });
        let cpus = self.maps.epochs(0)?.len();
        if cpu >= cpus {
            return Err(InspectError::NoSuchCpu { cpu, cpus });
        }
        Ok((cpu, states))
    }

    /// The dynamic choice's `decision` on `cpu` as explain shows it: the
    /// members as the choice weighed them, and for a flowlet where a new
    /// one of the flow would go now.
    fn dynamic_step(
        &self,
        decision: Decision,
        cpu: usize,
        flowlets: &[FlowletState],
        now_ns: u64,
        pin: Pin,
    ) -> Result<DynamicStep> {
        let epoch = self.maps.epochs(self.len)?[cpu];
        // The state before this packet's choice.
        let before = CpuState::new(self.maps, cpu, now_ns);
        let members = self.members(&before, epoch)?;
        let kind = match decision {
            Decision::Sprayed(spray) => Dynamic::Sprayed(spray),
            Decision::Flowlet {
                index,
                step,
                slot,
                own,
                epoch,
                drawn,
            } => {
                let draining = self.group.mode == MODE_ECMP;
                let pinned =
                    (pin.is_some() && self.usable(self.member(pin.slot))?).then_some(pin.slot);
                let ecmp_slot = || members.iter().find(|m| m.id == self.ecmp).map(|m| m.slot);
                let new_flowlet = match (draining, pinned) {
                    (true, _) => pinned.or_else(ecmp_slot),
                    (false, Some(pinned)) => Some(pinned),
                    (false, None) => {
                        let current = match step {
                            FlowletStep::Continue(slot) => Some(slot),
                            FlowletStep::Choose { current } => current,
                            FlowletStep::Start | FlowletStep::Occupied => None,
                        };
                        let choose = |drawn| {
                            before.choose(self.group, self.destination, epoch, current, own, drawn)
                        };
                        choose(drawn).or_else(|| (!drawn.is_all()).then(|| choose(Drawn::ALL))?)
                    }
                };
                let live = |s: &FlowletState| s.generation == self.group.generation;
                Dynamic::Flowlet {
                    index,
                    now_ns,
                    state: flowlets.get(cpu).copied().filter(|s| s.generation != 0),
                    other_cpus: (flowlets.iter().enumerate())
                        .filter(|&(c, s)| c != cpu && live(s))
                        .map(|(c, _)| c)
                        .collect(),
                    step,
                    slot,
                    own,
                    new_flowlet,
                    drawn: (!drawn.is_all()).then(|| drawn.ids()),
                    peers_from: drawn.floor(),
                    draining,
                }
            }
        };
        Ok(DynamicStep { cpu, members, kind })
    }
}
