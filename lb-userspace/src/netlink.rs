//! Interface, address and neighbour-table lookups over rtnetlink, and the
//! kernel's address events.
//!
//! [`StatsSocket`]: a blocking socket for the qdisc and link counters that
//! pollers read many times a second.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV6, UdpSocket};

use futures_channel::mpsc::UnboundedReceiver;
use futures_util::{StreamExt, TryStreamExt};
use netlink_packet_route::{
    RouteNetlinkMessage,
    address::{AddressAttribute, AddressMessage},
    link::{LinkAttribute, LinkFlags},
    neighbour::{NeighbourAddress, NeighbourAttribute, NeighbourState},
};
use rtnetlink::packet_core::{NetlinkMessage, NetlinkPayload};
use rtnetlink::{Handle, MulticastGroup};

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

/// A change to the box's addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddressEvent {
    Added(Address),
    Removed(Address),
    /// The kernel dropped events (the socket's buffer overflowed): the
    /// addresses must be read again.
    Lost,
}

/// The kernel's IPv4 and IPv6 address events, as they happen.
pub struct AddressEvents {
    messages: UnboundedReceiver<(
        NetlinkMessage<RouteNetlinkMessage>,
        rtnetlink::sys::SocketAddr,
    )>,
}

impl AddressEvents {
    /// Joins the address multicast groups on a socket of its own, served
    /// by a task on the current runtime. Subscribe before reading the
    /// addresses, so nothing changes unseen in between.
    pub fn subscribe() -> Result<Self> {
        let (connection, _, messages) = rtnetlink::new_multicast_connection(&[
            MulticastGroup::Ipv4Ifaddr,
            MulticastGroup::Ipv6Ifaddr,
        ])
        .map_err(NetlinkError::Connect)?;
        tokio::spawn(connection);
        Ok(Self { messages })
    }

    /// The next event; `None` once the socket has failed for good.
    pub async fn next(&mut self) -> Option<AddressEvent> {
        loop {
            let (message, _) = self.messages.next().await?;
            if let Some(event) = event(message) {
                return Some(event);
            }
        }
    }

    /// The next event if one has arrived already.
    pub fn ready(&mut self) -> Option<AddressEvent> {
        loop {
            let (message, _) = self.messages.try_recv().ok()?;
            if let Some(event) = event(message) {
                return Some(event);
            }
        }
    }
}

fn event(message: NetlinkMessage<RouteNetlinkMessage>) -> Option<AddressEvent> {
    match message.payload {
        NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewAddress(m)) => {
            Address::of(&m).map(AddressEvent::Added)
        }
        NetlinkPayload::InnerMessage(RouteNetlinkMessage::DelAddress(m)) => {
            Address::of(&m).map(AddressEvent::Removed)
        }
        NetlinkPayload::Overrun(_) => Some(AddressEvent::Lost),
        _ => None,
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
        let mac = message
            .attributes
            .iter()
            .find_map(|a| match a {
                LinkAttribute::Address(bytes) => <[u8; 6]>::try_from(bytes.as_slice()).ok(),
                _ => None,
            })
            .ok_or_else(|| NetlinkError::NotEthernet(name.to_owned()))?;
        let flags = message.header.flags;
        Ok(Link {
            ifindex: message.header.index,
            mac,
            up: flags.contains(LinkFlags::Up) && flags.contains(LinkFlags::LowerUp),
        })
    }

    /// Every IPv4 and IPv6 address on every interface.
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
        let mut table = HashMap::new();
        let mut entries = self.handle.neighbours().get().execute();
        while let Some(entry) = entries.try_next().await? {
            if matches!(
                entry.header.state,
                NeighbourState::Incomplete | NeighbourState::Failed | NeighbourState::None
            ) {
                continue;
            }
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
            if let (Some(dest), Some(lladdr)) = (dest, lladdr) {
                table.insert((entry.header.ifindex, dest), lladdr);
            }
        }
        Ok(table)
    }
}

/// Makes the kernel resolve `ip` by sending it one empty datagram to the
/// discard port: the kernel queues it behind an ARP request or neighbour
/// solicitation, which is all we want. With `interface`, the datagram is
/// bound to it; without, the kernel's routing picks (a VLAN next hop is
/// resolved on its VLAN interface, which fabriclb does not know).
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

// Queue and link counters, read synchronously.
//
// The pollers (the `linux` telemetry source, the testbed's queue watch) read
// every qdisc and every link of their namespace each few milliseconds, so
// this socket is blocking (no runtime behind it), takes one dump per table,
// and decodes only the attributes it reads: the header through
// netlink-packet-route's types, then a walk over the attributes for the
// few below (the kernel's UAPI numbers; netlink-packet-route keeps its own
// private). A full decode of every link message would cost most of the
// poll, and one attribute a newer kernel adds, or one the crate decodes
// wrongly, on any interface would fail the whole dump and blind every path.

/// `TCA_KIND`, `TCA_STATS2` (`linux/rtnetlink.h`) and, nested in the
/// latter, `TCA_STATS_QUEUE` (`linux/gen_stats.h`).
const TCA_KIND: u16 = 1;
const TCA_STATS2: u16 = 7;
const TCA_STATS_QUEUE: u16 = 3;
/// `IFLA_IFNAME` and `IFLA_STATS64` (`linux/if_link.h`).
const IFLA_IFNAME: u16 = 3;
const IFLA_STATS64: u16 = 23;

/// How long one answer of a dump may take before the dump counts as
/// failed; the socket is then best dropped (a late answer would belong to
/// the old request).
pub const STATS_REPLY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// A dump the kernel marks inconsistent (`NLM_F_DUMP_INTR`: the table
/// changed while it was dumped, so an entry may be missing) is taken again,
/// this many times in all, and the last one used as it is.
const DUMP_TRIES: usize = 3;

/// One qdisc as the kernel's dump lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Qdisc {
    pub ifindex: u32,
    pub handle: netlink_packet_route::tc::TcHandle,
    /// [`TcHandle::ROOT`](netlink_packet_route::tc::TcHandle::ROOT) for
    /// an interface's root (egress) qdisc; ingress and clsact have their
    /// own; a child of a classful qdisc has its class.
    pub parent: netlink_packet_route::tc::TcHandle,
    /// `tbf`, `mq`, `fq_codel`, `noqueue`...
    pub kind: String,
    /// Bytes queued now (`TCA_STATS_QUEUE` backlog). A classful or
    /// multiqueue qdisc's own count covers its children: `mq` sums its
    /// per-queue children when dumped, `tbf` and `htb` count what their
    /// children hold (seen with `tc -s qdisc` on 6.18).
    pub backlog_bytes: u64,
    /// Packets queued now.
    pub qlen: u64,
    /// Packets dropped since the qdisc was created.
    pub drops: u64,
}

impl Qdisc {
    /// The interface's root egress qdisc, whose backlog is everything the
    /// interface holds in software.
    pub fn is_root(&self) -> bool {
        self.parent == netlink_packet_route::tc::TcHandle::ROOT
    }
}

/// One link's name and transmit counter, as the kernel's dump lists them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkCounters {
    pub ifindex: u32,
    pub name: String,
    /// The driver's bytes transmitted (`IFLA_STATS64`), `None` when the
    /// kernel gave no 64-bit stats.
    pub tx_bytes: Option<u64>,
}

/// A blocking rtnetlink socket for dumps of qdiscs and links, in the
/// network namespace of the thread that opened it.
pub struct StatsSocket {
    socket: rtnetlink::sys::Socket,
    seq: u32,
    buf: Vec<u8>,
}

impl StatsSocket {
    pub fn open() -> Result<Self> {
        use rtnetlink::sys::{Socket, protocols::NETLINK_ROUTE};
        let mut socket = Socket::new(NETLINK_ROUTE).map_err(NetlinkError::Connect)?;
        socket.bind_auto().map_err(NetlinkError::Connect)?;
        let timeout = nix::sys::time::TimeVal::new(
            STATS_REPLY_TIMEOUT.as_secs() as _,
            STATS_REPLY_TIMEOUT.subsec_micros() as _,
        );
        nix::sys::socket::setsockopt(&socket, nix::sys::socket::sockopt::ReceiveTimeout, &timeout)
            .map_err(|e| NetlinkError::Connect(e.into()))?;
        Ok(Self {
            socket,
            seq: 0,
            buf: Vec::with_capacity(64 * 1024),
        })
    }

    /// Every qdisc of every interface: one dump.
    pub fn qdiscs(&mut self) -> Result<Vec<Qdisc>> {
        let request = RouteNetlinkMessage::GetQueueDiscipline(Default::default());
        self.dump(request, parse_qdisc)
    }

    /// Every link's name and transmit counter: one dump.
    pub fn links(&mut self) -> Result<Vec<LinkCounters>> {
        let request = RouteNetlinkMessage::GetLink(Default::default());
        self.dump(request, parse_link)
    }

    /// The index of interface `name` now.
    pub fn ifindex(&mut self, name: &str) -> Result<u32> {
        self.links()?
            .into_iter()
            .find(|link| link.name == name)
            .map(|link| link.ifindex)
            .ok_or_else(|| NetlinkError::NoSuchInterface(name.to_owned()))
    }

    /// Sends `request` as a dump and decodes each answer's payload with
    /// `parse` (`None`: not one of ours).
    fn dump<T>(
        &mut self,
        request: RouteNetlinkMessage,
        parse: fn(&[u8]) -> Result<Option<T>>,
    ) -> Result<Vec<T>> {
        use rtnetlink::packet_core::{NLM_F_DUMP, NLM_F_REQUEST};
        let mut message = NetlinkMessage::from(request);
        message.header.flags = NLM_F_REQUEST | NLM_F_DUMP;
        let mut entries = Vec::new();
        for _ in 0..DUMP_TRIES {
            self.seq = self.seq.wrapping_add(1);
            message.header.sequence_number = self.seq;
            message.finalize();
            let mut bytes = vec![0; message.buffer_len()];
            message.serialize(&mut bytes);
            self.socket.send(&bytes, 0).map_err(NetlinkError::Dump)?;
            entries.clear();
            if self.answers(&mut entries, parse)? {
                break;
            }
        }
        Ok(entries)
    }

    /// Reads the answers to dump `self.seq` into `entries` until the
    /// kernel's `NLMSG_DONE`; whether the dump was consistent.
    fn answers<T>(
        &mut self,
        entries: &mut Vec<T>,
        parse: fn(&[u8]) -> Result<Option<T>>,
    ) -> Result<bool> {
        use rtnetlink::packet_core::{
            NLM_F_DUMP_INTR, NLMSG_ALIGNTO, NLMSG_DONE, NLMSG_ERROR, NLMSG_OVERRUN, NetlinkBuffer,
        };
        let mut consistent = true;
        loop {
            // A link dump's datagram can outgrow any fixed buffer (the
            // kernel sizes it to its largest link message): peek at the
            // length first.
            let mut nothing: &mut [u8] = &mut [];
            let len = self
                .socket
                .recv(&mut nothing, libc::MSG_PEEK | libc::MSG_TRUNC)
                .map_err(NetlinkError::Dump)?;
            self.buf.clear();
            self.buf.reserve(len);
            self.socket
                .recv(&mut self.buf, 0)
                .map_err(NetlinkError::Dump)?;
            let mut offset = 0;
            while offset < self.buf.len() {
                let message = NetlinkBuffer::new_checked(&self.buf[offset..])
                    .map_err(|e| NetlinkError::Malformed(e.to_string()))?;
                let length = message.length() as usize;
                offset += length.next_multiple_of(NLMSG_ALIGNTO.into());
                // An answer to an earlier request that timed out.
                if message.sequence_number() != self.seq {
                    continue;
                }
                let payload = message.payload();
                match message.message_type() {
                    NLMSG_DONE | NLMSG_ERROR => {
                        let code = payload
                            .get(..4)
                            .map_or(0, |c| i32::from_ne_bytes(c.try_into().expect("4 bytes")));
                        if code < 0 {
                            return Err(NetlinkError::Dump(std::io::Error::from_raw_os_error(
                                -code,
                            )));
                        }
                        if message.message_type() == NLMSG_DONE {
                            return Ok(consistent);
                        }
                    }
                    NLMSG_OVERRUN => {
                        return Err(NetlinkError::Malformed("overrun".into()));
                    }
                    _ => {
                        if message.flags() & NLM_F_DUMP_INTR != 0 {
                            consistent = false;
                        }
                        entries.extend(parse(payload)?);
                    }
                }
            }
        }
    }
}

/// An RTM_NEWQDISC payload: its header, kind and queue stats.
fn parse_qdisc(payload: &[u8]) -> Result<Option<Qdisc>> {
    use netlink_packet_route::tc::{TcHeader, TcMessageBuffer, TcStatsQueue};
    let header = TcHeader::parse(payload).map_err(|e| NetlinkError::Malformed(e.to_string()))?;
    let Ok(ifindex) = u32::try_from(header.index) else {
        return Ok(None);
    };
    let mut qdisc = Qdisc {
        ifindex,
        handle: header.handle,
        parent: header.parent,
        kind: String::new(),
        backlog_bytes: 0,
        qlen: 0,
        drops: 0,
    };
    for nla in attributes(&payload[std::mem::size_of::<TcMessageBuffer>()..]) {
        let nla = nla?;
        match nla.kind() {
            TCA_KIND => qdisc.kind = c_string(nla.value()),
            TCA_STATS2 => {
                for stat in attributes(nla.value()) {
                    let stat = stat?;
                    if stat.kind() == TCA_STATS_QUEUE {
                        let queue = TcStatsQueue::parse(stat.value())
                            .map_err(|e| NetlinkError::Malformed(e.to_string()))?;
                        qdisc.backlog_bytes = queue.backlog.into();
                        qdisc.qlen = queue.qlen.into();
                        qdisc.drops = queue.drops.into();
                    }
                }
            }
            _ => {}
        }
    }
    Ok(Some(qdisc))
}

/// An RTM_NEWLINK payload: its index, name and transmitted bytes.
fn parse_link(payload: &[u8]) -> Result<Option<LinkCounters>> {
    use netlink_packet_route::link::{LinkHeader, LinkMessageBuffer, Stats64};
    let header = LinkHeader::parse(payload).map_err(|e| NetlinkError::Malformed(e.to_string()))?;
    let mut name = None;
    let mut tx_bytes = None;
    for nla in attributes(&payload[std::mem::size_of::<LinkMessageBuffer>()..]) {
        let nla = nla?;
        match nla.kind() {
            IFLA_IFNAME => name = Some(c_string(nla.value())),
            IFLA_STATS64 => {
                let stats = Stats64::parse(nla.value())
                    .map_err(|e| NetlinkError::Malformed(e.to_string()))?;
                tx_bytes = Some(stats.tx_bytes);
            }
            _ => {}
        }
    }
    let name = name
        .ok_or_else(|| NetlinkError::Malformed(format!("link {} without a name", header.index)))?;
    Ok(Some(LinkCounters {
        ifindex: header.index,
        name,
        tx_bytes,
    }))
}

/// The attributes in `bytes`, each checked for its length.
fn attributes(
    bytes: &[u8],
) -> impl Iterator<Item = Result<rtnetlink::packet_core::NlaBuffer<&[u8]>>> {
    rtnetlink::packet_core::NlasIterator::new(bytes)
        .map(|nla| nla.map_err(|e| NetlinkError::Malformed(e.to_string())))
}

/// A NUL-terminated string attribute.
fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}
