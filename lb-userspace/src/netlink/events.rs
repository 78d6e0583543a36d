//! The kernel's rtnetlink events as they happen, each kind on a socket of
//! its own: the box's addresses, the links and neighbours next hops
//! depend on, and (`super::routes`, on a socket that also reads next-hop
//! objects) the routes. Subscribe before reading the state they change, so
//! nothing changes unseen in between; applied in order after that read,
//! they end where the kernel is.

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures_channel::mpsc::UnboundedReceiver;
use futures_util::StreamExt;
use netlink_packet_route::RouteNetlinkMessage;
use nix::sys::socket::{getsockopt, setsockopt, sockopt};
use rtnetlink::MulticastGroup;
use rtnetlink::packet_core::{
    NetlinkDeserializable, NetlinkMessage, NetlinkPayload, NetlinkSerializable,
};
use rtnetlink::proto::{ConnectionHandle, new_connection_with_socket};
use rtnetlink::sys::{AsyncSocket as _, TokioSocket, protocols::NETLINK_ROUTE};
use tokio::sync::mpsc::{self, error::TrySendError};
use tracing::warn;

use super::{Address, Link, Neighbour, NeighbourKey, NetlinkError, Result};

/// A kind of event: the messages its socket reads, the multicast groups it
/// comes from, how a message reads as one (`None` for messages of no
/// interest) and the event that says some were lost.
pub trait Event: Sized + Send + 'static {
    type Message: NetlinkSerializable + NetlinkDeserializable + Debug + Unpin + Send + 'static;
    const GROUPS: &'static [MulticastGroup];
    /// What the events are of, for the log.
    const KIND: &'static str;
    fn decode(message: NetlinkMessage<Self::Message>) -> Option<Self>;
    /// Events were dropped: what they changed must be read again.
    fn lost() -> Self;
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
    const KIND: &'static str = "address";

    fn lost() -> Self {
        Self::Lost
    }

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

impl LinkEvent {
    /// The port this event takes down (administratively, by its carrier,
    /// or deleted): where the kernel deletes the next-hop objects that
    /// leave by it.
    pub fn port_down(&self) -> Option<u32> {
        match self {
            Self::Link {
                ifindex,
                link: Some(link),
                ..
            } if !link.up => Some(*ifindex),
            Self::Deleted { ifindex, .. } => Some(*ifindex),
            _ => None,
        }
    }
}

impl Event for LinkEvent {
    type Message = RouteNetlinkMessage;
    const GROUPS: &'static [MulticastGroup] = &[MulticastGroup::Link, MulticastGroup::Neigh];
    const KIND: &'static str = "link and neighbour";

    fn lost() -> Self {
        Self::Lost
    }

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
    queue: Queue<E>,
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

/// Events decoded and waiting for the loop, at most. A storm beyond it (a
/// full table withdrawn while the loop is busy) is dropped and read as
/// lost events, which read the state again: it costs one dump, not the
/// daemon's memory.
const QUEUE_DEPTH: usize = 4096;

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
        size_receive_buffer::<E>(socket);
        tokio::spawn(connection);
        Ok(Self {
            queue: Queue::spawn(messages, QUEUE_DEPTH),
            handle,
        })
    }

    /// Waits for an event and takes every other that has arrived with it,
    /// ending with a lost event if any were dropped; `None` once the
    /// socket has failed for good.
    pub async fn batch(&mut self) -> Option<Vec<E>> {
        self.queue.batch().await
    }
}

/// Asks for [`RECEIVE_BUFFER`], past `net.core.rmem_max` where the daemon
/// may (CAP_NET_ADMIN), and says the size the kernel granted when it is
/// less: a burst beyond it overruns the socket, and is read as lost
/// events.
fn size_receive_buffer<E: Event>(socket: &rtnetlink::sys::Socket) {
    if setsockopt(socket, sockopt::RcvBufForce, &RECEIVE_BUFFER).is_err() {
        let _ = setsockopt(socket, sockopt::RcvBuf, &RECEIVE_BUFFER);
    }
    // The kernel reports twice what it grants: the other half is its
    // bookkeeping.
    match getsockopt(socket, sockopt::RcvBuf) {
        Ok(doubled) if doubled / 2 < RECEIVE_BUFFER => warn!(
            events = E::KIND,
            granted = doubled / 2,
            asked = RECEIVE_BUFFER,
            "netlink receive buffer capped by net.core.rmem_max; a burst beyond it \
             is read as lost events and the state read again"
        ),
        Ok(_) => {}
        Err(e) => warn!(events = E::KIND, "netlink receive buffer size unknown: {e}"),
    }
}

/// The decoded events between the socket's task and the loop, bounded.
struct Queue<E> {
    events: mpsc::Receiver<E>,
    /// Set when an event was dropped for want of room.
    overrun: Arc<AtomicBool>,
}

type Messages<M> = UnboundedReceiver<(NetlinkMessage<M>, rtnetlink::sys::SocketAddr)>;

impl<E: Event> Queue<E> {
    /// Decodes `messages` on a task of their own into a queue of `depth`.
    fn spawn(messages: Messages<E::Message>, depth: usize) -> Self {
        let (queue, events) = mpsc::channel(depth);
        let overrun = Arc::new(AtomicBool::new(false));
        tokio::spawn(forward(messages, queue, Arc::clone(&overrun)));
        Self { events, overrun }
    }

    async fn batch(&mut self) -> Option<Vec<E>> {
        let mut batch = vec![self.events.recv().await?];
        while let Ok(event) = self.events.try_recv() {
            batch.push(event);
        }
        // Only a full queue drops, so a drop is always followed by a
        // batch that reports it.
        if self.overrun.swap(false, Ordering::Relaxed) {
            batch.push(E::lost());
        }
        Some(batch)
    }
}

/// Moves what the connection reads into `queue` as it comes, so that the
/// connection's own unbounded channel stays empty; a full queue drops the
/// event and marks `overrun`. Ends when either side is gone.
async fn forward<E: Event>(
    mut messages: Messages<E::Message>,
    queue: mpsc::Sender<E>,
    overrun: Arc<AtomicBool>,
) {
    while let Some((message, _)) = messages.next().await {
        let Some(event) = E::decode(message) else {
            continue;
        };
        match queue.try_send(event) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => overrun.store(true, Ordering::Relaxed),
            Err(TrySendError::Closed(_)) => return,
        }
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
        let usable = |kernel_confirms, stale| {
            entry(Some(Neighbour {
                mac: MAC,
                kernel_confirms,
                stale,
            }))
        };
        // Delay and probe: the kernel is checking it already.
        for state in [
            NeighbourState::Reachable,
            NeighbourState::Delay,
            NeighbourState::Probe,
        ] {
            assert_eq!(event(state), usable(true, false), "{state:?}");
        }
        // Unconfirmed, and checked only when next used.
        assert_eq!(event(NeighbourState::Stale), usable(true, true));
        // Set by an administrator: the kernel never confirms it, so it is
        // never probed.
        for state in [NeighbourState::Permanent, NeighbourState::Noarp] {
            assert_eq!(event(state), usable(false, false), "{state:?}");
        }
        for state in [NeighbourState::Failed, NeighbourState::Incomplete] {
            assert_eq!(event(state), entry(None), "{state:?}");
        }
        let deleted = RouteNetlinkMessage::DelNeighbour(neighbour(NeighbourState::Reachable));
        assert_eq!(decode(deleted), entry(None));
    }

    /// A storm while the loop is busy: the queue keeps its depth, the rest
    /// is dropped, and the batch that drains it ends with a lost event.
    #[tokio::test(flavor = "current_thread")]
    async fn a_storm_past_the_queue_is_dropped_and_read_as_lost_events() {
        let (sender, messages) = futures_channel::mpsc::unbounded();
        let from = rtnetlink::sys::SocketAddr::new(0, 0);
        for _ in 0..100 {
            let message = NetlinkMessage::from(RouteNetlinkMessage::NewLink(link(LinkFlags::Up)));
            sender.unbounded_send((message, from)).expect("send");
        }
        drop(sender);
        let (queue, events) = mpsc::channel(8);
        let overrun = Arc::new(AtomicBool::new(false));
        forward::<LinkEvent>(messages, queue, Arc::clone(&overrun)).await;
        let mut queue = Queue { events, overrun };
        let batch = queue.batch().await.expect("a batch");
        assert_eq!(batch.len(), 9);
        assert!(
            batch[..8]
                .iter()
                .all(|e| matches!(e, LinkEvent::Link { .. }))
        );
        assert_eq!(batch[8], LinkEvent::Lost);
        assert_eq!(queue.batch().await, None, "the stream ended");
    }

    #[test]
    fn an_overrun_is_lost_events() {
        let mut message = NetlinkMessage::from(RouteNetlinkMessage::NewLink(link(LinkFlags::Up)));
        message.payload = NetlinkPayload::Overrun(Vec::new());
        assert_eq!(LinkEvent::decode(message.clone()), Some(LinkEvent::Lost));
        assert_eq!(AddressEvent::decode(message), Some(AddressEvent::Lost));
    }
}
