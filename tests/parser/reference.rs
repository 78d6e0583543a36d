//! The reference parser: etherparse's slicers, one header at a time, put
//! together by the rules below. Every header's bounds, version and length
//! checks and every field come from etherparse (the BTH, which it does not
//! know, from the InfiniBand layout written out here); what the data plane
//! does with the result is this file's, and each rule is where the two
//! parsers legitimately part:
//!
//! - Ethernet: a frame shorter than its header is `l2_truncated`; a group
//!   destination (the I/G bit) is `not_unicast`, however the rest looks.
//! - VLAN tags: 802.1Q (0x8100) and 802.1ad (0x88a8) only; etherparse also
//!   takes 0x9100, which the kernel does not treat as a tag either, so it is
//!   an ethertype that is not IP (`not_ip`). At most two tags, the inner one
//!   802.1Q: a third, or an 802.1ad tag inside another, is `unsupported`
//!   before it is read (etherparse reads up to three). A tag cut short is
//!   `l2_truncated`.
//! - IPv4: etherparse's header and total-length checks, any failure
//!   `l3_malformed`. An authentication header (51) is not walked: it is the
//!   upper-layer protocol, without ports, however etherparse finds it.
//! - IPv6: payload length 0 (a jumbogram, RFC 2675, or garbage) is
//!   `unsupported` where etherparse reads to the end of the slice; a payload
//!   length beyond the frame is `l3_malformed`. Hop-by-hop, routing and
//!   destination options and fragment headers are walked, at most six: a
//!   seventh is `unsupported`; each must fit the payload length
//!   (`l3_malformed`). A hop-by-hop header after the first is walked like
//!   the others, where etherparse refuses it (the kernel forwards it). The
//!   authentication header is again the upper-layer protocol.
//! - Fragments (IPv4 MF or offset, an IPv6 fragment header with either):
//!   addresses and the protocol after the fragment header only, no ports.
//!   An atomic IPv6 fragment is walked through.
//! - TCP: etherparse's data offset checks over the rest of the datagram;
//!   a failure is `l4_truncated`.
//! - UDP: etherparse's length checks over the rest of the datagram
//!   (`l4_truncated`), and a length of 0, which etherparse takes as a
//!   jumbogram's, is `l4_truncated` too: jumbograms are not forwarded.
//! - RoCEv2 (UDP destination port 4791): the BTH's 12 bytes inside the UDP
//!   length, else `l4_truncated`.
//! - Other protocols: addresses and protocol, no ports.

use etherparse::{
    EtherType, Ethernet2Slice, IpNumber, Ipv4HeaderSlice, Ipv4Slice, Ipv6FragmentHeaderSlice,
    Ipv6HeaderSlice, Ipv6RawExtHeaderSlice, SingleVlanSlice, TcpSlice, UdpSlice, err,
};
use lb_common::{
    packet::parse::{Bth, FlowFields, Parsed},
    verdict::Reason,
};

/// The extension headers the data plane walks before giving up
/// (README: "more than 6 IPv6 extension headers").
const EXT_HEADERS_WALKED: usize = 6;
const ROCEV2_PORT: u16 = 4791;
const BTH_LEN: usize = 12;

pub fn reference(frame: &[u8]) -> Result<Parsed, Reason> {
    let eth = Ethernet2Slice::from_slice_without_fcs(frame).map_err(|_| Reason::L2Truncated)?;
    if eth.destination()[0] & 1 != 0 {
        return Err(Reason::NotUnicast);
    }
    let mut l3 = eth.payload();
    let mut vlan_tags = 0u8;
    while l3.ether_type == EtherType::VLAN_TAGGED_FRAME
        || l3.ether_type == EtherType::PROVIDER_BRIDGING
    {
        if vlan_tags == 2 || (vlan_tags == 1 && l3.ether_type == EtherType::PROVIDER_BRIDGING) {
            return Err(Reason::Unsupported);
        }
        l3 = SingleVlanSlice::from_slice(l3.payload)
            .map_err(|_| Reason::L2Truncated)?
            .payload();
        vlan_tags += 1;
    }
    let mut parsed = Parsed {
        l3_offset: frame.len() - l3.payload.len(),
        vlan_tags,
        ..Parsed::default()
    };
    match l3.ether_type {
        EtherType::IPV4 => ipv4(l3.payload, &mut parsed)?,
        EtherType::IPV6 => ipv6(l3.payload, &mut parsed)?,
        _ => return Err(Reason::NotIp),
    }
    Ok(parsed)
}

fn ipv4(l3: &[u8], parsed: &mut Parsed) -> Result<(), Reason> {
    let payload = match Ipv4Slice::from_slice(l3) {
        Ok(ip) => Some(ip.payload().payload),
        // Only the authentication header after a sound IPv4 header failed.
        Err(err::ipv4::SliceError::Exts(_)) => None,
        Err(err::ipv4::SliceError::Len(len)) if len.layer == err::Layer::IpAuthHeader => None,
        Err(_) => return Err(Reason::L3Malformed),
    };
    let header = Ipv4HeaderSlice::from_slice(l3).expect("Ipv4Slice checked the header");
    parsed.flow.src[..4].copy_from_slice(&header.source());
    parsed.flow.dst[..4].copy_from_slice(&header.destination());
    parsed.flow.protocol = header.protocol().0;
    parsed.ttl = header.ttl();
    parsed.fragment = header.is_fragmenting_payload();
    match payload {
        // The authentication header is the upper layer, AH's own payload
        // aside.
        Some(_) if header.protocol() == IpNumber::AUTHENTICATION_HEADER => Ok(()),
        Some(payload) if !parsed.fragment => transport(payload, parsed),
        _ => Ok(()),
    }
}

fn ipv6(l3: &[u8], parsed: &mut Parsed) -> Result<(), Reason> {
    let header = Ipv6HeaderSlice::from_slice(l3).map_err(|_| Reason::L3Malformed)?;
    let payload_len = usize::from(header.payload_length());
    if payload_len == 0 {
        return Err(Reason::Unsupported);
    }
    let mut rest = l3
        .get(header.slice().len()..header.slice().len() + payload_len)
        .ok_or(Reason::L3Malformed)?;
    parsed.flow.is_ipv6 = true;
    parsed.flow.src = header.source();
    parsed.flow.dst = header.destination();
    parsed.ttl = header.hop_limit();
    let mut next = header.next_header();
    for _ in 0..EXT_HEADERS_WALKED {
        match next {
            IpNumber::IPV6_HEADER_HOP_BY_HOP
            | IpNumber::IPV6_ROUTE_HEADER
            | IpNumber::IPV6_DESTINATION_OPTIONS => {
                let ext =
                    Ipv6RawExtHeaderSlice::from_slice(rest).map_err(|_| Reason::L3Malformed)?;
                next = ext.next_header();
                rest = &rest[ext.slice().len()..];
            }
            IpNumber::IPV6_FRAGMENTATION_HEADER => {
                let frag =
                    Ipv6FragmentHeaderSlice::from_slice(rest).map_err(|_| Reason::L3Malformed)?;
                next = frag.next_header();
                rest = &rest[frag.slice().len()..];
                if frag.is_fragmenting_payload() {
                    parsed.fragment = true;
                    parsed.flow.protocol = next.0;
                    return Ok(());
                }
            }
            _ => break,
        }
    }
    if matches!(
        next,
        IpNumber::IPV6_HEADER_HOP_BY_HOP
            | IpNumber::IPV6_ROUTE_HEADER
            | IpNumber::IPV6_DESTINATION_OPTIONS
            | IpNumber::IPV6_FRAGMENTATION_HEADER
    ) {
        return Err(Reason::Unsupported);
    }
    parsed.flow.protocol = next.0;
    transport(rest, parsed)
}

/// Ports (and the BTH) from `datagram`, the rest of the IP datagram after
/// the IP headers.
fn transport(datagram: &[u8], parsed: &mut Parsed) -> Result<(), Reason> {
    let flow: &mut FlowFields = &mut parsed.flow;
    match IpNumber(flow.protocol) {
        IpNumber::TCP => {
            let tcp = TcpSlice::from_slice(datagram).map_err(|_| Reason::L4Truncated)?;
            flow.src_port = tcp.source_port();
            flow.dst_port = tcp.destination_port();
        }
        IpNumber::UDP => {
            let udp = UdpSlice::from_slice(datagram).map_err(|_| Reason::L4Truncated)?;
            if udp.length() == 0 {
                return Err(Reason::L4Truncated);
            }
            flow.src_port = udp.source_port();
            flow.dst_port = udp.destination_port();
            if flow.dst_port == ROCEV2_PORT {
                let b = udp.payload().get(..BTH_LEN).ok_or(Reason::L4Truncated)?;
                // IBTA 9.2: opcode, SE/M/pad/version, partition key,
                // reserved, destination QP (24 bits), A/reserved, PSN (24).
                let bth = Bth {
                    opcode: b[0],
                    dest_qp: u32::from_be_bytes([0, b[5], b[6], b[7]]),
                    psn: u32::from_be_bytes([0, b[9], b[10], b[11]]),
                };
                flow.dest_qp = bth.dest_qp;
                parsed.bth = Some(bth);
            }
        }
        _ => {}
    }
    Ok(())
}
