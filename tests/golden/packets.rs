//! What the peer sends: its MAC and the headers and bodies the tests share.

use lb_common::packet::{
    craft::{Ipv4, Ipv6, bth, udp},
    parse::{ETH_P_8021AD, ETH_P_8021Q, ROCEV2_UDP_PORT},
};

pub const PEER_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0xaa, 0, 0x01];

pub const QINQ: [(u16, u16); 2] = [(ETH_P_8021AD, 20), (ETH_P_8021Q, 30)];

/// An IPv4 or an IPv6 header, for what the tests do alike with either.
#[derive(Clone)]
pub enum Ip {
    V4(Ipv4),
    V6(Ipv6),
}

impl Ip {
    pub fn frame(&self, dst: [u8; 6], src: [u8; 6], tags: &[(u16, u16)], body: &[u8]) -> Vec<u8> {
        match self {
            Ip::V4(ip) => ip.frame(dst, src, tags, body),
            Ip::V6(ip) => ip.frame(dst, src, tags, body),
        }
    }
}

impl From<Ipv4> for Ip {
    fn from(ip: Ipv4) -> Self {
        Ip::V4(ip)
    }
}

impl From<Ipv6> for Ip {
    fn from(ip: Ipv6) -> Self {
        Ip::V6(ip)
    }
}

pub fn ipv4_to(dst: [u8; 4], protocol: u8) -> Ipv4 {
    Ipv4 {
        dst,
        ..Ipv4::new(protocol)
    }
}

/// A RoCEv2 datagram where only the opcode and the QP matter.
pub fn rocev2(opcode: u8, qp: u32) -> Vec<u8> {
    rocev2_with_psn(opcode, qp, 0x10_0000)
}

/// A RoCEv2 datagram whose PSN tells it apart from its neighbours.
pub fn rocev2_with_psn(opcode: u8, qp: u32, psn: u32) -> Vec<u8> {
    udp(0xc001, ROCEV2_UDP_PORT, &bth(opcode, qp, psn, &[0xab; 64]))
}
