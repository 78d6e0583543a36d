use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteNextHop, RouteProtocol, RouteType, RouteVia,
};
use rtnetlink::packet_core::{NetlinkDeserializable, NetlinkHeader};

use super::wire::{RTM_DELNEXTHOP, RTM_NEWNEXTHOP};
use super::*;

const A: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 2);
const B: Ipv4Addr = Ipv4Addr::new(198, 18, 2, 2);

fn route(attributes: Vec<RouteAttribute>) -> RouteMessage {
    let mut m = RouteMessage::default();
    m.header.address_family = AddressFamily::Inet;
    m.header.destination_prefix_length = 16;
    m.header.table = 254;
    m.header.protocol = RouteProtocol::Bgp;
    m.header.kind = RouteType::Unicast;
    m.attributes = attributes;
    m.attributes
        .push(RouteAttribute::Destination(RouteAddress::Inet(
            Ipv4Addr::new(10, 1, 0, 0),
        )));
    m
}

fn hop(ifindex: u32, gateway: Ipv4Addr, weight: u8) -> RouteNextHop {
    let mut hop = RouteNextHop::default();
    hop.interface_index = ifindex;
    hop.hops = weight - 1;
    hop.attributes
        .push(RouteAttribute::Gateway(RouteAddress::Inet(gateway)));
    hop
}

fn decode(message: RouteMessage) -> Option<RouteEvent> {
    let message = Message::Route(RouteNetlinkMessage::NewRoute(message));
    RouteEvent::decode(NetlinkMessage::new(
        NetlinkHeader::default(),
        NetlinkPayload::InnerMessage(message),
    ))
}

fn key() -> RouteKey {
    RouteKey {
        table: 254,
        prefix: Prefix {
            addr: IpAddr::V4(Ipv4Addr::new(10, 1, 0, 0)),
            len: 16,
        },
        priority: 20,
    }
}

#[test]
fn a_multipath_route_gives_each_gateway_its_interface_and_weight() {
    let message = route(vec![
        RouteAttribute::Priority(20),
        RouteAttribute::MultiPath(vec![hop(11, A, 1), hop(12, B, 3)]),
    ]);
    let gateway = |ifindex, addr: Ipv4Addr, weight| Gateway {
        ifindex,
        addr: Some(IpAddr::V4(addr)),
        weight,
    };
    assert_eq!(
        decode(message),
        Some(RouteEvent::Route(KernelRoute {
            key: key(),
            protocol: 186,
            via: Via::Gateways(vec![gateway(11, A, 1), gateway(12, B, 3)]),
        }))
    );
}

#[test]
fn single_gateways_objects_and_the_rest() {
    let single = route(vec![
        RouteAttribute::Priority(20),
        RouteAttribute::Oif(11),
        RouteAttribute::Via(RouteVia::Inet6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2))),
    ]);
    let Some(RouteEvent::Route(r)) = decode(single) else {
        panic!("a route");
    };
    assert_eq!(
        r.via,
        Via::Gateways(vec![Gateway {
            ifindex: 11,
            addr: Some("fe80::2".parse().expect("ip")),
            weight: 1
        }]),
        "an IPv4 route through an IPv6 gateway (RTA_VIA)"
    );
    let Some(RouteEvent::Route(r)) = decode(route(vec![RouteAttribute::NhId(7)])) else {
        panic!("a route");
    };
    assert_eq!(r.via, Via::Object(7));
    let mut blackhole = route(vec![]);
    blackhole.header.kind = RouteType::BlackHole;
    let Some(RouteEvent::Route(r)) = decode(blackhole) else {
        panic!("a route");
    };
    assert_eq!(r.via, Via::Nowhere);
    let mut cloned = route(vec![RouteAttribute::Oif(11)]);
    cloned.header.flags = RouteFlags::Cloned;
    assert_eq!(decode(cloned), None, "a cached clone is no route");
    let mut big_table = route(vec![RouteAttribute::Table(1000), RouteAttribute::Oif(3)]);
    big_table.header.table = 252;
    let Some(RouteEvent::Route(r)) = decode(big_table) else {
        panic!("a route");
    };
    assert_eq!(r.key.table, 1000, "RTA_TABLE over the header's byte");
}

/// An nhmsg of `family` and attributes `(type, value)`.
fn nexthop(family: u8, attributes: &[(u16, Vec<u8>)]) -> Vec<u8> {
    let mut bytes = vec![family, 0, 4, 0, 0, 0, 0, 0];
    for (kind, value) in attributes {
        let len = 4 + value.len();
        bytes.extend((len as u16).to_ne_bytes());
        bytes.extend(kind.to_ne_bytes());
        bytes.extend(value);
        bytes.resize(bytes.len().next_multiple_of(4), 0);
    }
    bytes
}

fn decode_nexthop(kind: u16, payload: &[u8]) -> Option<RouteEvent> {
    let mut header = NetlinkHeader::default();
    header.message_type = kind;
    let message = Message::deserialize(&header, payload).expect("decodes");
    RouteEvent::decode(NetlinkMessage::new(
        header,
        NetlinkPayload::InnerMessage(message),
    ))
}

#[test]
fn next_hop_objects_single_and_group_with_weights() {
    let id = |id: u32| (1, id.to_ne_bytes().to_vec());
    let single = nexthop(
        libc::AF_INET as u8,
        &[
            id(1),
            (5, 11u32.to_ne_bytes().to_vec()),
            (6, A.octets().to_vec()),
        ],
    );
    assert_eq!(
        decode_nexthop(RTM_NEWNEXTHOP, &single),
        Some(RouteEvent::NextHop {
            id: 1,
            object: Some(NextHopObject::Single(Gateway {
                ifindex: 11,
                addr: Some(IpAddr::V4(A)),
                weight: 1
            }))
        })
    );
    // Members 1 (weight 1) and 2 (weight 3, stored as 2), then one of
    // weight 300 (299: 43 and a high byte of 1).
    let mut members = Vec::new();
    for (member, low, high) in [(1u32, 0u8, 0u8), (2, 2, 0), (3, 43, 1)] {
        members.extend(member.to_ne_bytes());
        members.extend([low, high, 0, 0]);
    }
    let group = nexthop(0, &[id(10), (2, members)]);
    assert_eq!(
        decode_nexthop(RTM_NEWNEXTHOP, &group),
        Some(RouteEvent::NextHop {
            id: 10,
            object: Some(NextHopObject::Group(vec![(1, 1), (2, 3), (3, 300)]))
        })
    );
    let fdb = nexthop(libc::AF_INET as u8, &[id(4), (11, Vec::new())]);
    assert_eq!(
        decode_nexthop(RTM_NEWNEXTHOP, &fdb),
        Some(RouteEvent::NextHop {
            id: 4,
            object: None
        })
    );
    assert_eq!(
        decode_nexthop(RTM_DELNEXTHOP, &group),
        Some(RouteEvent::NextHopRemoved(10))
    );
}

#[test]
fn an_overrun_is_lost_route_events() {
    let message: NetlinkMessage<Message> = NetlinkMessage::new(
        NetlinkHeader::default(),
        NetlinkPayload::Overrun(Vec::new()),
    );
    assert_eq!(RouteEvent::decode(message), Some(RouteEvent::Lost));
}
