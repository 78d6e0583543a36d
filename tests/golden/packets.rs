//! What the peer sends: its MAC and the packet bodies the tests share.

use lb_common::packet::{
    craft::{Ipv4, bth, udp},
    parse::ROCEV2_UDP_PORT,
};

pub const PEER_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0xaa, 0, 0x01];

pub fn ipv4_to(dst: [u8; 4], protocol: u8) -> Ipv4 {
    Ipv4 {
        dst,
        ..Ipv4::new(protocol)
    }
}

pub fn rocev2(opcode: u8, qp: u32) -> Vec<u8> {
    udp(
        0xc001,
        ROCEV2_UDP_PORT,
        &bth(opcode, qp, 0x10_0000, &[0xab; 64]),
    )
}
