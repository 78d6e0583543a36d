//! RoCEv2 traffic shaped like collectives: who sends to whom (ring
//! all-reduce or all-to-all among R ranks), K QPs per connection used
//! round-robin, messages cut into MTU-sized RDMA WRITE packets
//! (FIRST/MIDDLE/LAST, or ONLY), RETH on FIRST and ONLY, payload and ICRC.
//!
//! [`Generator`] plans and builds frames: `fabriclb simulate` runs them
//! through the choice in memory ([`crate::simulate`]), and the testbed's
//! senders put the same frames on the wire (`traffic::send`), so a
//! simulation and a testbed run of one collective carry the same flows.

use std::net::Ipv4Addr;
use std::str::FromStr;

use lb_common::packet::{
    craft::{self, Ipv4},
    parse::{IPPROTO_UDP, ROCEV2_UDP_PORT},
    roce::{ICRC_LEN, PSN_MASK, WRITE_ONLY, has_reth, write_opcode},
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// Rank r sends to rank r + 1 (mod R): every step of a ring all-reduce.
    Ring,
    /// Every rank sends to every other rank.
    AllToAll,
    /// Two jobs at once, sharing the fabric: a ring over the even ranks
    /// and an all-to-all over the odd ones.
    Mixed,
}

impl FromStr for Pattern {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        (Self::ALL.into_iter())
            .find(|p| p.as_str() == s)
            .ok_or_else(|| {
                format!("unknown pattern {s:?} (valid: \"ring\", \"all-to-all\", \"mixed\")")
            })
    }
}

impl Pattern {
    pub const ALL: [Self; 3] = [Self::Ring, Self::AllToAll, Self::Mixed];

    /// The name `--pattern` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ring => "ring",
            Self::AllToAll => "all-to-all",
            Self::Mixed => "mixed",
        }
    }

    /// The ranks `rank` sends to.
    pub fn peers(self, ranks: usize, rank: usize) -> Vec<usize> {
        match self {
            Self::Ring if ranks > 1 => vec![(rank + 1) % ranks],
            Self::Ring => vec![],
            // Shifted, as NCCL's and MPI's pairwise exchanges order it: at
            // step k every rank sends to the one k after it, so no rank is
            // everyone's first peer (an incast at every round's start).
            Self::AllToAll => (1..ranks).map(|k| (rank + k) % ranks).collect(),
            Self::Mixed => {
                let job = rank % 2;
                let members = (ranks + 1 - job) / 2;
                let within = if job == 0 { Self::Ring } else { Self::AllToAll };
                (within.peers(members, rank / 2).into_iter())
                    .map(|member| 2 * member + job)
                    .collect()
            }
        }
    }
}

/// What every rank of a collective sends, the ranks aside: whom to (the
/// pattern), on how many QPs, and which messages. The testbed's senders
/// and `fabriclb simulate` take a collective's exchange alike.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exchange {
    pub pattern: Pattern,
    pub qps_per_connection: u32,
    pub message_bytes: u32,
    /// RDMA payload bytes per packet (the RoCE path MTU).
    pub mtu: u32,
    /// Messages per connection.
    pub messages: u32,
    /// Give every QP its own UDP source port, as NICs that derive the port
    /// from the QP do; otherwise a connection's QPs share one.
    pub source_port_per_qp: bool,
    /// Single-packet WRITE ONLY messages (one MTU each) a connection sends
    /// on its QP after each of its messages.
    pub small_messages: u32,
}

impl Exchange {
    /// What rank `rank` sends, `ranks` the receive address of every rank.
    pub fn for_rank(&self, ranks: Vec<Ipv4Addr>, rank: usize) -> Workload {
        Workload {
            exchange: self.clone(),
            ranks,
            rank,
        }
    }

    /// Packets a message is cut into.
    pub fn packets_per_message(&self) -> u32 {
        self.message_bytes.div_ceil(self.mtu.max(1)).max(1)
    }
}

/// What one rank sends.
#[derive(Clone, Debug)]
pub struct Workload {
    pub exchange: Exchange,
    /// Receive address of every rank, by rank.
    pub ranks: Vec<Ipv4Addr>,
    pub rank: usize,
}

/// L2/L3 identity of the sending host.
#[derive(Clone, Copy, Debug)]
pub struct Sender {
    pub ip: Ipv4Addr,
    pub mac: [u8; 6],
    /// The first hop's MAC (the leaf).
    pub gateway_mac: [u8; 6],
}

/// One connection: a peer, its QPs and their next PSNs.
#[derive(Clone, Debug)]
struct Connection {
    dst: Ipv4Addr,
    /// By QP index; all equal unless ports are per QP.
    source_ports: Vec<u16>,
    qp_base: u32,
    next_psn: Vec<u32>,
    next_qp: usize,
    sent_messages: u32,
}

/// Frames of a workload, a message at a time.
pub struct Generator {
    workload: Workload,
    sender: Sender,
    connections: Vec<Connection>,
}

/// Destination QPs of a connection: a block per (sender rank, peer rank),
/// so the receiver can tell every QP apart.
fn qp_base(rank: usize, peer: usize, per_connection: u32) -> u32 {
    let block = per_connection.next_power_of_two().max(16);
    (0x100 + ((rank * 256 + peer) as u32) * block) & PSN_MASK
}

/// A connection's UDP source port for one of its QPs. Many NICs keep one
/// per connection, so its QPs share a five-tuple and only the BTH tells
/// them apart; others hash the QP into 0xc000..=0xffff, which this mimics
/// with FNV-1a over (rank, connection, QP), folded to 14 bits.
fn source_port(rank: usize, connection: usize, qp: u32, per_qp: bool) -> u16 {
    if per_qp {
        let mut id = [0u8; 6];
        id[..4].copy_from_slice(&(rank as u32).to_be_bytes());
        id[4] = connection as u8;
        id[5] = qp as u8;
        let h = id.iter().fold(0x811c_9dc5u32, |h, &b| {
            (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
        });
        0xc000 | ((h ^ (h >> 16)) & 0x3fff) as u16
    } else {
        0xc000 | (rank as u16) << 6 | connection as u16
    }
}

impl Generator {
    pub fn new(workload: Workload, sender: Sender) -> Self {
        let Workload {
            exchange,
            ranks,
            rank,
        } = &workload;
        let qps = exchange.qps_per_connection;
        let connections = (exchange.pattern.peers(ranks.len(), *rank).into_iter())
            .enumerate()
            .map(|(i, peer)| Connection {
                dst: ranks[peer],
                source_ports: (0..qps.max(1))
                    .map(|qp| source_port(*rank, i, qp, exchange.source_port_per_qp))
                    .collect(),
                qp_base: qp_base(*rank, peer, qps),
                next_psn: vec![0; qps.max(1) as usize],
                next_qp: 0,
                sent_messages: 0,
            })
            .collect();
        Self {
            workload,
            sender,
            connections,
        }
    }

    pub fn packets_per_message(&self) -> u32 {
        self.workload.exchange.packets_per_message()
    }

    /// Frames one connection sends in a round: its message and the small
    /// messages after it.
    pub fn frames_per_message(&self) -> usize {
        (self.packets_per_message() + self.workload.exchange.small_messages) as usize
    }

    /// Packets the whole workload sends.
    pub fn total_packets(&self) -> u64 {
        self.connections.len() as u64
            * u64::from(self.workload.exchange.messages)
            * self.frames_per_message() as u64
    }

    /// The next round: one message on every connection that has messages
    /// left, each on its connection's next QP (round-robin), its packets
    /// back to back as a NIC sends them, then the small messages on the
    /// same QP. Empty when the workload is done.
    pub fn next_round(&mut self) -> Vec<Vec<u8>> {
        let count = self.packets_per_message();
        let Exchange {
            message_bytes,
            mtu,
            messages,
            small_messages,
            ..
        } = self.workload.exchange;
        let mut frames = Vec::new();
        for c in 0..self.connections.len() {
            let conn = &mut self.connections[c];
            if conn.sent_messages >= messages {
                continue;
            }
            let qp_index = conn.next_qp;
            conn.next_qp = (conn.next_qp + 1) % conn.next_psn.len();
            let message = conn.sent_messages;
            conn.sent_messages += 1;
            let va = u64::from(message) * u64::from(message_bytes);
            for index in 0..count {
                let payload = mtu.min(message_bytes - (index * mtu).min(message_bytes));
                let opcode = write_opcode(index, count);
                frames.push(self.frame(c, qp_index, opcode, payload, va, message_bytes));
            }
            for _ in 0..small_messages {
                frames.push(self.frame(c, qp_index, WRITE_ONLY, mtu, va, mtu));
            }
        }
        frames
    }

    /// Every frame of the workload, round after round.
    pub fn frames(mut self) -> Vec<Vec<u8>> {
        std::iter::from_fn(|| Some(self.next_round()).filter(|round| !round.is_empty()))
            .flatten()
            .collect()
    }

    /// The header fields of every flow (connection and QP) of this
    /// workload, as the data plane parses them from its frames.
    pub fn flows(mut self) -> Vec<lb_common::packet::parse::FlowFields> {
        let mut flows = Vec::new();
        for c in 0..self.connections.len() {
            for qp in 0..self.connections[c].next_psn.len() {
                let frame = self.frame(c, qp, WRITE_ONLY, 1, 0, 1);
                flows.extend(lb_common::packet::parse::parse(frame.as_slice()).map(|p| p.flow));
            }
        }
        flows
    }

    /// One packet on QP `qp_index` of connection `c`, with the QP's next
    /// PSN; a RETH (`va`, `dma_len`) where the opcode has one.
    fn frame(
        &mut self,
        c: usize,
        qp_index: usize,
        opcode: u8,
        payload: u32,
        va: u64,
        dma_len: u32,
    ) -> Vec<u8> {
        let conn = &mut self.connections[c];
        let psn = conn.next_psn[qp_index];
        conn.next_psn[qp_index] = (psn + 1) & PSN_MASK;
        let payload_len = payload.max(1) as usize;
        let mut rdma = Vec::with_capacity(16 + payload_len + ICRC_LEN);
        if has_reth(opcode) {
            rdma.extend(craft::reth(va, 0x0001_2345, dma_len));
        }
        rdma.resize(rdma.len() + payload_len, (psn & 0xff) as u8);
        rdma.resize(rdma.len() + ICRC_LEN, 0);
        let qp = conn.qp_base + qp_index as u32;
        let l4 = craft::udp(
            conn.source_ports[qp_index],
            ROCEV2_UDP_PORT,
            &craft::bth(opcode, qp, psn, &rdma),
        );
        let ip = Ipv4 {
            src: self.sender.ip.octets(),
            dst: conn.dst.octets(),
            ..Ipv4::new(IPPROTO_UDP)
        };
        let mut frame = ip.frame(self.sender.gateway_mac, self.sender.mac, &[], &l4);
        craft::fill_icrc(&mut frame);
        frame
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use lb_common::packet::{
        parse::{Parsed, parse},
        roce,
    };

    pub(crate) fn workload(pattern: Pattern, message_bytes: u32) -> Workload {
        let exchange = Exchange {
            pattern,
            qps_per_connection: 4,
            message_bytes,
            mtu: 1024,
            messages: 8,
            source_port_per_qp: false,
            small_messages: 0,
        };
        let ranks = (1..=4).map(|i| Ipv4Addr::new(198, 19, 100 + i, 1));
        exchange.for_rank(ranks.collect(), 1)
    }

    pub(crate) const SENDER: Sender = Sender {
        ip: Ipv4Addr::new(198, 18, 101, 1),
        mac: [2, 0, 0, 0, 1, 1],
        gateway_mac: [2, 0, 0, 0, 0, 0xfe],
    };

    #[test]
    fn ring_and_all_to_all_peers() {
        assert_eq!(Pattern::Ring.peers(4, 3), [0]);
        assert_eq!(Pattern::AllToAll.peers(4, 1), [2, 3, 0]);
        assert_eq!(Pattern::Ring.peers(1, 0), Vec::<usize>::new());
        assert_eq!("all-to-all".parse::<Pattern>(), Ok(Pattern::AllToAll));
        // Two jobs: the even ranks' ring, the odd ranks' all-to-all.
        assert_eq!(Pattern::Mixed.peers(8, 6), [0]);
        assert_eq!(Pattern::Mixed.peers(8, 3), [5, 7, 1]);
        assert_eq!(Pattern::Mixed.peers(7, 5), [1, 3]);
        assert_eq!(Pattern::Mixed.peers(7, 6), [0]);
        assert_eq!(Pattern::Mixed.peers(1, 0), Vec::<usize>::new());
        assert_eq!("mixed".parse::<Pattern>(), Ok(Pattern::Mixed));
        assert!("mesh".parse::<Pattern>().is_err());
    }

    /// A round's frames parsed, with their opcodes and PSNs.
    fn decode(round: &[Vec<u8>]) -> (Vec<Parsed>, Vec<u8>, Vec<u32>) {
        let parsed: Vec<Parsed> = round
            .iter()
            .map(|f| parse(&f[..]).expect("parses"))
            .collect();
        let bth = |p: &Parsed| p.bth.expect("bth");
        let ops = parsed.iter().map(|p| bth(p).opcode).collect();
        let psns = parsed.iter().map(|p| bth(p).psn).collect();
        (parsed, ops, psns)
    }

    #[test]
    fn a_message_is_first_middles_last_on_one_qp_with_consecutive_psns() {
        let mut g = Generator::new(workload(Pattern::Ring, 3500), SENDER);
        assert_eq!(g.packets_per_message(), 4);
        let round = g.next_round();
        assert_eq!(round.len(), 4);
        let (parsed, ops, psns) = decode(&round);
        assert_eq!(
            ops,
            [
                roce::WRITE_FIRST,
                roce::WRITE_MIDDLE,
                roce::WRITE_MIDDLE,
                roce::WRITE_LAST
            ]
        );
        assert_eq!(psns, [0, 1, 2, 3]);
        let qp = parsed[0].flow.dest_qp;
        assert!(parsed.iter().all(|p| p.flow.dest_qp == qp));
        // To rank 2, from the sender; one five-tuple for the connection.
        assert_eq!(&parsed[0].flow.dst[..4], &[198, 19, 103, 1]);
        assert_eq!(parsed[0].flow.dst_port, ROCEV2_UDP_PORT);
        // Lengths: FIRST carries the RETH; LAST the 428-byte remainder.
        let udp_len = |f: &Vec<u8>| u16::from_be_bytes([f[38], f[39]]) as usize;
        assert_eq!(udp_len(&round[0]), 8 + 12 + 16 + 1024 + 4);
        assert_eq!(udp_len(&round[1]), 8 + 12 + 1024 + 4);
        assert_eq!(udp_len(&round[3]), 8 + 12 + 428 + 4);
        assert!(round.iter().all(|f| f.len() == 14 + 20 + udp_len(f)));
    }

    #[test]
    fn small_messages_follow_on_the_same_qp_and_ports_can_be_per_qp() {
        let mut w = workload(Pattern::Ring, 2048);
        w.exchange.small_messages = 2;
        w.exchange.source_port_per_qp = true;
        let mut g = Generator::new(w, SENDER);
        assert_eq!(g.total_packets(), 8 * (2 + 2));
        let mut ports = Vec::new();
        for round in 0..4 {
            let (parsed, ops, psns) = decode(&g.next_round());
            assert_eq!(
                ops,
                [
                    roce::WRITE_FIRST,
                    roce::WRITE_LAST,
                    roce::WRITE_ONLY,
                    roce::WRITE_ONLY
                ]
            );
            assert_eq!(psns, [0, 1, 2, 3], "round {round}: a fresh QP each round");
            assert!(
                parsed
                    .iter()
                    .all(|p| p.flow.dest_qp == parsed[0].flow.dest_qp)
            );
            assert!(
                parsed
                    .iter()
                    .all(|p| p.flow.src_port == parsed[0].flow.src_port)
            );
            ports.push(parsed[0].flow.src_port);
        }
        ports.dedup();
        assert_eq!(ports.len(), 4, "one source port per QP: {ports:?}");
    }

    #[test]
    fn messages_rotate_over_the_qps_and_psns_continue_per_qp() {
        let mut g = Generator::new(workload(Pattern::Ring, 1000), SENDER);
        let mut seen = Vec::new();
        loop {
            let round = g.next_round();
            if round.is_empty() {
                break;
            }
            let b = parse(&round[0][..]).expect("parses").bth.expect("bth");
            assert_eq!(b.opcode, roce::WRITE_ONLY);
            seen.push((b.dest_qp, b.psn));
        }
        assert_eq!(seen.len(), 8);
        let base = seen[0].0;
        let expected: Vec<(u32, u32)> = (0..8).map(|m| (base + m % 4, m / 4)).collect();
        assert_eq!(seen, expected);
        assert_eq!(g.total_packets(), 8);
    }

    #[test]
    fn all_to_all_uses_distinct_qps_per_connection() {
        let mut g = Generator::new(workload(Pattern::AllToAll, 1000), SENDER);
        let round = g.next_round();
        assert_eq!(round.len(), 3);
        let mut qps: Vec<u32> = round
            .iter()
            .map(|f| parse(&f[..]).unwrap().flow.dest_qp)
            .collect();
        qps.dedup();
        assert_eq!(qps.len(), 3);
    }

    #[test]
    fn icrc_is_filled() {
        let mut g = Generator::new(workload(Pattern::Ring, 100), SENDER);
        let frame = &g.next_round()[0];
        let mut copy = frame.clone();
        craft::fill_icrc(&mut copy);
        assert_eq!(&copy, frame);
        assert_ne!(&frame[frame.len() - 4..], &[0; 4]);
    }
}
