//! The two frames a probe sends, byte for byte: an ARP request (RFC 826)
//! and an ICMPv6 neighbour solicitation (RFC 4861, 4.3).

use std::net::{Ipv4Addr, Ipv6Addr};

const ETH_P_ARP: u16 = 0x0806;
const ETH_P_IPV6: u16 = 0x86dd;
const ARPHRD_ETHER: u16 = 1;
const ARPOP_REQUEST: u16 = 1;
const IPPROTO_ICMPV6: u8 = 58;
const ND_NEIGHBOR_SOLICIT: u8 = 135;
const ND_OPT_SOURCE_LINKADDR: u8 = 1;
/// A neighbour discovery message with any other hop limit did not come
/// from the link and is dropped (RFC 4861, 7.1.1).
const ND_HOP_LIMIT: u8 = 255;

/// Ethernet, then ARP for IPv4 over Ethernet.
pub const ARP_REQUEST_LEN: usize = 14 + 28;
/// Ethernet, IPv6, then the solicitation (8 + the target's 16 bytes) with
/// its source link-layer address option (8).
pub const SOLICITATION_LEN: usize = 14 + 40 + 32;

/// A broadcast "who has `target`? tell `sender` at `sender_mac`". Its
/// sender fields let the peer answer by unicast, and an answer to it is
/// what the kernel needs to take a new MAC for `target`.
pub fn arp_request(
    sender_mac: [u8; 6],
    sender: Ipv4Addr,
    target: Ipv4Addr,
) -> [u8; ARP_REQUEST_LEN] {
    let mut frame = [0; ARP_REQUEST_LEN];
    ethernet(&mut frame, [0xff; 6], sender_mac, ETH_P_ARP);
    let arp = &mut frame[14..];
    arp[0..2].copy_from_slice(&ARPHRD_ETHER.to_be_bytes());
    arp[2..4].copy_from_slice(&0x0800u16.to_be_bytes());
    arp[4] = 6;
    arp[5] = 4;
    arp[6..8].copy_from_slice(&ARPOP_REQUEST.to_be_bytes());
    arp[8..14].copy_from_slice(&sender_mac);
    arp[14..18].copy_from_slice(&sender.octets());
    // The target hardware address stays zero: that is what is asked.
    arp[24..28].copy_from_slice(&target.octets());
    frame
}

/// A solicitation for `target` to its solicited-node multicast group, from
/// `source` with `source_mac` as source link-layer address option: the
/// peer answers `source` directly with a solicited advertisement whose
/// override flag makes the kernel take a new MAC at once.
pub fn neighbour_solicitation(
    source_mac: [u8; 6],
    source: Ipv6Addr,
    target: Ipv6Addr,
) -> [u8; SOLICITATION_LEN] {
    let group = solicited_node(target);
    let mut group_mac = [0x33, 0x33, 0, 0, 0, 0];
    group_mac[2..].copy_from_slice(&group.octets()[12..]);
    let mut frame = [0; SOLICITATION_LEN];
    ethernet(&mut frame, group_mac, source_mac, ETH_P_IPV6);
    let (ip, icmp) = frame[14..].split_at_mut(40);
    ip[0] = 6 << 4;
    ip[4..6].copy_from_slice(&(icmp.len() as u16).to_be_bytes());
    ip[6] = IPPROTO_ICMPV6;
    ip[7] = ND_HOP_LIMIT;
    ip[8..24].copy_from_slice(&source.octets());
    ip[24..40].copy_from_slice(&group.octets());
    icmp[0] = ND_NEIGHBOR_SOLICIT;
    // Code, checksum and the reserved word stay zero until the sum.
    icmp[8..24].copy_from_slice(&target.octets());
    icmp[24] = ND_OPT_SOURCE_LINKADDR;
    icmp[25] = 1; // in units of 8 bytes
    icmp[26..32].copy_from_slice(&source_mac);
    let checksum = icmpv6_checksum(source, group, icmp);
    icmp[2..4].copy_from_slice(&checksum.to_be_bytes());
    frame
}

/// `ff02::1:ffXX:XXXX` with the target's low 24 bits: the group every
/// host joins for each of its addresses (RFC 4291, 2.7.1).
fn solicited_node(target: Ipv6Addr) -> Ipv6Addr {
    let low = target.to_bits() & 0xff_ffff;
    Ipv6Addr::from_bits(0xff02_0000_0000_0000_0000_0001_ff00_0000 | low)
}

fn ethernet(frame: &mut [u8], dst: [u8; 6], src: [u8; 6], ethertype: u16) {
    frame[0..6].copy_from_slice(&dst);
    frame[6..12].copy_from_slice(&src);
    frame[12..14].copy_from_slice(&ethertype.to_be_bytes());
}

/// The one's complement sum over the IPv6 pseudo-header (RFC 8200, 8.1)
/// and `message`, whose checksum field is zero.
fn icmpv6_checksum(source: Ipv6Addr, destination: Ipv6Addr, message: &[u8]) -> u16 {
    let length = message.len() as u32;
    let pseudo = [
        &source.octets()[..],
        &destination.octets(),
        &length.to_be_bytes(),
        &[0, 0, 0, IPPROTO_ICMPV6],
    ];
    let mut sum: u32 = pseudo
        .into_iter()
        .chain([message])
        .flat_map(|part| part.chunks(2))
        .map(|pair| u32::from(u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    const MAC: [u8; 6] = [0x32, 0x7f, 0x11, 0x31, 0xd7, 0x5a];

    #[test]
    fn an_arp_request_asks_everyone_for_the_target_and_gives_the_sender() {
        let frame = arp_request(
            MAC,
            "198.18.2.1".parse().unwrap(),
            "198.18.2.2".parse().unwrap(),
        );
        assert_eq!(
            hex(&frame),
            concat!(
                "ffffffffffff",
                "327f1131d75a",
                "0806",
                "0001",
                "0800",
                "06",
                "04",
                "0001",
                "327f1131d75a",
                "c6120201",
                "000000000000",
                "c6120202",
            )
        );
    }

    /// The expected bytes are a frame built independently (by hand, in
    /// Python) that a Linux 6.18 peer answered with a solicited, override
    /// advertisement.
    #[test]
    fn a_solicitation_goes_to_the_solicited_node_group_with_a_valid_checksum() {
        let frame = neighbour_solicitation(
            MAC,
            "fe80::307f:11ff:fe31:d75a".parse().unwrap(),
            "fd00:99::2".parse().unwrap(),
        );
        assert_eq!(
            hex(&frame),
            concat!(
                "3333ff000002",
                "327f1131d75a",
                "86dd",
                "60000000",
                "0020",
                "3a",
                "ff",
                "fe80000000000000307f11fffe31d75a",
                "ff0200000000000000000001ff000002",
                "87",
                "00",
                "4a6a",
                "00000000",
                "fd000099000000000000000000000002",
                "01",
                "01",
                "327f1131d75a",
            )
        );
    }

    #[test]
    fn the_solicited_node_group_keeps_the_low_24_bits() {
        let target: Ipv6Addr = "2001:db8::12:3456:789a".parse().unwrap();
        assert_eq!(
            solicited_node(target),
            "ff02::1:ff56:789a".parse::<Ipv6Addr>().unwrap()
        );
    }

    #[test]
    fn a_message_with_its_checksum_in_place_sums_to_zero() {
        let (source, target) = ("fe80::1".parse().unwrap(), "fe80::2".parse().unwrap());
        let frame = neighbour_solicitation(MAC, source, target);
        assert_eq!(
            icmpv6_checksum(source, solicited_node(target), &frame[54..]),
            0
        );
    }
}
