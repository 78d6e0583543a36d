//! Packet construction for the traffic generator and the tests: frames with
//! correct lengths and IPv4 header checksums, computed from scratch (never
//! incrementally), so expected outputs do not share code with the data
//! plane's rewrite.

use alloc::vec;
use alloc::vec::Vec;

use crate::packet::parse::{ETH_P_IPV4, ETH_P_IPV6};

pub const HOST_A: [u8; 4] = [10, 0, 0, 1];
pub const HOST_B: [u8; 4] = [10, 1, 0, 2];
pub const HOST_A6: [u8; 16] = [0x20, 1, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
pub const HOST_B6: [u8; 16] = [0x20, 1, 0x0d, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

/// Ethernet header with optional tags `(tpid, vid)`, outermost first.
pub fn ethernet(
    dst: [u8; 6],
    src: [u8; 6],
    tags: &[(u16, u16)],
    ethertype: u16,
    l3: &[u8],
) -> Vec<u8> {
    let mut f = Vec::with_capacity(22 + l3.len());
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    for (tpid, vid) in tags {
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&vid.to_be_bytes());
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(l3);
    f
}

#[derive(Clone, Debug)]
pub struct Ipv4 {
    pub src: [u8; 4],
    pub dst: [u8; 4],
    pub ttl: u8,
    pub protocol: u8,
    /// Flags and fragment offset word (0x4000 = DF).
    pub frag: u16,
    pub id: u16,
    /// A multiple of four bytes, at most 40.
    pub options: Vec<u8>,
}

impl Ipv4 {
    pub fn new(protocol: u8) -> Self {
        Self {
            src: HOST_A,
            dst: HOST_B,
            ttl: 64,
            protocol,
            frag: 0x4000,
            id: 0x1234,
            options: Vec::new(),
        }
    }

    pub fn build(&self, l4: &[u8]) -> Vec<u8> {
        let ihl = 5 + self.options.len() / 4;
        let total = (ihl * 4 + l4.len()) as u16;
        let mut h = vec![0x40 | ihl as u8, 0];
        h.extend_from_slice(&total.to_be_bytes());
        h.extend_from_slice(&self.id.to_be_bytes());
        h.extend_from_slice(&self.frag.to_be_bytes());
        h.extend_from_slice(&[self.ttl, self.protocol, 0, 0]);
        h.extend_from_slice(&self.src);
        h.extend_from_slice(&self.dst);
        h.extend_from_slice(&self.options);
        let csum = ipv4_checksum(&h);
        h[10..12].copy_from_slice(&csum.to_be_bytes());
        h.extend_from_slice(l4);
        h
    }

    pub fn frame(&self, dst: [u8; 6], src: [u8; 6], tags: &[(u16, u16)], l4: &[u8]) -> Vec<u8> {
        ethernet(dst, src, tags, ETH_P_IPV4, &self.build(l4))
    }
}

/// The header checksum over `header` (its checksum field must be zero).
pub fn ipv4_checksum(header: &[u8]) -> u16 {
    let mut sum: u32 = header
        .chunks(2)
        .map(|w| u16::from_be_bytes([w[0], w[1]]) as u32)
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[derive(Clone, Debug)]
pub struct Ipv6 {
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub hop_limit: u8,
    pub next_header: u8,
}

impl Ipv6 {
    pub fn new(next_header: u8) -> Self {
        Self {
            src: HOST_A6,
            dst: HOST_B6,
            hop_limit: 64,
            next_header,
        }
    }

    pub fn build(&self, ext_and_l4: &[u8]) -> Vec<u8> {
        let mut h = vec![0x60, 0x0a, 0xbc, 0xde];
        h.extend_from_slice(&(ext_and_l4.len() as u16).to_be_bytes());
        h.extend_from_slice(&[self.next_header, self.hop_limit]);
        h.extend_from_slice(&self.src);
        h.extend_from_slice(&self.dst);
        h.extend_from_slice(ext_and_l4);
        h
    }

    pub fn frame(&self, dst: [u8; 6], src: [u8; 6], tags: &[(u16, u16)], l4: &[u8]) -> Vec<u8> {
        ethernet(dst, src, tags, ETH_P_IPV6, &self.build(l4))
    }
}

/// UDP header (checksum zero, which IPv4 allows and routers never check).
pub fn udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut u = Vec::with_capacity(8 + payload.len());
    u.extend_from_slice(&sport.to_be_bytes());
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(payload);
    u
}

/// TCP header, 20 bytes, ACK set.
pub fn tcp(sport: u16, dport: u16) -> Vec<u8> {
    let mut t = Vec::with_capacity(20);
    t.extend_from_slice(&sport.to_be_bytes());
    t.extend_from_slice(&dport.to_be_bytes());
    t.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x10, 0xff, 0xff, 0, 0, 0, 0]);
    t
}

/// RoCEv2 BTH (partition key 0xffff, ack request set) followed by `payload`.
pub fn bth(opcode: u8, dest_qp: u32, psn: u32, payload: &[u8]) -> Vec<u8> {
    let q = dest_qp.to_be_bytes();
    let p = psn.to_be_bytes();
    let mut b = vec![
        opcode, 0, 0xff, 0xff, 0, q[1], q[2], q[3], 0x80, p[1], p[2], p[3],
    ];
    b.extend_from_slice(payload);
    b
}

/// IPv6 hop-by-hop / routing / destination-options header of
/// `(len8 + 1) * 8` bytes.
pub fn ipv6_ext(next: u8, len8: u8) -> Vec<u8> {
    let mut e = vec![next, len8];
    e.resize((len8 as usize + 1) * 8, 0);
    e
}

/// IPv6 fragment header; `offset_flags` is the offset << 3 | M.
pub fn ipv6_frag(next: u8, offset_flags: u16) -> Vec<u8> {
    let mut e = vec![next, 0];
    e.extend_from_slice(&offset_flags.to_be_bytes());
    e.extend_from_slice(&[0, 0, 0, 42]);
    e
}

/// RETH: remote virtual address, R_Key, DMA length.
pub fn reth(va: u64, rkey: u32, dma_len: u32) -> Vec<u8> {
    let mut r = Vec::with_capacity(crate::packet::roce::RETH_LEN);
    r.extend_from_slice(&va.to_be_bytes());
    r.extend_from_slice(&rkey.to_be_bytes());
    r.extend_from_slice(&dma_len.to_be_bytes());
    r
}

/// Fills the RoCEv2 invariant CRC into the last four bytes of a whole
/// Ethernet frame (untagged, IPv4 or IPv6, UDP, BTH, ..., ICRC: the
/// datagram was built with four bytes for it, so the lengths count it):
/// CRC-32 over eight 0xff bytes standing in
/// for the InfiniBand LRH, then the packet from the IP header on with the
/// fields routers change masked to ones (IPv4 TOS, TTL and checksum; IPv6
/// traffic class, flow label and hop limit; UDP checksum; BTH reserved
/// byte), stored least significant byte first like the Ethernet FCS.
pub fn fill_icrc(frame: &mut [u8]) {
    let icrc_at = frame.len() - crate::packet::roce::ICRC_LEN;
    let mut masked: Vec<u8> = vec![0xff; 8];
    let l3 = &frame[14..icrc_at];
    masked.extend_from_slice(l3);
    let ip = 8;
    let udp = if l3[0] >> 4 == 6 {
        masked[ip] |= 0x0f;
        masked[ip + 1] = 0xff;
        masked[ip + 2] = 0xff;
        masked[ip + 3] = 0xff;
        masked[ip + 7] = 0xff;
        ip + 40
    } else {
        masked[ip + 1] = 0xff;
        masked[ip + 8] = 0xff;
        masked[ip + 10] = 0xff;
        masked[ip + 11] = 0xff;
        ip + ((l3[0] & 0x0f) as usize) * 4
    };
    masked[udp + 6] = 0xff;
    masked[udp + 7] = 0xff;
    masked[udp + 8 + 4] = 0xff;
    let crc = crc32fast::hash(&masked);
    frame[icrc_at..].copy_from_slice(&crc.to_le_bytes());
}

#[cfg(test)]
mod tests;
