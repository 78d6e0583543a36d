//! Queue and link counters, read synchronously.
//!
//! The pollers (the `linux` telemetry source, the testbed's queue watch) read
//! every qdisc and every link of their namespace each few milliseconds, so
//! this socket is blocking (no runtime behind it), takes one dump per table,
//! and decodes only the attributes it reads: the header through
//! netlink-packet-route's types, then a walk over the attributes for the
//! few below (the kernel's UAPI numbers; netlink-packet-route keeps its own
//! private). A full decode of every link message would cost most of the
//! poll, and one attribute a newer kernel adds, or one the crate decodes
//! wrongly, on any interface would fail the whole dump and blind every path.

use netlink_packet_route::RouteNetlinkMessage;
use rtnetlink::packet_core::NetlinkMessage;

use super::{NetlinkError, Result};

/// `TCA_KIND`, `TCA_OPTIONS`, `TCA_STATS2` (`linux/rtnetlink.h`) and,
/// nested in the last, `TCA_STATS_BASIC` and `TCA_STATS_QUEUE`
/// (`linux/gen_stats.h`).
const TCA_KIND: u16 = 1;
const TCA_OPTIONS: u16 = 2;
const TCA_STATS2: u16 = 7;
const TCA_STATS_BASIC: u16 = 1;
const TCA_STATS_QUEUE: u16 = 3;
/// A `tbf`'s options (`linux/pkt_sched.h`): `TCA_TBF_PARMS`, a
/// `tc_tbf_qopt` whose first member, a `tc_ratespec`, ends in the rate
/// (bytes per second, 32 bits), and `TCA_TBF_RATE64`, the rate where it
/// does not fit those.
const TCA_TBF_PARMS: u16 = 1;
const TCA_TBF_RATE64: u16 = 4;
const TC_RATESPEC_RATE: std::ops::Range<usize> = 8..12;
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
    /// Bytes it sent since it was created.
    pub sent_bytes: u64,
    /// A `tbf`'s rate, bytes per second; `None` for other kinds.
    pub rate_bytes_per_s: Option<u64>,
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
            let len = restarted(|| {
                self.socket
                    .recv(&mut nothing, libc::MSG_PEEK | libc::MSG_TRUNC)
            })
            .map_err(NetlinkError::Dump)?;
            self.buf.clear();
            self.buf.reserve(len);
            restarted(|| self.socket.recv(&mut self.buf, 0)).map_err(NetlinkError::Dump)?;
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
    use netlink_packet_route::tc::{TcHeader, TcMessageBuffer, TcStatsBasic, TcStatsQueue};
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
        sent_bytes: 0,
        rate_bytes_per_s: None,
    };
    for nla in attributes(&payload[std::mem::size_of::<TcMessageBuffer>()..]) {
        let nla = nla?;
        match nla.kind() {
            TCA_KIND => qdisc.kind = c_string(nla.value()),
            // The kernel puts TCA_KIND first (`tc_fill_qdisc`).
            TCA_OPTIONS if qdisc.kind == "tbf" => qdisc.rate_bytes_per_s = tbf_rate(nla.value())?,
            TCA_STATS2 => {
                for stat in attributes(nla.value()) {
                    let stat = stat?;
                    match stat.kind() {
                        TCA_STATS_QUEUE => {
                            let queue = TcStatsQueue::parse(stat.value())
                                .map_err(|e| NetlinkError::Malformed(e.to_string()))?;
                            qdisc.backlog_bytes = queue.backlog.into();
                            qdisc.qlen = queue.qlen.into();
                            qdisc.drops = queue.drops.into();
                        }
                        TCA_STATS_BASIC => {
                            let basic = TcStatsBasic::parse(stat.value())
                                .map_err(|e| NetlinkError::Malformed(e.to_string()))?;
                            qdisc.sent_bytes = basic.bytes;
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    Ok(Some(qdisc))
}

/// A `tbf`'s rate out of its `TCA_OPTIONS`.
fn tbf_rate(options: &[u8]) -> Result<Option<u64>> {
    let (mut rate, mut rate64) = (None, None);
    for option in attributes(options) {
        let option = option?;
        let value = option.value();
        match option.kind() {
            TCA_TBF_PARMS => {
                let bytes = value.get(TC_RATESPEC_RATE).ok_or_else(|| {
                    NetlinkError::Malformed(format!("TCA_TBF_PARMS of {} bytes", value.len()))
                })?;
                let mut word = [0u8; 4];
                word.copy_from_slice(bytes);
                rate = Some(u64::from(u32::from_ne_bytes(word)));
            }
            TCA_TBF_RATE64 => {
                let bytes: [u8; 8] = value.try_into().map_err(|_| {
                    NetlinkError::Malformed(format!("TCA_TBF_RATE64 of {} bytes", value.len()))
                })?;
                rate64 = Some(u64::from_ne_bytes(bytes));
            }
            _ => {}
        }
    }
    Ok(rate64.or(rate))
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

/// `recv` again when a signal interrupted it: a socket with a receive
/// timeout is not restarted after a signal, whatever the handler asked for
/// (signal(7)), and a stop and continue of the process interrupts it too.
fn restarted(mut recv: impl FnMut() -> std::io::Result<usize>) -> std::io::Result<usize> {
    loop {
        match recv() {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            result => return result,
        }
    }
}
