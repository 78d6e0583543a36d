//! The kernel's routes and next-hop objects: RTM_NEWROUTE/DELROUTE (IPv4
//! and IPv6, a single gateway, `RTA_MULTIPATH` with weights, or `RTA_NH_ID`)
//! and RTM_NEWNEXTHOP/DELNEXTHOP (`ip nexthop`: single next hops and
//! groups), as events on a socket of their own and as a dump on that same
//! socket, so that a dump taken after subscribing misses nothing.

use std::net::IpAddr;

use futures_util::StreamExt;
use netlink_packet_route::route::{RouteHeader, RouteMessage};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use rtnetlink::MulticastGroup;
use rtnetlink::packet_core::{
    NLM_F_DUMP, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload,
};

use super::events::{Event, Events};
use super::{NetlinkError, Result};
use crate::config::Prefix;

mod wire;

pub use wire::Message;

/// A route's identity in the kernel: the same prefix may be in several
/// tables, and in one table at several metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RouteKey {
    pub table: u32,
    pub prefix: Prefix,
    /// RTA_PRIORITY, the metric: the lowest is the one in use.
    pub priority: u32,
}

/// One next hop of a route or next-hop object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Gateway {
    pub ifindex: u32,
    /// `None` for a route straight onto the link (no `via`).
    pub addr: Option<IpAddr>,
    /// 1 unless the route gives `weight`.
    pub weight: u32,
}

/// Where a route sends its packets.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Via {
    Gateways(Vec<Gateway>),
    /// RTA_NH_ID: a next-hop object.
    Object(u32),
    /// Not a unicast route: blackhole, unreachable, local, ...
    Nowhere,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelRoute {
    pub key: RouteKey,
    /// RTM_PROTOCOL: who installed it (`bgp` is 186).
    pub protocol: u8,
    pub via: Via,
}

/// A next-hop object (`ip nexthop`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NextHopObject {
    Single(Gateway),
    /// Member ids and weights.
    Group(Vec<(u32, u32)>),
    Blackhole,
}

/// A change to the kernel's routes or next-hop objects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RouteEvent {
    Route(KernelRoute),
    RouteRemoved(RouteKey),
    /// Next-hop object `id` as it is now; `None` when it is nothing a data
    /// plane forwards to (an FDB next hop).
    NextHop {
        id: u32,
        object: Option<NextHopObject>,
    },
    NextHopRemoved(u32),
    /// The kernel dropped events: routes and next hops must be read again.
    Lost,
}

impl Event for RouteEvent {
    type Message = Message;
    const GROUPS: &'static [MulticastGroup] = &[
        MulticastGroup::Ipv4Route,
        MulticastGroup::Ipv6Route,
        MulticastGroup::Nexthop,
    ];

    const KIND: &'static str = "route";

    fn lost() -> Self {
        Self::Lost
    }

    fn decode(message: NetlinkMessage<Message>) -> Option<Self> {
        match message.payload {
            NetlinkPayload::InnerMessage(Message::Route(RouteNetlinkMessage::NewRoute(m))) => {
                wire::route(&m).map(Self::Route)
            }
            NetlinkPayload::InnerMessage(Message::Route(RouteNetlinkMessage::DelRoute(m))) => {
                wire::route(&m).map(|r| Self::RouteRemoved(r.key))
            }
            NetlinkPayload::InnerMessage(Message::NextHop {
                new: true,
                id,
                object,
            }) => Some(Self::NextHop { id, object }),
            NetlinkPayload::InnerMessage(Message::NextHop { new: false, id, .. }) => {
                Some(Self::NextHopRemoved(id))
            }
            NetlinkPayload::Overrun(_) => Some(Self::Lost),
            _ => None,
        }
    }
}

pub type RouteEvents = Events<RouteEvent>;

impl RouteEvents {
    /// Every next-hop object, then every IPv4 and IPv6 route of every
    /// table, as events that rebuild them from nothing. A kernel without
    /// next-hop objects has none.
    pub async fn dump(&self) -> Result<Vec<RouteEvent>> {
        let mut events = match self.request(Message::GetNextHops).await {
            Ok(events) => events,
            Err(NetlinkError::Request(rtnetlink::Error::NetlinkError(e)))
                if e.raw_code() == -(nix::errno::Errno::EOPNOTSUPP as i32)
                    || e.raw_code() == -(nix::errno::Errno::EINVAL as i32) =>
            {
                Vec::new()
            }
            Err(e) => return Err(e),
        };
        for family in [AddressFamily::Inet, AddressFamily::Inet6] {
            let mut message = RouteMessage::default();
            message.header = RouteHeader {
                address_family: family,
                ..RouteHeader::default()
            };
            let get = Message::Route(RouteNetlinkMessage::GetRoute(message));
            events.extend(self.request(get).await?);
        }
        Ok(events)
    }

    async fn request(&self, message: Message) -> Result<Vec<RouteEvent>> {
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | NLM_F_DUMP;
        let mut request = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(message));
        request.finalize();
        let mut answers = self
            .handle
            .request(request, rtnetlink::sys::SocketAddr::new(0, 0))
            .map_err(|_| NetlinkError::Request(rtnetlink::Error::RequestFailed))?;
        let mut events = Vec::new();
        while let Some(answer) = answers.next().await {
            if let NetlinkPayload::Error(e) = answer.payload {
                return Err(NetlinkError::Request(rtnetlink::Error::NetlinkError(e)));
            }
            events.extend(RouteEvent::decode(answer));
        }
        Ok(events)
    }
}

#[cfg(test)]
mod tests;
