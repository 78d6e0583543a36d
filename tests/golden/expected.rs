//! What the data plane must produce, from sources that share no code with
//! it or with the frames' builder (`lb_common::packet::craft`): literal
//! hex, etherparse, and the flow hash laid out by hand and CRC'd with
//! crc32fast. Nothing here asks the kernel or the daemon's tables.

use etherparse::{
    EtherType, Ethernet2Header, IpNumber, NetSlice, SingleVlanHeader, SlicedPacket, TransportSlice,
    VlanId,
};

use crate::switch::{LB_MAC, SEED};

/// Bytes written as hex: whitespace is ignored, and `ab*64` stands for
/// 64 bytes of 0xab.
pub fn bytes(hex: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for token in hex.split_whitespace() {
        let (digits, times) = match token.split_once('*') {
            Some((digits, times)) => (digits, times.parse().expect("repeat count")),
            None => (token, 1),
        };
        assert!(digits.len() % 2 == 0, "odd hex digits in {token:?}");
        let once: Vec<u8> = (0..digits.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&digits[i..i + 2], 16).expect("hex"))
            .collect();
        for _ in 0..times {
            out.extend_from_slice(&once);
        }
    }
    out
}

/// The group member a hash input picks: CRC-32 seeded with the switch
/// seed, one of 512 buckets by the low bits, and bucket `b` belonging to
/// member `b % members` (the daemon deals a fresh group's buckets round
/// robin; `every_bucket_goes_to_its_round_robin_member` holds the data
/// plane to that).
pub fn member(hash_input: &[u8], members: usize) -> usize {
    let mut crc = crc32fast::Hasher::new_with_initial(SEED);
    crc.update(hash_input);
    (crc.finalize() & 511) as usize % members
}

/// `input` as etherparse reads it.
fn sliced(input: &[u8]) -> SlicedPacket<'_> {
    SlicedPacket::from_ethernet(input).expect("etherparse reads the frame")
}

/// Where the IP header starts: after Ethernet and the tags etherparse saw.
fn l3_offset(packet: &SlicedPacket) -> usize {
    14 + packet
        .link_exts
        .iter()
        .map(|ext| ext.header_len())
        .sum::<usize>()
}

/// What a router makes of `input` for the next hop with MAC `to` (and
/// 802.1Q tag `vlan`): a new L2 header from us to it, ingress tags gone,
/// TTL or hop limit one less (IPv4 checksum recomputed by etherparse),
/// everything after the IP header untouched.
pub fn forwarded(input: &[u8], to: [u8; 6], vlan: Option<u16>) -> Vec<u8> {
    let packet = sliced(input);
    let (ether_type, ip_header) = match packet.net.as_ref().expect("IP") {
        NetSlice::Ipv4(ip) => {
            let mut header = ip.header().to_header();
            header.time_to_live -= 1;
            header.header_checksum = header.calc_header_checksum();
            (EtherType::IPV4, header.to_bytes().to_vec())
        }
        NetSlice::Ipv6(ip) => {
            let mut header = ip.header().to_header();
            header.hop_limit -= 1;
            (EtherType::IPV6, header.to_bytes().to_vec())
        }
        NetSlice::Arp(_) => panic!("ARP is not forwarded"),
    };
    let rest = &input[l3_offset(&packet) + ip_header.len()..];
    let mut out = Vec::new();
    let ethernet = |ether_type| Ethernet2Header {
        destination: to,
        source: LB_MAC,
        ether_type,
    };
    match vlan {
        Some(vlan) => {
            out.extend(ethernet(EtherType::VLAN_TAGGED_FRAME).to_bytes());
            let tag = SingleVlanHeader {
                vlan_id: VlanId::try_new(vlan).expect("VLAN id"),
                ether_type,
                ..Default::default()
            };
            out.extend(tag.to_bytes());
        }
        None => out.extend(ethernet(ether_type).to_bytes()),
    }
    out.extend(ip_header);
    out.extend_from_slice(rest);
    out
}

/// The flow hash input of `input` per the layout `lb_common` documents
/// (`src_ip | dst_ip | ip_protocol | l4_src_port | l4_dst_port |
/// rdma_bth_dest_qp`, network order, an IPv6 address folded to the XOR of
/// its four words, a field not hashed as zeros), from
/// etherparse's reading of the frame. It checks the hash inputs the
/// fixtures write out by hand.
pub fn hash_input(input: &[u8], hashes_qp: bool) -> Vec<u8> {
    let fold = |address: [u8; 16]| {
        let word = |w: usize| u32::from_be_bytes(address[4 * w..4 * w + 4].try_into().unwrap());
        (word(0) ^ word(1) ^ word(2) ^ word(3)).to_be_bytes()
    };
    let packet = sliced(input);
    let (mut out, payload) = match packet.net.as_ref().expect("IP") {
        NetSlice::Ipv4(ip) => (
            [ip.header().source(), ip.header().destination()].concat(),
            ip.payload(),
        ),
        NetSlice::Ipv6(ip) => (
            [fold(ip.header().source()), fold(ip.header().destination())].concat(),
            ip.payload(),
        ),
        NetSlice::Arp(_) => panic!("ARP is not hashed"),
    };
    // Fragments hash on L3 fields only, so that they all take one path;
    // etherparse reads no transport header from one.
    let (ports, qp) = match &packet.transport {
        Some(TransportSlice::Tcp(tcp)) => ([tcp.source_port(), tcp.destination_port()], None),
        Some(TransportSlice::Udp(udp)) => {
            let qp = (udp.destination_port() == 4791).then(|| &udp.payload()[5..8]);
            ([udp.source_port(), udp.destination_port()], qp)
        }
        _ => ([0, 0], None),
    };
    let IpNumber(protocol) = payload.ip_number;
    out.push(protocol);
    for port in ports {
        out.extend(port.to_be_bytes());
    }
    match qp.filter(|_| hashes_qp) {
        Some(qp) => out.extend_from_slice(qp),
        None => out.extend([0; 3]),
    }
    out
}
