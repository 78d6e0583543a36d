//! The kernel's rtnetlink events as they happen, each kind on a socket of
//! its own: the box's addresses, the links and neighbours next hops
//! depend on, and (`super::routes`, on a socket that also reads next-hop
//! objects) the routes. Subscribe before reading the state they change, so
//! nothing changes unseen in between; applied in order after that read,
//! they end where the kernel is.

use std::fmt::Debug;

use futures_channel::mpsc::UnboundedReceiver;
use futures_util::StreamExt;
use netlink_packet_route::RouteNetlinkMessage;
use rtnetlink::MulticastGroup;
use rtnetlink::packet_core::{
    NetlinkDeserializable, NetlinkMessage, NetlinkPayload, NetlinkSerializable,
};
use rtnetlink::proto::{ConnectionHandle, new_connection_with_socket};
use rtnetlink::sys::{AsyncSocket as _, TokioSocket, protocols::NETLINK_ROUTE};

use super::{Address, Link, Neighbour, NeighbourKey, NetlinkError, Result};

/// A kind of event: the messages its socket reads, the multicast groups it
/// comes from and how a message reads as one (`None` for messages of no
/// interest).
pub trait Event: Sized {
    type Message: NetlinkSerializable + NetlinkDeserializable + Debug + Unpin + Send + 'static;
    const GROUPS: &'static [MulticastGroup];
    fn decode(message: NetlinkMessage<Self::Message>) -> Option<Self>;
}

/// A change to the box's addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddressEvent {
    Added(Address),
    Removed(Address),
    /// The kernel dropped events (the socket's buffer overflowed): the
    /// addresses must be read again.
    Lost,
}

impl Event for AddressEvent {
    type Message = RouteNetlinkMessage;
    const GROUPS: &'static [MulticastGroup] =
        &[MulticastGroup::Ipv4Ifaddr, MulticastGroup::Ipv6Ifaddr];

    fn decode(message: NetlinkMessage<RouteNetlinkMessage>) -> Option<Self> {
        match message.payload {
            NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewAddress(m)) => {
                Address::of(&m).map(Self::Added)
            }
            NetlinkPayload::InnerMessage(RouteNetlinkMessage::DelAddress(m)) => {
                Address::of(&m).map(Self::Removed)
            }
            NetlinkPayload::Overrun(_) => Some(Self::Lost),
            _ => None,
        }
    }
}

/// A change to an interface or a neighbour entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkEvent {
    /// Interface `name` as it is now (RTM_NEWLINK: created, up, down,
    /// carrier, new MAC); `link` is `None` when it has no Ethernet address.
    Link {
        name: String,
        ifindex: u32,
        link: Option<Link>,
    },
    /// Interface `name` was deleted (RTM_DELLINK).
    Deleted { name: String, ifindex: u32 },
    /// A neighbour entry as it is now: `None` when it has no MAC to use
    /// (incomplete, failed) or was deleted (RTM_DELNEIGH).
    Neighbour {
        key: NeighbourKey,
        entry: Option<Neighbour>,
    },
    /// The kernel dropped events: links and neighbours must be read again.
    Lost,
}

impl Event for LinkEvent {
    type Message = RouteNetlinkMessage;
    const GROUPS: &'static [MulticastGroup] = &[MulticastGroup::Link, MulticastGroup::Neigh];

    fn decode(message: NetlinkMessage<RouteNetlinkMessage>) -> Option<Self> {
        let NetlinkPayload::InnerMessage(message) = message.payload else {
            return matches!(message.payload, NetlinkPayload::Overrun(_)).then_some(Self::Lost);
        };
        match message {
            RouteNetlinkMessage::NewLink(m) => Some(Self::Link {
                name: Link::name(&m)?,
                ifindex: m.header.index,
                link: Link::of(&m),
            }),
            RouteNetlinkMessage::DelLink(m) => Some(Self::Deleted {
                name: Link::name(&m)?,
                ifindex: m.header.index,
            }),
            RouteNetlinkMessage::NewNeighbour(m) => {
                let (key, entry) = Neighbour::of(&m)?;
                Some(Self::Neighbour { key, entry })
            }
            RouteNetlinkMessage::DelNeighbour(m) => {
                let (key, _) = Neighbour::of(&m)?;
                Some(Self::Neighbour { key, entry: None })
            }
            _ => None,
        }
    }
}

/// Events of kind `E`, on a socket served by a task on the current runtime.
pub struct Events<E: Event> {
    messages: UnboundedReceiver<(NetlinkMessage<E::Message>, rtnetlink::sys::SocketAddr)>,
    /// Requests on the same socket: dumps whose answers come in order
    /// with the events.
    pub(super) handle: ConnectionHandle<E::Message>,
}

pub type AddressEvents = Events<AddressEvent>;
pub type LinkEvents = Events<LinkEvent>;

/// What a socket of events asks the kernel to buffer: a burst of route
/// changes (a BGP session with a full table going down) is thousands of
/// messages, which the default buffer overflows.
const RECEIVE_BUFFER: usize = 4 << 20;

impl<E: Event> Events<E> {
    /// Joins `E`'s multicast groups on a socket of its own.
    pub fn subscribe() -> Result<Self> {
        let (mut connection, handle, messages) =
            new_connection_with_socket::<E::Message, TokioSocket>(NETLINK_ROUTE)
                .map_err(NetlinkError::Connect)?;
        let socket = connection.socket_mut().socket_mut();
        let (added, bound): (Vec<_>, Vec<_>) =
            E::GROUPS.iter().partition(|g| g.need_via_add_membership());
        let mask = bound.iter().fold(0, |m, &&g| m | 1 << (g as u32 - 1));
        socket
            .bind(&rtnetlink::sys::SocketAddr::new(0, mask))
            .map_err(NetlinkError::Connect)?;
        for group in added {
            socket
                .add_membership(*group as u32)
                .map_err(NetlinkError::Connect)?;
        }
        // Not fatal: the kernel's cap (rmem_max) may be lower; an overrun
        // is then read as lost events.
        let _ = socket.set_rx_buf_sz(RECEIVE_BUFFER);
        tokio::spawn(connection);
        Ok(Self { messages, handle })
    }

    /// Waits for an event and takes every other that has arrived with it;
    /// `None` once the socket has failed for good.
    pub async fn batch(&mut self) -> Option<Vec<E>> {
        let first = loop {
            let (message, _) = self.messages.next().await?;
            if let Some(event) = E::decode(message) {
                break event;
            }
        };
        let mut batch = vec![first];
        while let Ok((message, _)) = self.messages.try_recv() {
            batch.extend(E::decode(message));
        }
        Some(batch)
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
    use netlink_packet_route::neighbour::{
        NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
    };

    use super::*;

    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 7];

    fn link(flags: LinkFlags) -> LinkMessage {
        let mut m = LinkMessage::default();
        m.header.index = 12;
        m.header.flags = flags;
        m.attributes.push(LinkAttribute::IfName("s2".into()));
        m.attributes.push(LinkAttribute::Address(MAC.to_vec()));
        m
    }

    fn neighbour(state: NeighbourState) -> NeighbourMessage {
        let mut m = NeighbourMessage::default();
        m.header.ifindex = 12;
        m.header.state = state;
        m.attributes
            .push(NeighbourAttribute::Destination(NeighbourAddress::Inet(
                Ipv4Addr::new(198, 18, 2, 2),
            )));
        m.attributes
            .push(NeighbourAttribute::LinkLayerAddress(MAC.to_vec()));
        m
    }

    fn decode(message: RouteNetlinkMessage) -> Option<LinkEvent> {
        LinkEvent::decode(NetlinkMessage::from(message))
    }

    const KEY: NeighbourKey = (12, IpAddr::V4(Ipv4Addr::new(198, 18, 2, 2)));

    #[test]
    fn a_link_is_up_only_with_its_carrier() {
        let event = |flags| decode(RouteNetlinkMessage::NewLink(link(flags)));
        let up = |up| {
            Some(LinkEvent::Link {
                name: "s2".into(),
                ifindex: 12,
                link: Some(Link {
                    ifindex: 12,
                    mac: MAC,
                    up,
                }),
            })
        };
        assert_eq!(event(LinkFlags::Up | LinkFlags::LowerUp), up(true));
        assert_eq!(event(LinkFlags::Up), up(false), "carrier lost");
        assert_eq!(event(LinkFlags::LowerUp), up(false), "set down");
        assert_eq!(
            decode(RouteNetlinkMessage::DelLink(link(LinkFlags::Up))),
            Some(LinkEvent::Deleted {
                name: "s2".into(),
                ifindex: 12
            })
        );
    }

    #[test]
    fn a_neighbour_is_usable_only_with_a_mac_and_a_usable_state() {
        let event = |state| decode(RouteNetlinkMessage::NewNeighbour(neighbour(state)));
        let entry = |entry| Some(LinkEvent::Neighbour { key: KEY, entry });
        let usable = entry(Some(Neighbour {
            mac: MAC,
            confirmed: None,
        }));
        for state in [
            NeighbourState::Reachable,
            NeighbourState::Stale,
            NeighbourState::Delay,
            NeighbourState::Probe,
            NeighbourState::Permanent,
        ] {
            assert_eq!(event(state), usable, "{state:?}");
        }
        for state in [NeighbourState::Failed, NeighbourState::Incomplete] {
            assert_eq!(event(state), entry(None), "{state:?}");
        }
        let deleted = RouteNetlinkMessage::DelNeighbour(neighbour(NeighbourState::Reachable));
        assert_eq!(decode(deleted), entry(None));
    }

    #[test]
    fn an_overrun_is_lost_events() {
        let mut message = NetlinkMessage::from(RouteNetlinkMessage::NewLink(link(LinkFlags::Up)));
        message.payload = NetlinkPayload::Overrun(Vec::new());
        assert_eq!(LinkEvent::decode(message.clone()), Some(LinkEvent::Lost));
        assert_eq!(AddressEvent::decode(message), Some(AddressEvent::Lost));
    }
}
