//! Interface, address and neighbour-table lookups over rtnetlink.
//!
//! [`events`]: the kernel's address, link and neighbour events as they
//! happen. [`StatsSocket`] (`stats`): a blocking socket for the qdisc and
//! link counters that pollers read many times a second. [`probe`]: one ARP
//! request or neighbour solicitation that keeps a neighbour entry fresh.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV6, UdpSocket};

use futures_util::TryStreamExt;
use netlink_packet_route::{
    address::{AddressAttribute, AddressMessage},
    link::{LinkAttribute, LinkFlags, LinkLayerType, LinkMessage},
    neighbour::{NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState},
};
use rtnetlink::Handle;

mod events;
pub mod probe;
mod routes;
mod stats;
mod unicast;

pub use unicast::{mac_of, own_macs};

pub use events::{AddressEvent, AddressEvents, Event, Events, LinkEvent, LinkEvents};
pub use routes::{Gateway, KernelRoute, NextHopObject, RouteEvent, RouteEvents, RouteKey, Via};
pub use stats::{LinkCounters, Qdisc, STATS_REPLY_TIMEOUT, StatsSocket};

#[derive(Debug, thiserror::Error)]
pub enum NetlinkError {
    #[error("opening a netlink socket: {0}")]
    Connect(#[source] std::io::Error),
    #[error("interface {0} not found")]
    NoSuchInterface(String),
    #[error("interface {0} has no Ethernet address")]
    NotEthernet(String),
    #[error("netlink: {0}")]
    Request(#[from] rtnetlink::Error),
    /// A dump on a [`StatsSocket`] failed: the kernel refused it, or no
    /// answer came within [`STATS_REPLY_TIMEOUT`].
    #[error("netlink dump: {0}")]
    Dump(#[source] std::io::Error),
    /// The kernel's answer to a dump could not be decoded.
    #[error("netlink dump: malformed answer: {0}")]
    Malformed(String),
}

type Result<T> = std::result::Result<T, NetlinkError>;

/// What the data plane needs to know about an egress interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link {
    pub ifindex: u32,
    pub mac: [u8; 6],
    /// Administratively up with carrier.
    pub up: bool,
}

impl Link {
    /// The interface an RTM_NEWLINK message describes; `None` when it has
    /// no Ethernet address.
    fn of(message: &LinkMessage) -> Option<Self> {
        let mac = message.attributes.iter().find_map(|a| match a {
            LinkAttribute::Address(bytes) => <[u8; 6]>::try_from(bytes.as_slice()).ok(),
            _ => None,
        })?;
        let flags = message.header.flags;
        Some(Self {
            ifindex: message.header.index,
            mac,
            up: flags.contains(LinkFlags::Up) && flags.contains(LinkFlags::LowerUp),
        })
    }

    /// The interface name in a link message.
    fn name(message: &LinkMessage) -> Option<String> {
        message.attributes.iter().find_map(|a| match a {
            LinkAttribute::IfName(name) => Some(name.clone()),
            _ => None,
        })
    }
}

/// One address of the box, as the kernel lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Address {
    pub ifindex: u32,
    pub addr: IpAddr,
    pub prefix_len: u8,
    /// IPv4: the broadcast address it was given (IFA_BROADCAST), if any.
    pub broadcast: Option<Ipv4Addr>,
}

impl Address {
    /// The address an RTM_NEWADDR or RTM_DELADDR message is about; `None`
    /// for families other than IPv4 and IPv6.
    fn of(message: &AddressMessage) -> Option<Self> {
        let mut local = None;
        let mut address = None;
        let mut broadcast = None;
        for attribute in &message.attributes {
            match attribute {
                AddressAttribute::Local(a) => local = Some(*a),
                AddressAttribute::Address(a) => address = Some(*a),
                AddressAttribute::Broadcast(b) => broadcast = Some(*b),
                _ => {}
            }
        }
        // On a point-to-point link IFA_ADDRESS is the peer's and IFA_LOCAL
        // ours; elsewhere IPv6 gives only IFA_ADDRESS.
        Some(Self {
            ifindex: message.header.index,
            addr: local.or(address)?,
            prefix_len: message.header.prefix_len,
            broadcast,
        })
    }
}

#[derive(Clone)]
pub struct Netlink {
    handle: Handle,
}

impl Netlink {
    /// Opens an rtnetlink socket served by a task on the current runtime.
    pub fn connect() -> Result<Self> {
        let (connection, handle, _) = rtnetlink::new_connection().map_err(NetlinkError::Connect)?;
        tokio::spawn(connection);
        Ok(Self { handle })
    }

    pub async fn link(&self, name: &str) -> Result<Link> {
        let mut links = self
            .handle
            .link()
            .get()
            .match_name(name.to_owned())
            .execute();
        let message = match links.try_next().await {
            Ok(Some(message)) => message,
            Ok(None) => return Err(NetlinkError::NoSuchInterface(name.to_owned())),
            // The kernel answers a dump for an unknown name with ENODEV.
            Err(rtnetlink::Error::NetlinkError(e))
                if e.raw_code() == -(nix::errno::Errno::ENODEV as i32) =>
            {
                return Err(NetlinkError::NoSuchInterface(name.to_owned()));
            }
            Err(e) => return Err(e.into()),
        };
        Link::of(&message).ok_or_else(|| NetlinkError::NotEthernet(name.to_owned()))
    }

    /// Every IPv4 and IPv6 address on every interface.
    /// The box's Ethernet ports by ifindex: what a learned route's next
    /// hops may leave through.
    pub async fn ports(&self) -> Result<HashMap<u32, String>> {
        let mut links = self.handle.link().get().execute();
        let mut ports = HashMap::new();
        while let Some(message) = links.try_next().await? {
            if message.header.link_layer_type == LinkLayerType::Ether
                && let Some(name) = Link::name(&message)
            {
                ports.insert(message.header.index, name);
            }
        }
        Ok(ports)
    }

    pub async fn addresses(&self) -> Result<Vec<Address>> {
        let mut addresses = Vec::new();
        let mut messages = self.handle.address().get().execute();
        while let Some(message) = messages.try_next().await? {
            addresses.extend(Address::of(&message));
        }
        Ok(addresses)
    }

    /// The usable entries of the neighbour table (neither incomplete nor
    /// failed): (ifindex, IP) -> MAC.
    pub async fn neighbours(&self) -> Result<HashMap<(u32, IpAddr), [u8; 6]>> {
        let entries = self.neighbour_entries().await?;
        Ok(entries.into_iter().map(|(key, n)| (key, n.mac)).collect())
    }

    /// The usable entries of the neighbour table (neither incomplete nor
    /// failed).
    pub async fn neighbour_entries(&self) -> Result<HashMap<(u32, IpAddr), Neighbour>> {
        let mut table = HashMap::new();
        let mut entries = self.handle.neighbours().get().execute();
        while let Some(entry) = entries.try_next().await? {
            if let Some((key, Some(neighbour))) = Neighbour::of(&entry) {
                table.insert(key, neighbour);
            }
        }
        Ok(table)
    }
}

/// A usable neighbour entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Neighbour {
    pub mac: [u8; 6],
    /// Whether the kernel confirms that the neighbour answers at `mac`:
    /// it never asks again about an entry an administrator set
    /// (permanent, no-ARP), so probing one would be noise.
    pub kernel_confirms: bool,
    /// Not confirmed lately (STALE): the kernel checks such an entry only
    /// when it next sends through it, which XDP's traffic never does.
    pub stale: bool,
}

/// Where a neighbour entry is: its interface and IP address.
pub type NeighbourKey = (u32, IpAddr);

impl Neighbour {
    /// The entry a neighbour message is about, and what it holds: `None`
    /// while it has no MAC to use (incomplete, failed) or none at all.
    /// `None` overall for a message with no IP address (a bridge's
    /// forwarding entry).
    fn of(entry: &NeighbourMessage) -> Option<(NeighbourKey, Option<Self>)> {
        let state = entry.header.state;
        let mut dest = None;
        let mut lladdr = None;
        for attribute in &entry.attributes {
            match attribute {
                NeighbourAttribute::Destination(NeighbourAddress::Inet(a)) => {
                    dest = Some(IpAddr::V4(*a))
                }
                NeighbourAttribute::Destination(NeighbourAddress::Inet6(a)) => {
                    dest = Some(IpAddr::V6(*a))
                }
                NeighbourAttribute::LinkLayerAddress(bytes) => {
                    lladdr = <[u8; 6]>::try_from(bytes.as_slice()).ok()
                }
                _ => {}
            }
        }
        let key = (entry.header.ifindex, dest?);
        let unusable = matches!(
            state,
            NeighbourState::Incomplete | NeighbourState::Failed | NeighbourState::None
        );
        let kernel_confirms = !matches!(state, NeighbourState::Permanent | NeighbourState::Noarp);
        let neighbour = lladdr.filter(|_| !unusable).map(|mac| Self {
            mac,
            kernel_confirms,
            stale: state == NeighbourState::Stale,
        });
        Some((key, neighbour))
    }
}

/// Makes the kernel resolve `ip`, or check its stale entry, by sending it
/// one empty datagram to the discard port: the kernel queues it behind an
/// ARP request or neighbour solicitation, or sends it through the stale
/// entry and then probes the peer by unicast, which is all we want. With
/// `interface`, the datagram is bound to it; without, the kernel's
/// routing picks (a VLAN next hop is resolved on its VLAN interface,
/// which fabriclb knows only by an entry). `ifindex` is a link-local
/// address's scope.
pub fn solicit(interface: Option<&str>, ifindex: u32, ip: IpAddr) -> std::io::Result<()> {
    let (bind, target): (SocketAddr, SocketAddr) = match ip {
        IpAddr::V4(_) => (
            "0.0.0.0:0".parse().expect("literal"),
            SocketAddr::new(ip, 9),
        ),
        IpAddr::V6(v6) => (
            "[::]:0".parse().expect("literal"),
            // Link-local next hops need the interface as scope.
            SocketAddr::V6(SocketAddrV6::new(v6, 9, 0, ifindex)),
        ),
    };
    let socket = UdpSocket::bind(bind)?;
    if let Some(interface) = interface {
        nix::sys::socket::setsockopt(
            &socket,
            nix::sys::socket::sockopt::BindToDevice,
            &std::ffi::OsString::from(interface),
        )
        .map_err(std::io::Error::from)?;
    }
    socket.send_to(&[], target).map(|_| ())
}

/// The index of interface `name` in this network namespace, if it exists.
pub fn ifindex(name: &str) -> Option<u32> {
    let name = std::ffi::CString::new(name).ok()?;
    // SAFETY: a NUL-terminated string that outlives the call.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    (index != 0).then_some(index)
}
