//! The messages of a route socket: rtnetlink's own for routes, and
//! RTM_NEWNEXTHOP/DELNEXTHOP, which `netlink-packet-route` does not know,
//! read here from `linux/nexthop.h`'s layout with `netlink-packet-core`'s
//! attribute iterator.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use netlink_packet_route::AddressFamily;
use netlink_packet_route::RouteNetlinkMessage;
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteMessage, RouteType, RouteVia,
};
use rtnetlink::packet_core::{
    DecodeError, NetlinkDeserializable, NetlinkHeader, NetlinkSerializable, NlasIterator,
};

use super::{Gateway, KernelRoute, NextHopObject, RouteKey, Via};
use crate::config::Prefix;

pub(super) const RTM_NEWNEXTHOP: u16 = 104;
pub(super) const RTM_DELNEXTHOP: u16 = 105;
pub(super) const RTM_GETNEXTHOP: u16 = 106;

/// `struct nhmsg`: family, scope, protocol, reserved, flags.
const NHMSG_LEN: usize = 8;
const NHA_ID: u16 = 1;
const NHA_GROUP: u16 = 2;
const NHA_BLACKHOLE: u16 = 4;
const NHA_OIF: u16 = 5;
const NHA_GATEWAY: u16 = 6;
const NHA_FDB: u16 = 11;
/// `struct nexthop_grp`: id, weight - 1, weight's high byte (6.12 on),
/// reserved.
const NEXTHOP_GRP_LEN: usize = 8;

const AF_INET: u8 = libc::AF_INET as u8;
const AF_INET6: u8 = libc::AF_INET6 as u8;

/// A message on a route socket.
#[derive(Clone, Debug)]
pub enum Message {
    Route(RouteNetlinkMessage),
    /// RTM_NEWNEXTHOP (`new`) or RTM_DELNEXTHOP: the object, `None` when it
    /// is of no use to a data plane (a bridge's FDB next hop) or malformed.
    NextHop {
        new: bool,
        id: u32,
        object: Option<NextHopObject>,
    },
    /// RTM_GETNEXTHOP, a dump request.
    GetNextHops,
}

impl NetlinkSerializable for Message {
    fn message_type(&self) -> u16 {
        match self {
            Self::Route(m) => m.message_type(),
            Self::NextHop { new: true, .. } => RTM_NEWNEXTHOP,
            Self::NextHop { new: false, .. } => RTM_DELNEXTHOP,
            Self::GetNextHops => RTM_GETNEXTHOP,
        }
    }

    fn buffer_len(&self) -> usize {
        match self {
            Self::Route(m) => m.buffer_len(),
            // Only dump requests are sent: an empty nhmsg, every family.
            Self::NextHop { .. } | Self::GetNextHops => NHMSG_LEN,
        }
    }

    fn serialize(&self, buffer: &mut [u8]) {
        match self {
            Self::Route(m) => m.serialize(buffer),
            Self::NextHop { .. } | Self::GetNextHops => buffer.fill(0),
        }
    }
}

impl NetlinkDeserializable for Message {
    type Error = DecodeError;

    fn deserialize(header: &NetlinkHeader, payload: &[u8]) -> Result<Self, DecodeError> {
        match header.message_type {
            RTM_NEWNEXTHOP | RTM_DELNEXTHOP => {
                let (id, object) = next_hop(payload)?;
                Ok(Self::NextHop {
                    new: header.message_type == RTM_NEWNEXTHOP,
                    id,
                    object,
                })
            }
            _ => RouteNetlinkMessage::deserialize(header, payload).map(Self::Route),
        }
    }
}

/// A next-hop object's id and what it is.
fn next_hop(payload: &[u8]) -> Result<(u32, Option<NextHopObject>), DecodeError> {
    let Some((nhmsg, attributes)) = payload.split_at_checked(NHMSG_LEN) else {
        return Err(DecodeError::buffer_too_small(payload.len(), NHMSG_LEN));
    };
    let family = nhmsg[0];
    let (mut id, mut group, mut oif, mut gateway) = (None, None, None, None);
    let mut blackhole = false;
    let mut fdb = false;
    for nla in NlasIterator::new(attributes) {
        let nla = nla?;
        let value = nla.value();
        match nla.kind() {
            NHA_ID => id = Some(u32_of(value)?),
            NHA_GROUP => group = Some(members(value)),
            NHA_BLACKHOLE => blackhole = true,
            NHA_OIF => oif = Some(u32_of(value)?),
            NHA_GATEWAY => gateway = address(family, value),
            NHA_FDB => fdb = true,
            _ => {}
        }
    }
    let id = id.ok_or_else(|| DecodeError::from("next hop without NHA_ID"))?;
    let object = if fdb {
        None
    } else if let Some(members) = group {
        Some(NextHopObject::Group(members))
    } else if blackhole {
        Some(NextHopObject::Blackhole)
    } else {
        oif.map(|ifindex| {
            NextHopObject::Single(Gateway {
                ifindex,
                addr: gateway,
                weight: 1,
            })
        })
    };
    Ok((id, object))
}

fn u32_of(value: &[u8]) -> Result<u32, DecodeError> {
    let bytes: [u8; 4] = value
        .get(..4)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| DecodeError::buffer_too_small(value.len(), 4))?;
    Ok(u32::from_ne_bytes(bytes))
}

/// NHA_GROUP's members: id and weight (1..=65536).
fn members(value: &[u8]) -> Vec<(u32, u32)> {
    value
        .chunks_exact(NEXTHOP_GRP_LEN)
        .map(|m| {
            let id = u32::from_ne_bytes([m[0], m[1], m[2], m[3]]);
            let weight = (u32::from(m[5]) << 8 | u32::from(m[4])) + 1;
            (id, weight)
        })
        .collect()
}

fn address(family: u8, value: &[u8]) -> Option<IpAddr> {
    match family {
        AF_INET => <[u8; 4]>::try_from(value)
            .ok()
            .map(|b| IpAddr::V4(Ipv4Addr::from(b))),
        AF_INET6 => <[u8; 16]>::try_from(value)
            .ok()
            .map(|b| IpAddr::V6(Ipv6Addr::from(b))),
        _ => None,
    }
}

/// The route an RTM_NEWROUTE or RTM_DELROUTE message is about; `None` for
/// what is no forwarding route (a cached clone, a source-specific route,
/// another family).
pub(super) fn route(message: &RouteMessage) -> Option<KernelRoute> {
    let header = &message.header;
    let host = match header.address_family {
        AddressFamily::Inet => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        AddressFamily::Inet6 => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        _ => return None,
    };
    if header.flags.contains(RouteFlags::Cloned) || header.source_prefix_length != 0 {
        return None;
    }
    let mut table = u32::from(header.table);
    let mut destination = host;
    let mut priority = 0;
    let mut oif = None;
    let mut gateway = None;
    let mut multipath = None;
    let mut object = None;
    for attribute in &message.attributes {
        match attribute {
            RouteAttribute::Table(t) => table = *t,
            RouteAttribute::Destination(a) => destination = ip(a)?,
            RouteAttribute::Priority(p) => priority = *p,
            RouteAttribute::Oif(i) => oif = Some(*i),
            RouteAttribute::Gateway(a) => gateway = ip(a),
            RouteAttribute::Via(v) => gateway = via(v),
            RouteAttribute::MultiPath(hops) => multipath = Some(hops),
            RouteAttribute::NhId(id) => object = Some(*id),
            _ => {}
        }
    }
    let via = if header.kind != RouteType::Unicast {
        Via::Nowhere
    } else if let Some(id) = object {
        Via::Object(id)
    } else if let Some(hops) = multipath {
        Via::Gateways(
            hops.iter()
                .map(|hop| Gateway {
                    ifindex: hop.interface_index,
                    addr: hop.attributes.iter().find_map(|a| match a {
                        RouteAttribute::Gateway(a) => ip(a),
                        RouteAttribute::Via(v) => via(v),
                        _ => None,
                    }),
                    weight: u32::from(hop.hops) + 1,
                })
                // Those of a link that is down (RTNH_F_DEAD) stay: the link
                // view takes them out of the buckets, and back to their
                // own when the link returns.
                .collect(),
        )
    } else if let Some(ifindex) = oif {
        Via::Gateways(vec![Gateway {
            ifindex,
            addr: gateway,
            weight: 1,
        }])
    } else {
        Via::Nowhere
    };
    Some(KernelRoute {
        key: RouteKey {
            table,
            prefix: Prefix {
                addr: destination,
                len: header.destination_prefix_length,
            },
            priority,
        },
        protocol: u8::from(header.protocol),
        via,
    })
}

fn ip(address: &RouteAddress) -> Option<IpAddr> {
    match address {
        RouteAddress::Inet(a) => Some(IpAddr::V4(*a)),
        RouteAddress::Inet6(a) => Some(IpAddr::V6(*a)),
        _ => None,
    }
}

/// RTA_VIA: an IPv4 route's IPv6 gateway (BGP unnumbered, RFC 8950).
fn via(via: &RouteVia) -> Option<IpAddr> {
    match via {
        RouteVia::Inet(a) => Some(IpAddr::V4(*a)),
        RouteVia::Inet6(a) => Some(IpAddr::V6(*a)),
        _ => None,
    }
}
