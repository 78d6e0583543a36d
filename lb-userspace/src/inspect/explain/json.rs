//! `explain --json`: each frame's explanation as data, for scripts. The
//! stages that decide where a packet goes (verdict, packet, route, group,
//! hash, override, the flowlet or spray choice, next hop) are fields; the
//! text form's lines ride along as `lines`, so nothing the text says is
//! lost.

use std::net::IpAddr;

use lb_common::limits::{LOCAL_ROUTE, NO_NEXTHOP};
use lb_common::packet::parse::{IPPROTO_TCP, IPPROTO_UDP, Parsed};
use lb_common::route::Destination;
use lb_common::select::flowlet::FlowletStep;
use lb_common::steer::Spray;
use serde::Serialize;

use super::render::{action, address, render};
use super::{Dynamic, Explanation};
use crate::config::format_mac;
use crate::inspect::mode_name;
use crate::inspect::names::Names;

/// `{"notes": [...], "frames": [...]}`: the names' notes once, then a
/// frame for the described packet or each of the capture's.
#[derive(Debug, Serialize)]
pub struct Report {
    pub notes: Vec<String>,
    pub frames: Vec<Frame>,
}

#[derive(Debug, Serialize)]
pub struct Frame {
    pub bytes: usize,
    /// The verdict's reason, as the metrics' `reason` label and the text
    /// form name it, and the XDP action it takes.
    pub verdict: &'static str,
    pub action: &'static str,
    /// `null` when the parser gave the verdict.
    pub packet: Option<Packet>,
    pub route: Option<Route>,
    pub group: Option<Group>,
    pub hash: Option<Hash>,
    /// The override the packet matched.
    pub pinned: Option<Pin>,
    /// A flowlet or per-packet group's choice on one CPU.
    pub choice: Option<Choice>,
    pub next_hop: Option<NextHop>,
    /// The text form, line by line.
    pub lines: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct Packet {
    /// `udp`, `tcp`, or the IP protocol number.
    pub protocol: String,
    pub src: IpAddr,
    pub dst: IpAddr,
    /// `null` for a fragment and other protocols.
    pub src_port: Option<u16>,
    pub dst_port: Option<u16>,
    /// RoCEv2's BTH, when there is one.
    pub qp: Option<u32>,
    pub opcode: Option<u8>,
    pub psn: Option<u32>,
    /// TTL or hop limit.
    pub ttl: u8,
    pub vlan_tags: u8,
    pub fragment: bool,
}

#[derive(Debug, Serialize)]
pub struct Route {
    /// `null` when no prefix covers the destination.
    pub prefix: Option<String>,
    /// One of the box's own addresses.
    pub local: bool,
    /// The group (and destination class) the route sends to, by name.
    pub to: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct Group {
    pub id: u32,
    pub name: Option<String>,
    pub mode: String,
}

#[derive(Debug, Serialize)]
pub struct Hash {
    pub value: u32,
    pub bucket: u32,
    /// The next hop ECMP holds in that bucket; `null` for none.
    pub ecmp_next_hop: Option<u32>,
}

#[derive(Debug, Serialize)]
pub struct Pin {
    pub override_index: u32,
    pub slot: u32,
    pub usable: bool,
}

#[derive(Debug, Serialize)]
pub struct Choice {
    pub cpu: usize,
    /// `continue` (inside a flowlet), `new-flowlet`, `start` (on ECMP's
    /// next hop), `occupied` (another generation's entry: as `start`, the
    /// entry left alone), or `sprayed`.
    pub step: &'static str,
    /// The group slot the packet takes; `null` for no usable member.
    pub slot: Option<u32>,
}

#[derive(Debug, Serialize)]
pub struct NextHop {
    pub id: u32,
    /// The config's spec; `null` when not named.
    pub name: Option<String>,
    pub interface: String,
    pub ifindex: u32,
    pub src_mac: String,
    pub dst_mac: String,
    /// 0: untagged.
    pub vlan: u16,
    pub usable: bool,
    /// Its egress port is missing from the devmap.
    pub port_missing: bool,
}

/// `e` as data, its names from `names`.
pub fn frame(e: &Explanation, names: &Names) -> Frame {
    Frame {
        bytes: e.len,
        verdict: e.verdict.name(),
        action: action(e.verdict),
        packet: e.parsed.as_ref().map(packet),
        route: e.route.map(|r| Route {
            prefix: r.prefix.map(|(a, l)| format!("{a}/{l}")),
            local: r.value == Some(LOCAL_ROUTE),
            to: (r.value)
                .filter(|&v| v != LOCAL_ROUTE)
                .map(|v| names.destination(Destination::of_value(v))),
        }),
        group: e.group.map(|(id, g)| Group {
            id,
            name: names.group_name(id).map(str::to_owned),
            mode: mode_name(g.mode),
        }),
        hash: e.hash.map(|h| Hash {
            value: h.hash,
            bucket: h.bucket,
            ecmp_next_hop: (h.ecmp != NO_NEXTHOP).then_some(h.ecmp),
        }),
        pinned: e.pin.map(|p| Pin {
            override_index: p.index,
            slot: p.slot,
            usable: p.usable,
        }),
        choice: e.dynamic.as_ref().map(|d| {
            let (step, slot) = match &d.kind {
                Dynamic::Sprayed(Spray {
                    listed, stand_in, ..
                }) => {
                    let listed = d.members.iter().find(|m| m.id == *listed);
                    ("sprayed", stand_in.or(listed.map(|m| m.slot)))
                }
                Dynamic::Flowlet { step, slot, .. } => (step_name(step), *slot),
            };
            Choice {
                cpu: d.cpu,
                step,
                slot,
            }
        }),
        next_hop: e.next_hop.map(|(id, nh)| NextHop {
            id,
            name: names.nexthop(id).map(str::to_owned),
            interface: names.interface(nh.ifindex),
            ifindex: nh.ifindex,
            src_mac: format_mac(nh.src_mac),
            dst_mac: format_mac(nh.dst_mac),
            vlan: nh.vlan,
            usable: nh.flags & lb_common::abi::NEXTHOP_USABLE != 0,
            port_missing: e.port_missing,
        }),
        lines: render(e, names).lines().map(str::to_owned).collect(),
    }
}

fn step_name(step: &FlowletStep) -> &'static str {
    match step {
        FlowletStep::Continue(_) => "continue",
        FlowletStep::Choose { .. } => "new-flowlet",
        FlowletStep::Start => "start",
        FlowletStep::Occupied => "occupied",
    }
}

fn packet(p: &Parsed) -> Packet {
    let f = &p.flow;
    let ports = matches!(f.protocol, IPPROTO_UDP | IPPROTO_TCP) && !p.fragment;
    Packet {
        protocol: match f.protocol {
            IPPROTO_UDP => "udp".to_owned(),
            IPPROTO_TCP => "tcp".to_owned(),
            other => other.to_string(),
        },
        src: address(&f.src, f.is_ipv6),
        dst: address(&f.dst, f.is_ipv6),
        src_port: ports.then_some(f.src_port),
        dst_port: ports.then_some(f.dst_port),
        qp: p.bth.map(|b| b.dest_qp),
        opcode: p.bth.map(|b| b.opcode),
        psn: p.bth.map(|b| b.psn),
        ttl: p.ttl,
        vlan_tags: p.vlan_tags,
        fragment: p.fragment,
    }
}
