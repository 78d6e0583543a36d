//! What craft builds, read back by etherparse, a parser that shares no
//! code with craft or with our own parser, field by field and checksums
//! included; the RoCEv2 headers etherparse does not know are held to
//! literal bytes laid out per the IBTA spec, and the ICRC to frames scapy
//! built and checksummed.

use etherparse::{
    EtherType, Ethernet2Header, IpFragOffset, IpNumber, Ipv4Header, Ipv6FlowLabel,
    Ipv6FragmentHeader, Ipv6Header, Ipv6RawExtHeader, LinkExtHeader, LinkHeader, NetHeaders,
    PacketHeaders, SingleVlanHeader, TcpHeader, TransportHeader, UdpHeader, VlanId,
};

use super::*;
use crate::packet::parse::{ETH_P_8021AD, ETH_P_8021Q, IPPROTO_TCP, IPPROTO_UDP, ROCEV2_UDP_PORT};

const DST: [u8; 6] = [0x02, 0xfa, 0xb0, 0, 0, 0x01];
const SRC: [u8; 6] = [0x02, 0, 0, 0xaa, 0, 0x01];

fn headers(frame: &[u8]) -> PacketHeaders<'_> {
    PacketHeaders::from_ethernet_slice(frame).expect("etherparse reads the frame")
}

fn ethernet_header(ether_type: EtherType) -> LinkHeader {
    LinkHeader::Ethernet2(Ethernet2Header {
        destination: DST,
        source: SRC,
        ether_type,
    })
}

fn vlan(id: u16, ether_type: EtherType) -> LinkExtHeader {
    LinkExtHeader::Vlan(SingleVlanHeader {
        vlan_id: VlanId::try_new(id).unwrap(),
        ether_type,
        ..Default::default()
    })
}

fn ipv4(frame: &[u8]) -> Ipv4Header {
    match headers(frame).net {
        Some(NetHeaders::Ipv4(ip, exts)) => {
            assert_eq!(exts, Default::default(), "IPv4 extension headers");
            ip
        }
        other => panic!("not IPv4: {other:?}"),
    }
}

/// The IPv4 header craft's defaults make, for `payload` bytes after it and
/// the checksum etherparse computes.
fn ipv4_header(protocol: IpNumber, payload: u16) -> Ipv4Header {
    let mut ip = Ipv4Header {
        total_len: 20 + payload,
        identification: 0x1234,
        dont_fragment: true,
        time_to_live: 64,
        protocol,
        source: HOST_A,
        destination: HOST_B,
        ..Default::default()
    };
    ip.header_checksum = ip.calc_header_checksum();
    ip
}

fn ipv6(frame: &[u8]) -> (Ipv6Header, etherparse::Ipv6Extensions) {
    match headers(frame).net {
        Some(NetHeaders::Ipv6(ip, exts)) => (ip, exts),
        other => panic!("not IPv6: {other:?}"),
    }
}

/// The IPv6 header craft makes: traffic class 0, flow label 0xabcde.
fn ipv6_header(next_header: IpNumber, payload_length: u16) -> Ipv6Header {
    Ipv6Header {
        traffic_class: 0,
        flow_label: Ipv6FlowLabel::try_new(0xabcde).unwrap(),
        payload_length,
        next_header,
        hop_limit: 64,
        source: HOST_A6,
        destination: HOST_B6,
    }
}

fn udp_header(frame: &[u8]) -> UdpHeader {
    match headers(frame).transport {
        Some(TransportHeader::Udp(udp)) => udp,
        other => panic!("not UDP: {other:?}"),
    }
}

#[test]
fn untagged_ethernet() {
    // 0x88b5: local experimental, a type etherparse reads no further.
    let frame = ethernet(DST, SRC, &[], 0x88b5, &[7; 28]);
    let h = headers(&frame);
    assert_eq!(h.link, Some(ethernet_header(EtherType(0x88b5))), "Ethernet");
    assert!(h.link_exts.is_empty());
    assert_eq!(&frame[14..], &[7; 28], "payload");
}

#[test]
fn single_vlan_tag() {
    let frame = Ipv4::new(IPPROTO_UDP).frame(DST, SRC, &[(ETH_P_8021Q, 10)], &udp(1, 2, b"x"));
    let h = headers(&frame);
    assert_eq!(
        h.link,
        Some(ethernet_header(EtherType::VLAN_TAGGED_FRAME)),
        "Ethernet"
    );
    assert_eq!(h.link_exts.as_slice(), [vlan(10, EtherType::IPV4)], "tag");
    assert_eq!(ipv4(&frame), ipv4_header(IpNumber::UDP, 9), "IPv4");
}

#[test]
fn qinq_tags_outermost_first() {
    let tags = [(ETH_P_8021AD, 20), (ETH_P_8021Q, 30)];
    let frame = Ipv6::new(IPPROTO_UDP).frame(DST, SRC, &tags, &udp(1, 2, b"q"));
    let h = headers(&frame);
    assert_eq!(
        h.link,
        Some(ethernet_header(EtherType::PROVIDER_BRIDGING)),
        "Ethernet"
    );
    assert_eq!(
        h.link_exts.as_slice(),
        [
            vlan(20, EtherType::VLAN_TAGGED_FRAME),
            vlan(30, EtherType::IPV6)
        ],
        "tags"
    );
    assert_eq!(ipv6(&frame).0, ipv6_header(IpNumber::UDP, 9), "IPv6");
}

#[test]
fn ipv4_header_every_field_and_checksum() {
    let ip = Ipv4 {
        src: [192, 0, 2, 1],
        dst: [198, 51, 100, 7],
        ttl: 255,
        protocol: IPPROTO_TCP,
        frag: 0x2000 | 0x00b9,
        id: 0xffff,
        options: Vec::new(),
    };
    let frame = ip.frame(DST, SRC, &[], &tcp(1, 2));
    let mut want = Ipv4Header {
        total_len: 40,
        identification: 0xffff,
        dont_fragment: false,
        more_fragments: true,
        fragment_offset: IpFragOffset::try_new(0xb9).unwrap(),
        time_to_live: 255,
        protocol: IpNumber::TCP,
        source: [192, 0, 2, 1],
        destination: [198, 51, 100, 7],
        ..Default::default()
    };
    want.header_checksum = want.calc_header_checksum();
    assert_eq!(ipv4(&frame), want, "IPv4");
    assert_eq!(
        headers(&frame).link,
        Some(ethernet_header(EtherType::IPV4)),
        "Ethernet"
    );
}

#[test]
fn ipv4_options_count_in_the_header_length_and_checksum() {
    let options = [0x94, 0x04, 0, 0, 0x01, 0x01, 0x01, 0x00];
    let ip = Ipv4 {
        options: options.to_vec(),
        ..Ipv4::new(IPPROTO_UDP)
    };
    let frame = ip.frame(DST, SRC, &[], &udp(3000, 3001, b"opts"));
    assert_eq!(frame[14], 0x47, "version 4, IHL 7");
    let mut want = Ipv4Header {
        total_len: 28 + 12,
        options: options.as_slice().try_into().unwrap(),
        ..ipv4_header(IpNumber::UDP, 0)
    };
    want.header_checksum = want.calc_header_checksum();
    assert_eq!(ipv4(&frame), want, "IPv4");
}

/// The example every checksum explanation works through.
#[test]
fn ipv4_checksum_of_a_known_header() {
    let header = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];
    assert_eq!(ipv4_checksum(&header), 0xb861, "checksum");
}

#[test]
fn ipv6_header_every_field() {
    let ip = Ipv6 {
        hop_limit: 2,
        ..Ipv6::new(IPPROTO_TCP)
    };
    let frame = ip.frame(DST, SRC, &[], &tcp(50000, 22));
    assert_eq!(
        headers(&frame).link,
        Some(ethernet_header(EtherType::IPV6)),
        "Ethernet"
    );
    let (header, exts) = ipv6(&frame);
    assert_eq!(
        header,
        Ipv6Header {
            hop_limit: 2,
            ..ipv6_header(IpNumber::TCP, 20)
        },
        "IPv6"
    );
    assert_eq!(exts, Default::default(), "extension headers");
}

#[test]
fn ipv6_hop_by_hop_routing_and_destination_options() {
    let body = [
        ipv6_ext(43, 0),
        ipv6_ext(60, 2),
        ipv6_ext(IPPROTO_UDP, 1),
        udp(4000, 4001, b"ext"),
    ]
    .concat();
    let frame = Ipv6::new(0).frame(DST, SRC, &[], &body);
    let (header, exts) = ipv6(&frame);
    assert_eq!(
        header,
        ipv6_header(IpNumber::IPV6_HEADER_HOP_BY_HOP, 59),
        "IPv6"
    );
    // Each header: next header, length in 8 octets past the first eight,
    // then zeros.
    let raw = |next, len8: usize| Ipv6RawExtHeader::new_raw(next, &vec![0; 6 + 8 * len8]).unwrap();
    assert_eq!(
        exts.hop_by_hop_options,
        Some(raw(IpNumber::IPV6_ROUTE_HEADER, 0)),
        "hop-by-hop"
    );
    let routing = exts.routing.expect("routing header");
    assert_eq!(
        routing.routing,
        raw(IpNumber::IPV6_DESTINATION_OPTIONS, 2),
        "routing"
    );
    assert_eq!(
        routing.final_destination_options,
        Some(raw(IpNumber::UDP, 1)),
        "destination options"
    );
    assert_eq!(
        (exts.destination_options, exts.fragment),
        (None, None),
        "others"
    );
    assert_eq!(
        udp_header(&frame),
        UdpHeader {
            source_port: 4000,
            destination_port: 4001,
            length: 11,
            checksum: 0,
        },
        "UDP"
    );
}

#[test]
fn ipv6_fragment_header() {
    for (offset_flags, offset, more) in [(0x0011, 2, true), (0x0001, 0, true), (0x0000, 0, false)] {
        let body = [ipv6_frag(IPPROTO_UDP, offset_flags), udp(1, 2, b"f")].concat();
        let frame = Ipv6::new(44).frame(DST, SRC, &[], &body);
        let (header, exts) = ipv6(&frame);
        assert_eq!(
            header,
            ipv6_header(IpNumber::IPV6_FRAGMENTATION_HEADER, 17),
            "IPv6"
        );
        assert_eq!(
            exts.fragment,
            Some(Ipv6FragmentHeader {
                next_header: IpNumber::UDP,
                fragment_offset: IpFragOffset::try_new(offset).unwrap(),
                more_fragments: more,
                identification: 42,
            }),
            "fragment header {offset_flags:#06x}"
        );
    }
}

/// Craft leaves the TCP checksum zero: routers, the data plane among them,
/// never check it.
#[test]
fn tcp_header_every_field() {
    let frame = Ipv4::new(IPPROTO_TCP).frame(DST, SRC, &[], &tcp(40000, 443));
    let Some(TransportHeader::Tcp(tcp)) = headers(&frame).transport else {
        panic!("not TCP");
    };
    assert_eq!(
        tcp,
        TcpHeader {
            source_port: 40000,
            destination_port: 443,
            sequence_number: 1,
            acknowledgment_number: 0,
            ack: true,
            window_size: 0xffff,
            checksum: 0,
            urgent_pointer: 0,
            ..Default::default()
        },
        "TCP"
    );
    assert_eq!(frame.len(), 14 + 20 + 20, "frame length");
}

/// UDP length counts header and payload; the checksum is zero ("none"),
/// which IPv4 allows.
#[test]
fn udp_header_length_and_payload() {
    for payload in [&b""[..], b"x", &[0x5a; 1000]] {
        let frame = Ipv4::new(IPPROTO_UDP).frame(DST, SRC, &[], &udp(1234, 5678, payload));
        let want = UdpHeader {
            source_port: 1234,
            destination_port: 5678,
            length: 8 + payload.len() as u16,
            checksum: 0,
        };
        assert_eq!(udp_header(&frame), want, "UDP");
        assert_eq!(headers(&frame).payload.slice(), payload, "payload");
        assert_eq!(
            ipv4(&frame),
            ipv4_header(IpNumber::UDP, want.length),
            "IPv4"
        );
    }
}

/// BTH per IBTA vol. 1, 9.2: opcode; SE, M, pad count, TVer (all 0);
/// P_Key 0xffff; a reserved byte (FECN/BECN in RoCEv2); 24-bit
/// destination QP; AckReq (set) and 7 reserved bits; 24-bit PSN. Bits of
/// the QP or PSN past 24 are dropped.
#[test]
fn bth_is_laid_out_per_ibta() {
    assert_eq!(
        bth(0x0a, 0xff_abcdef, 0xee_123456, &[1, 2]),
        [
            0x0a, 0x00, 0xff, 0xff, 0x00, 0xab, 0xcd, 0xef, 0x80, 0x12, 0x34, 0x56, 1, 2
        ],
        "BTH"
    );
}

/// RETH per IBTA vol. 1, 9.3.3: 64-bit virtual address, 32-bit R_Key,
/// 32-bit DMA length, big-endian.
#[test]
fn reth_is_laid_out_per_ibta() {
    assert_eq!(
        reth(0x0102_0304_0506_0708, 0x1122_3344, 0x5566_7788),
        [
            0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66,
            0x77, 0x88
        ],
        "RETH"
    );
}

fn unhex(hex: &str) -> Vec<u8> {
    let digits: Vec<u8> = hex.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(core::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect()
}

/// A RoCEv2 WRITE ONLY on QP 0x12, PSN 0x345, 16 bytes of payload, over
/// `ip`, ICRC filled in.
fn roce_frame(ip: impl Fn(&[u8]) -> Vec<u8>) -> Vec<u8> {
    let payload: Vec<u8> = (0x10..0x20).chain([0; ICRC_LEN]).collect();
    let mut frame = ip(&udp(
        0xc001,
        ROCEV2_UDP_PORT,
        &bth(0x0a, 0x12, 0x345, &payload),
    ));
    fill_icrc(&mut frame);
    frame
}

const ICRC_LEN: usize = crate::packet::roce::ICRC_LEN;

/// Frames scapy 2.8 built from the same fields (`Ether/IP/UDP/BTH/Raw`),
/// ICRC included: scapy's `BTH.compute_icrc` masks and CRCs on its own.
const SCAPY_V4: &str = "02fab0000001 020000aa0001 0800
    4500003c 12344000 4011147a 0a000001 0a010002
    c00112b7 00280000
    0a00ffff 00000012 80000345
    10111213 14151617 18191a1b 1c1d1e1f
    1c572460";
const SCAPY_V6: &str = "02fab0000001 020000aa0001 86dd
    600abcde 00281140 20010db8000000000000000000000001 20010db8000100000000000000000002
    c00112b7 00280000
    0a00ffff 00000012 80000345
    10111213 14151617 18191a1b 1c1d1e1f
    1e80d52e";

#[test]
fn rocev2_frames_and_icrc_match_scapy() {
    let v4 = roce_frame(|l4| Ipv4::new(IPPROTO_UDP).frame(DST, SRC, &[], l4));
    assert_eq!(v4, unhex(SCAPY_V4), "IPv4 RoCEv2 frame");
    let v6 = roce_frame(|l4| Ipv6::new(IPPROTO_UDP).frame(DST, SRC, &[], l4));
    assert_eq!(v6, unhex(SCAPY_V6), "IPv6 RoCEv2 frame");
}

/// The ICRC covers everything from the IP header on but the fields a
/// router may change: rewriting those leaves it as it was, and any other
/// byte changes it.
#[test]
fn icrc_ignores_exactly_the_variant_fields() {
    // (frame, offsets a router may change)
    let v4 = unhex(SCAPY_V4);
    let v4_variant = [14 + 1, 14 + 8, 14 + 10, 14 + 11, 34 + 6, 34 + 7, 42 + 4];
    let v6 = unhex(SCAPY_V6);
    let v6_variant = [14, 14 + 1, 14 + 2, 14 + 3, 14 + 7, 54 + 6, 54 + 7, 62 + 4];
    for (frame, variant) in [(v4, &v4_variant[..]), (v6, &v6_variant[..])] {
        let icrc_at = frame.len() - ICRC_LEN;
        let mut unchanged = frame.clone();
        fill_icrc(&mut unchanged);
        for at in 14..icrc_at {
            let mut changed = frame.clone();
            // IPv6 version nibble stays: it says which masks apply.
            changed[at] ^= if at == 14 && frame[14] >> 4 == 6 {
                0x0f
            } else {
                0xff
            };
            fill_icrc(&mut changed);
            let same = changed[icrc_at..] == unchanged[icrc_at..];
            assert_eq!(same, variant.contains(&at), "byte {at} changed");
        }
    }
}
