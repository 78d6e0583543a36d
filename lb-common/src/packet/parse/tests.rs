use super::*;
use crate::packet::craft::{self, Ipv4, Ipv6, ipv6_ext as ext, ipv6_frag as frag_hdr, tcp, udp};
use std::vec::Vec;

const DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const SRC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];

fn eth(ethertype: u16) -> Vec<u8> {
    craft::ethernet(DST_MAC, SRC_MAC, &[], ethertype, &[])
}

fn tagged(tpids: &[u16], ethertype: u16) -> Vec<u8> {
    let tags: Vec<(u16, u16)> = tpids.iter().zip(100..).map(|(t, vid)| (*t, vid)).collect();
    craft::ethernet(DST_MAC, SRC_MAC, &tags, ethertype, &[])
}

fn ipv4(proto: u8, options: &[u8], l4: &[u8], frag: u16) -> Vec<u8> {
    Ipv4 {
        options: options.to_vec(),
        frag,
        ..Ipv4::new(proto)
    }
    .build(l4)
}

fn ipv6(next: u8, ext_and_l4: &[u8]) -> Vec<u8> {
    Ipv6::new(next).build(ext_and_l4)
}

fn bth(opcode: u8, qp: u32, psn: u32) -> Vec<u8> {
    craft::bth(opcode, qp, psn, &[])
}

fn frame(mut l2: Vec<u8>, l3: Vec<u8>) -> Vec<u8> {
    l2.extend_from_slice(&l3);
    l2
}

fn v4_udp() -> Vec<u8> {
    frame(eth(ETH_P_IPV4), ipv4(17, &[], &udp(1000, 2000, b"hi"), 0))
}

#[test]
fn ipv4_udp_fields() {
    let p = parse(&v4_udp()[..]).unwrap();
    assert_eq!(p.l3_offset, 14);
    assert_eq!(p.vlan_tags, 0);
    assert_eq!(p.ttl, 64);
    assert!(!p.fragment);
    assert!(!p.flow.is_ipv6);
    assert_eq!(&p.flow.src[..4], &[10, 0, 0, 1]);
    assert_eq!(&p.flow.dst[..4], &[10, 1, 0, 2]);
    assert_eq!(&p.flow.src[4..], &[0; 12]);
    assert_eq!(
        (p.flow.protocol, p.flow.src_port, p.flow.dst_port),
        (17, 1000, 2000)
    );
    assert_eq!(p.bth, None);
}

#[test]
fn ethernet_padding_after_the_datagram_is_ignored() {
    let mut f = v4_udp();
    f.resize(60, 0xee);
    let p = parse(&f[..]).unwrap();
    assert_eq!(p.flow.dst_port, 2000);
}

#[test]
fn short_frames_are_l2_truncated() {
    let f = v4_udp();
    for len in 0..ETH_HLEN {
        assert_eq!(parse(&f[..len]), Err(Reason::L2Truncated), "len {len}");
    }
}

#[test]
fn multicast_and_broadcast_go_to_the_kernel() {
    let mut f = v4_udp();
    f[..6].copy_from_slice(&[0x01, 0x00, 0x5e, 0, 0, 1]);
    assert_eq!(parse(&f[..]), Err(Reason::NotUnicast));
    f[..6].copy_from_slice(&[0xff; 6]);
    assert_eq!(parse(&f[..]), Err(Reason::NotUnicast));
}

#[test]
fn non_ip_is_not_ip() {
    let mut f = eth(0x0806);
    f.extend_from_slice(&[0; 28]);
    assert_eq!(parse(&f[..]), Err(Reason::NotIp));
    let f = frame(tagged(&[ETH_P_8021Q], 0x88cc), std::vec![0; 30]);
    assert_eq!(parse(&f[..]), Err(Reason::NotIp));
}

#[test]
fn single_vlan_tag() {
    let f = frame(
        tagged(&[ETH_P_8021Q], ETH_P_IPV4),
        ipv4(17, &[], &udp(1, 2, &[]), 0),
    );
    let p = parse(&f[..]).unwrap();
    assert_eq!((p.l3_offset, p.vlan_tags), (18, 1));
    assert_eq!(p.flow.dst_port, 2);
}

#[test]
fn qinq_and_double_dot1q() {
    for outer in [ETH_P_8021AD, ETH_P_8021Q] {
        let f = frame(
            tagged(&[outer, ETH_P_8021Q], ETH_P_IPV6),
            ipv6(17, &udp(7, 8, &[])),
        );
        let p = parse(&f[..]).unwrap();
        assert_eq!((p.l3_offset, p.vlan_tags), (22, 2), "outer {outer:#x}");
        assert_eq!(p.flow.src_port, 7);
    }
}

#[test]
fn three_tags_are_unsupported() {
    let f = frame(
        tagged(&[ETH_P_8021AD, ETH_P_8021Q, ETH_P_8021Q], ETH_P_IPV4),
        ipv4(17, &[], &udp(1, 2, &[]), 0),
    );
    assert_eq!(parse(&f[..]), Err(Reason::Unsupported));
}

#[test]
fn truncated_vlan_tags() {
    let f = frame(tagged(&[ETH_P_8021AD, ETH_P_8021Q], ETH_P_IPV4), Vec::new());
    for len in ETH_HLEN..22 {
        assert_eq!(parse(&f[..len]), Err(Reason::L2Truncated), "len {len}");
    }
}

#[test]
fn ipv4_truncated_or_inconsistent_is_malformed() {
    let f = v4_udp();
    for len in ETH_HLEN..ETH_HLEN + 20 {
        assert_eq!(parse(&f[..len]), Err(Reason::L3Malformed), "len {len}");
    }
    // Total length says more than the frame holds.
    assert_eq!(parse(&f[..f.len() - 1]), Err(Reason::L3Malformed));
    let mut bad = f.clone();
    bad[14] = 0x65; // version 6 in an IPv4 ethertype
    assert_eq!(parse(&bad[..]), Err(Reason::L3Malformed));
    let mut bad = f.clone();
    bad[14] = 0x44; // IHL 4 < 5
    assert_eq!(parse(&bad[..]), Err(Reason::L3Malformed));
    let mut bad = f.clone();
    bad[16..18].copy_from_slice(&19u16.to_be_bytes()); // total length < header
    assert_eq!(parse(&bad[..]), Err(Reason::L3Malformed));
}

#[test]
fn ipv4_options_are_skipped() {
    let opts = [0x94, 0x04, 0, 0, 0x01, 0x01, 0x01, 0x00]; // router alert, NOPs, EOL
    let f = frame(eth(ETH_P_IPV4), ipv4(6, &opts, &tcp(443, 5555), 0));
    let p = parse(&f[..]).unwrap();
    assert_eq!(
        (p.flow.protocol, p.flow.src_port, p.flow.dst_port),
        (6, 443, 5555)
    );
    // Largest header: 40 bytes of options.
    let f = frame(eth(ETH_P_IPV4), ipv4(17, &[1; 40], &udp(9, 10, &[]), 0));
    assert_eq!(parse(&f[..]).unwrap().flow.dst_port, 10);
}

#[test]
fn ipv4_fragments_carry_no_ports() {
    for frag in [0x2000u16, 0x0001, 0x2005, 0x1fff] {
        let f = frame(
            eth(ETH_P_IPV4),
            ipv4(17, &[], &udp(1000, 4791, &bth(4, 9, 1)), frag),
        );
        let p = parse(&f[..]).unwrap();
        assert!(p.fragment, "frag {frag:#x}");
        assert_eq!(
            (p.flow.protocol, p.flow.src_port, p.flow.dst_port),
            (17, 0, 0)
        );
        assert_eq!((p.flow.dest_qp, p.bth), (0, None));
    }
    // DF alone is no fragment.
    let f = frame(eth(ETH_P_IPV4), ipv4(17, &[], &udp(1, 2, &[]), 0x4000));
    assert!(!parse(&f[..]).unwrap().fragment);
}

#[test]
fn tcp_ports_and_truncation() {
    let f = frame(eth(ETH_P_IPV4), ipv4(6, &[], &tcp(1234, 80), 0));
    let p = parse(&f[..]).unwrap();
    assert_eq!((p.flow.src_port, p.flow.dst_port), (1234, 80));
    let short = frame(eth(ETH_P_IPV4), ipv4(6, &[], &tcp(1234, 80)[..19], 0));
    assert_eq!(parse(&short[..]), Err(Reason::L4Truncated));
}

#[test]
fn udp_truncation_inside_the_datagram_even_with_padding() {
    let mut f = frame(eth(ETH_P_IPV4), ipv4(17, &[], &udp(1, 2, &[])[..7], 0));
    assert_eq!(parse(&f[..]), Err(Reason::L4Truncated));
    // Ethernet padding must not be read as the rest of the UDP header.
    f.resize(60, 0);
    assert_eq!(parse(&f[..]), Err(Reason::L4Truncated));
}

#[test]
fn rocev2_bth() {
    let f = frame(
        eth(ETH_P_IPV4),
        ipv4(
            17,
            &[],
            &udp(
                0xc123,
                ROCEV2_UDP_PORT,
                &bth(0x0a, 0x00ab_cdef, 0x0012_3456),
            ),
            0,
        ),
    );
    let p = parse(&f[..]).unwrap();
    assert_eq!(
        p.bth,
        Some(Bth {
            opcode: 0x0a,
            dest_qp: 0x00ab_cdef,
            psn: 0x0012_3456
        })
    );
    assert_eq!(p.flow.dest_qp, 0x00ab_cdef);
}

#[test]
fn rocev2_truncated_bth() {
    let b = bth(0x06, 5, 6);
    let f = frame(
        eth(ETH_P_IPV4),
        ipv4(17, &[], &udp(1, ROCEV2_UDP_PORT, &b[..11]), 0),
    );
    assert_eq!(parse(&f[..]), Err(Reason::L4Truncated));
}

#[test]
fn udp_on_other_ports_has_no_bth() {
    let f = frame(
        eth(ETH_P_IPV4),
        ipv4(17, &[], &udp(4791, 4790, &bth(4, 9, 1)), 0),
    );
    let p = parse(&f[..]).unwrap();
    assert_eq!((p.bth, p.flow.dest_qp), (None, 0));
}

#[test]
fn unknown_l4_has_no_ports() {
    let f = frame(eth(ETH_P_IPV4), ipv4(47, &[], &[0; 8], 0));
    let p = parse(&f[..]).unwrap();
    assert_eq!(
        (p.flow.protocol, p.flow.src_port, p.flow.dst_port),
        (47, 0, 0)
    );
}

#[test]
fn ipv6_udp_fields() {
    let f = frame(
        eth(ETH_P_IPV6),
        ipv6(17, &udp(5, ROCEV2_UDP_PORT, &bth(0x04, 77, 3))),
    );
    let p = parse(&f[..]).unwrap();
    assert!(p.flow.is_ipv6);
    assert_eq!(p.ttl, 64);
    assert_eq!(p.flow.src[15], 1);
    assert_eq!(p.flow.dst[5], 1);
    assert_eq!(p.bth.unwrap().dest_qp, 77);
}

#[test]
fn ipv6_extension_chain() {
    let mut body = ext(43, 0); // hop-by-hop -> routing
    body.extend(ext(60, 2)); // routing (24 bytes) -> destination options
    body.extend(ext(6, 1)); // destination options -> TCP
    body.extend(tcp(22, 2222));
    let f = frame(eth(ETH_P_IPV6), ipv6(0, &body));
    let p = parse(&f[..]).unwrap();
    assert_eq!(
        (p.flow.protocol, p.flow.src_port, p.flow.dst_port),
        (6, 22, 2222)
    );
}

#[test]
fn ipv6_fragments() {
    // First fragment (offset 0, M set) and a later one: L3 only, protocol
    // from the fragment header.
    for of in [0x0001u16, 0x0008, 0x00a9] {
        let mut body = frag_hdr(17, of);
        body.extend(udp(1, 2, &[0; 8]));
        let f = frame(eth(ETH_P_IPV6), ipv6(44, &body));
        let p = parse(&f[..]).unwrap();
        assert!(p.fragment, "{of:#x}");
        assert_eq!((p.flow.protocol, p.flow.src_port), (17, 0));
    }
    // Atomic fragment: parsed through.
    let mut body = frag_hdr(17, 0);
    body.extend(udp(1, 2, &[]));
    let f = frame(eth(ETH_P_IPV6), ipv6(44, &body));
    let p = parse(&f[..]).unwrap();
    assert!(!p.fragment);
    assert_eq!(p.flow.dst_port, 2);
}

/// A chain of `headers` destination-options headers, then UDP.
fn ipv6_chain(headers: usize) -> Vec<u8> {
    let mut body = Vec::new();
    for i in 0..headers {
        let next = if i + 1 == headers { IPPROTO_UDP } else { 60 };
        body.extend(ext(next, 0));
    }
    body.extend(udp(1, 2, &[]));
    frame(eth(ETH_P_IPV6), ipv6(60, &body))
}

#[test]
fn ipv6_chain_of_the_limit_is_parsed_and_one_more_is_unsupported() {
    let p = parse(&ipv6_chain(MAX_IPV6_EXT_HEADERS)[..]).unwrap();
    assert_eq!(
        (p.flow.protocol, p.flow.src_port, p.flow.dst_port),
        (IPPROTO_UDP, 1, 2)
    );
    assert_eq!(
        parse(&ipv6_chain(MAX_IPV6_EXT_HEADERS + 1)[..]),
        Err(Reason::Unsupported)
    );
}

#[test]
fn ipv6_malformed() {
    let f = frame(eth(ETH_P_IPV6), ipv6(17, &udp(1, 2, &[])));
    for len in ETH_HLEN..ETH_HLEN + 40 {
        assert_eq!(parse(&f[..len]), Err(Reason::L3Malformed), "len {len}");
    }
    assert_eq!(parse(&f[..f.len() - 1]), Err(Reason::L3Malformed));
    let mut bad = f.clone();
    bad[14] = 0x40;
    assert_eq!(parse(&bad[..]), Err(Reason::L3Malformed));
    // Extension header running past the datagram.
    let f = frame(eth(ETH_P_IPV6), ipv6(0, &ext(17, 3)[..16]));
    assert_eq!(parse(&f[..]), Err(Reason::L3Malformed));
}

#[test]
fn ipv6_jumbogram_is_unsupported() {
    let mut f = frame(eth(ETH_P_IPV6), ipv6(17, &udp(1, 2, &[])));
    f[18..20].copy_from_slice(&[0, 0]);
    assert_eq!(parse(&f[..]), Err(Reason::Unsupported));
}

#[test]
fn ipv6_no_next_header_hashes_l3() {
    let f = frame(eth(ETH_P_IPV6), ipv6(59, &[0; 8]));
    let p = parse(&f[..]).unwrap();
    assert_eq!((p.flow.protocol, p.flow.src_port), (59, 0));
}

/// `tcp(1234, 80)` with its data offset (in 32-bit words) set to `words`
/// and `options` after the fixed header.
fn tcp_with_offset(words: u8, options: &[u8]) -> Vec<u8> {
    let mut t = tcp(1234, 80);
    t[12] = words << 4;
    t.extend_from_slice(options);
    t
}

#[test]
fn tcp_data_offset_below_five_words_is_l4_truncated() {
    for words in 0..5 {
        let f = frame(
            eth(ETH_P_IPV4),
            ipv4(6, &[], &tcp_with_offset(words, &[]), 0),
        );
        assert_eq!(parse(&f[..]), Err(Reason::L4Truncated), "offset {words}");
    }
}

#[test]
fn tcp_data_offset_past_the_datagram_is_l4_truncated() {
    // Six words with four bytes of options: fits exactly.
    let fits = tcp_with_offset(6, &[1, 1, 1, 1]);
    let f = frame(eth(ETH_P_IPV6), ipv6(6, &fits));
    assert_eq!(parse(&f[..]).unwrap().flow.dst_port, 80);
    // Seven words over the same 24 bytes, and fifteen: the options the
    // offset claims are not in the datagram, even with padding after it.
    for words in [7, 15] {
        let mut f = frame(eth(ETH_P_IPV6), ipv6(6, &tcp_with_offset(words, &[1; 4])));
        assert_eq!(parse(&f[..]), Err(Reason::L4Truncated), "offset {words}");
        f.resize(f.len() + 64, 0);
        assert_eq!(
            parse(&f[..]),
            Err(Reason::L4Truncated),
            "padded, offset {words}"
        );
    }
}

/// An IPv4 UDP frame whose UDP length field says `udp_len`, over an 8-byte
/// header and `payload`.
fn udp_claiming(udp_len: u16, payload: &[u8]) -> Vec<u8> {
    let mut u = udp(1000, 2000, payload);
    u[4..6].copy_from_slice(&udp_len.to_be_bytes());
    frame(eth(ETH_P_IPV4), ipv4(17, &[], &u, 0))
}

#[test]
fn udp_length_below_its_header_or_past_the_datagram_is_l4_truncated() {
    for udp_len in [0u16, 1, 7, 14, 0xffff] {
        let mut f = udp_claiming(udp_len, b"datum");
        assert_eq!(parse(&f[..]), Err(Reason::L4Truncated), "length {udp_len}");
        f.resize(f.len() + 64, 0);
        assert_eq!(
            parse(&f[..]),
            Err(Reason::L4Truncated),
            "padded, length {udp_len}"
        );
    }
}

#[test]
fn udp_length_up_to_the_datagram_is_valid() {
    for udp_len in [8u16, 9, 12, 13] {
        let p = parse(&udp_claiming(udp_len, b"datum")[..]).unwrap();
        assert_eq!(
            (p.flow.src_port, p.flow.dst_port),
            (1000, 2000),
            "length {udp_len}"
        );
    }
}

#[test]
fn bth_past_the_udp_length_is_l4_truncated() {
    let mut u = udp(1, ROCEV2_UDP_PORT, &bth(0x0a, 5, 6));
    // The BTH is in the IP datagram, but the UDP length stops one byte
    // short of its end.
    u[4..6].copy_from_slice(&19u16.to_be_bytes());
    let f = frame(eth(ETH_P_IPV4), ipv4(17, &[], &u, 0));
    assert_eq!(parse(&f[..]), Err(Reason::L4Truncated));
    u[4..6].copy_from_slice(&20u16.to_be_bytes());
    let f = frame(eth(ETH_P_IPV4), ipv4(17, &[], &u, 0));
    assert_eq!(parse(&f[..]).unwrap().bth.map(|b| b.dest_qp), Some(5));
}

#[test]
fn ipv6_extension_header_in_the_padding_is_malformed() {
    // The hop-by-hop header says 16 bytes but the datagram holds 8; the
    // padding after it reads as a non-first fragment header, which must not
    // make the packet a fragment to forward.
    let mut f = frame(eth(ETH_P_IPV6), ipv6(0, &ext(44, 1)[..8]));
    f.extend_from_slice(&[0; 8]);
    f.extend_from_slice(&frag_hdr(17, 0x0008));
    assert_eq!(parse(&f[..]), Err(Reason::L3Malformed));
    // A fragment header that starts inside the datagram and ends past it.
    let mut f = frame(eth(ETH_P_IPV6), ipv6(44, &frag_hdr(17, 0x0008)[..4]));
    f.extend_from_slice(&[0; 16]);
    assert_eq!(parse(&f[..]), Err(Reason::L3Malformed));
}

#[test]
fn a_fragment_header_past_the_limit_is_unsupported_not_a_fragment() {
    // Six destination options headers, the last pointing at a fragment
    // header that is not the first fragment.
    let mut body = Vec::new();
    for _ in 1..MAX_IPV6_EXT_HEADERS {
        body.extend(ext(60, 0));
    }
    body.extend(ext(44, 0));
    body.extend(frag_hdr(IPPROTO_UDP, 0x0008));
    body.extend(udp(1, 2, &[]));
    let f = frame(eth(ETH_P_IPV6), ipv6(60, &body));
    assert_eq!(parse(&f[..]), Err(Reason::Unsupported));
}
