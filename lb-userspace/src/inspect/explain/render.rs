//! `explain`'s text: one line per stage the frame went through.

use std::fmt::Write as _;
use std::net::IpAddr;

use lb_common::abi::NextHop;
use lb_common::limits::LOCAL_ROUTE;
use lb_common::packet::parse::{IPPROTO_TCP, IPPROTO_UDP, Parsed};
use lb_common::route::Destination;
use lb_common::select::choice::IDLE_PEER_SHARE;
use lb_common::select::flowlet::{FlowletStep, HYSTERESIS_DEN, HYSTERESIS_NUM, LOAD_BIAS};
use lb_common::steer::Spray;
use lb_common::verdict::{Reason, XDP_DROP, XDP_PASS, XDP_REDIRECT};

use super::{Dynamic, DynamicStep, Explanation, Member};
use crate::config::format_mac;
use crate::inspect::group_line;
use crate::inspect::names::Names;

/// What each verdict means, as the README's table says it.
fn meaning(reason: Reason) -> &'static str {
    match reason {
        Reason::Forwarded => "routed, rewritten, sent to the next hop",
        Reason::NotIp => "not IPv4 or IPv6",
        Reason::NotUnicast => "destination MAC multicast or broadcast",
        Reason::Local => {
            "for the box itself: one of its own addresses, or a destination no router forwards"
        }
        Reason::NoRoute => "no configured prefix covers the destination",
        Reason::TtlExpired => "TTL or hop limit <= 1; the kernel sends the ICMP error",
        Reason::NoNextHop => "no usable next hop, or its port is missing",
        Reason::Unsupported => {
            "three or more VLAN tags, more than 6 IPv6 extension headers, or a jumbogram"
        }
        Reason::L4Truncated => "TCP, UDP or BTH header cut short inside the datagram",
        Reason::L2Truncated => "frame ends inside the Ethernet header or a VLAN tag",
        Reason::L3Malformed => "IP header cut short or inconsistent",
        Reason::OtherHost => {
            "addressed to another host: neither the ingress port's MAC nor the DLB MAC"
        }
    }
}

pub(super) fn action(reason: Reason) -> &'static str {
    match reason.xdp_action() {
        XDP_REDIRECT => "XDP_REDIRECT",
        XDP_DROP => "XDP_DROP",
        XDP_PASS => "XDP_PASS",
        _ => "?",
    }
}

pub(super) fn address(bytes: &[u8; 16], ipv6: bool) -> IpAddr {
    if ipv6 {
        IpAddr::from(*bytes)
    } else {
        IpAddr::from([bytes[0], bytes[1], bytes[2], bytes[3]])
    }
}

fn endpoint(addr: IpAddr, port: u16) -> String {
    match addr {
        IpAddr::V4(a) => format!("{a}:{port}"),
        IpAddr::V6(a) => format!("[{a}]:{port}"),
    }
}

fn packet_line(p: &Parsed, len: usize) -> String {
    let f = &p.flow;
    let (src, dst) = (address(&f.src, f.is_ipv6), address(&f.dst, f.is_ipv6));
    let mut line = match f.protocol {
        IPPROTO_UDP | IPPROTO_TCP if !p.fragment => {
            let proto = if f.protocol == IPPROTO_UDP {
                "udp"
            } else {
                "tcp"
            };
            format!(
                "{proto} {} -> {}",
                endpoint(src, f.src_port),
                endpoint(dst, f.dst_port)
            )
        }
        proto => format!("ip protocol {proto} {src} -> {dst}"),
    };
    if let Some(bth) = &p.bth {
        write!(
            line,
            " qp {:#08x} opcode {:#04x} psn {}",
            bth.dest_qp, bth.opcode, bth.psn
        )
        .unwrap();
    }
    if p.fragment {
        line.push_str(" (fragment: hashed on L3 fields)");
    }
    let hop = if f.is_ipv6 { "hop limit" } else { "ttl" };
    write!(line, ", {hop} {}", p.ttl).unwrap();
    if p.vlan_tags > 0 {
        write!(line, ", {} VLAN tag(s)", p.vlan_tags).unwrap();
    }
    write!(line, ", {len} bytes").unwrap();
    line
}

/// The hash input split at its fields: addresses, protocol, ports, QP.
fn hash_input(bytes: &[u8]) -> String {
    let a = (bytes.len() - 8) / 2;
    let hex = |r: std::ops::Range<usize>| {
        bytes[r]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    [
        hex(0..a),
        hex(a..2 * a),
        hex(2 * a..2 * a + 1),
        hex(2 * a + 1..2 * a + 3),
        hex(2 * a + 3..2 * a + 5),
        hex(2 * a + 5..2 * a + 8),
    ]
    .join(" ")
}

/// `next hop 17 (lo 02:00:00:00:0a:03)`.
fn nexthop_name(id: u32, names: &Names) -> String {
    match names.nexthop(id) {
        Some(spec) => format!("next hop {id} ({spec})"),
        None => format!("next hop {id}"),
    }
}

fn nexthop_line(id: u32, nh: &NextHop, names: &Names, port_missing: bool) -> String {
    let vlan = match nh.vlan {
        0 => "untagged".to_owned(),
        v => format!("vlan {v}"),
    };
    let usable = if nh.flags & lb_common::abi::NEXTHOP_USABLE != 0 {
        "usable"
    } else {
        "NOT usable"
    };
    let port = if port_missing {
        ", port missing from the devmap"
    } else {
        ""
    };
    format!(
        "next hop: {}: out {} (ifindex {}), {} -> {}, {vlan}, {usable}{port}",
        nexthop_name(id, names),
        names.interface(nh.ifindex),
        nh.ifindex,
        format_mac(nh.src_mac),
        format_mac(nh.dst_mac),
    )
}

fn slot_name(slot: Option<u32>, members: &[Member], names: &Names) -> String {
    match slot.and_then(|s| members.iter().find(|m| m.slot == s)) {
        Some(m) => format!("slot {} ({})", m.slot, nexthop_name(m.id, names)),
        None => "no usable member".to_owned(),
    }
}

fn dynamic_lines(d: &DynamicStep, gap_ns: u64, names: &Names, out: &mut String) {
    let members = &d.members;
    match &d.kind {
        Dynamic::Sprayed(Spray {
            index,
            listed,
            stand_in,
        }) => {
            write!(
                out,
                "sprayed (cpu {}): the spray sequence's slot {index} lists {}",
                d.cpu,
                nexthop_name(*listed, names)
            )
            .unwrap();
            if let Some(slot) = stand_in {
                write!(
                    out,
                    ", not usable: the least loaded usable member stands in, {}",
                    slot_name(Some(*slot), members, names)
                )
                .unwrap();
            }
            out.push('\n');
        }
        Dynamic::Flowlet {
            index,
            now_ns,
            state,
            other_cpus,
            step,
            slot,
            own,
            new_flowlet,
            drawn,
            peers_from,
            draining,
        } => {
            write!(out, "flowlet (cpu {}", d.cpu).unwrap();
            if !other_cpus.is_empty() {
                let cpus: Vec<String> = other_cpus.iter().map(usize::to_string).collect();
                write!(out, "; cpus {} hold state too", cpus.join(", ")).unwrap();
            }
            writeln!(out, "): flowlet table entry {index}").unwrap();
            match state {
                Some(s) => writeln!(
                    out,
                    "  state: slot {}, last seen {:.3} ms ago (gap {:.3} ms), own load {} bytes, generation {}",
                    s.slot,
                    now_ns.saturating_sub(s.last_seen_ns) as f64 / 1e6,
                    gap_ns as f64 / 1e6,
                    own,
                    s.generation
                )
                .unwrap(),
                None => out.push_str("  state: none on this cpu\n"),
            }
            let taken = slot_name(*slot, members, names);
            let why = match step {
                FlowletStep::Continue(s) if *draining && *slot == Some(*s) => {
                    format!("draining to ecmp, inside its flowlet: stays on {taken}")
                }
                _ if *draining => format!(
                    "draining to ecmp, its flowlet over (the gap passed, no state, or its next hop unusable): takes its ECMP slot, {taken}"
                ),
                FlowletStep::Continue(_) => format!("inside its flowlet: stays on {taken}"),
                FlowletStep::Choose { current } => format!(
                    "the gap passed: a new flowlet from {}, takes {taken}",
                    current.map_or("no slot".to_owned(), |c| format!("slot {c}"))
                ),
                FlowletStep::Start => format!(
                    "no state of the group's generation: starts where ECMP puts it if that next hop is usable and not rated below the default quality, else at least cost: {taken}"
                ),
                FlowletStep::Occupied => format!(
                    "another generation's flowlet is live in the entry (another group's flow, or this group's before its members changed): placed as a first flowlet, the entry left to it: {taken}"
                ),
            };
            writeln!(out, "  step: {why}").unwrap();
            if *draining {
                out.push_str("  members (a new flowlet takes the flow's ECMP slot):\n");
            } else if let Some([a, b]) = drawn {
                let mut what = if a == b {
                    format!(
                        "the one next hop drawn from the quality-weighted sequence, now {}",
                        nexthop_name(*a, names)
                    )
                } else {
                    format!(
                        "two drawn in proportion to quality, now {} and {}",
                        nexthop_name(*a, names),
                        nexthop_name(*b, names)
                    )
                };
                if let Some(floor) = peers_from {
                    what.push_str(&format!(
                        " and every member of quality {floor} or more carrying under 1/{IDLE_PEER_SHARE} of the flow's load (its path's idle peers)"
                    ));
                }
                if a != b || peers_from.is_some() {
                    what.push_str(&format!(
                        ", and takes the least (load + {LOAD_BIAS}) / quality"
                    ));
                }
                writeln!(
                    out,
                    "  members (a new flowlet weighs {what}; it leaves its slot only below {HYSTERESIS_NUM}/{HYSTERESIS_DEN} of its cost):"
                )
                .unwrap();
            } else {
                writeln!(
                    out,
                    "  members (a new flowlet takes the least (load + {LOAD_BIAS}) / quality; it leaves its slot only below {HYSTERESIS_NUM}/{HYSTERESIS_DEN} of its cost):"
                )
                .unwrap();
            }
            for m in members {
                writeln!(
                    out,
                    "    slot {} {}: {}, load {} bytes, quality {}",
                    m.slot,
                    nexthop_name(m.id, names),
                    if m.usable { "usable" } else { "NOT usable" },
                    m.load,
                    m.quality
                )
                .unwrap();
            }
            writeln!(
                out,
                "  a new flowlet now would take {}",
                slot_name(*new_flowlet, members, names)
            )
            .unwrap();
        }
    }
}

/// The explanation as text, named through `names`.
pub fn render(e: &Explanation, names: &Names) -> String {
    let mut out = format!(
        "verdict: {} ({}): {}\n",
        e.verdict.name(),
        action(e.verdict),
        meaning(e.verdict)
    );
    let Some(parsed) = &e.parsed else {
        writeln!(out, "packet: {} bytes, the parser stopped", e.len).unwrap();
        return out;
    };
    writeln!(out, "packet: {}", packet_line(parsed, e.len)).unwrap();
    if e.mac_unchecked {
        writeln!(
            out,
            "note: the destination MAC was not checked against the ingress port's; give \
             --ingress"
        )
        .unwrap();
    }
    if let Some(route) = &e.route {
        let line = match (route.prefix, route.value) {
            (_, None) => "none".to_owned(),
            (prefix, Some(value)) => {
                let prefix = prefix.map_or("?".to_owned(), |(a, l)| format!("{a}/{l}"));
                match value {
                    LOCAL_ROUTE => format!("{prefix} -> the box's own address (local)"),
                    value => format!(
                        "{prefix} -> {}",
                        names.destination(Destination::of_value(value))
                    ),
                }
            }
        };
        writeln!(out, "route: {line}").unwrap();
    }
    if let Some((id, group)) = &e.group {
        writeln!(out, "group: {}", group_line(*id, group, names)).unwrap();
    }
    if let Some(h) = &e.hash {
        writeln!(out, "hash input: {}", hash_input(h.input.as_bytes())).unwrap();
        writeln!(
            out,
            "hash: {:#010x}, bucket {} -> {}",
            h.hash,
            h.bucket,
            match h.ecmp {
                lb_common::limits::NO_NEXTHOP => "no next hop".to_owned(),
                id => nexthop_name(id, names),
            }
        )
        .unwrap();
    }
    if e.ingress_unknown {
        writeln!(
            out,
            "note: overrides that name an ingress interface were taken as not matching; \
             give --ingress"
        )
        .unwrap();
    }
    if let Some(pin) = &e.pin {
        let member = e.group.map_or(lb_common::limits::NO_NEXTHOP, |(_, g)| {
            g.members[pin.slot as usize % g.members.len()]
        });
        let then = if pin.usable {
            "its next hop takes the packet (a flowlet mode moves a flow there at its next flowlet)"
        } else {
            "its next hop is unusable: the group's own choice, counted as a fallback"
        };
        writeln!(
            out,
            "override: #{} pins slot {} ({}); {then}",
            pin.index,
            pin.slot,
            nexthop_name(member, names)
        )
        .unwrap();
    }
    if let Some(d) = &e.dynamic {
        let gap = e.group.map_or(0, |(_, g)| g.flowlet_gap_ns);
        dynamic_lines(d, gap, names, &mut out);
    }
    if let Some((id, nh)) = &e.next_hop {
        writeln!(out, "{}", nexthop_line(*id, nh, names, e.port_missing)).unwrap();
    }
    out
}
