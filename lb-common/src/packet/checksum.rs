//! Incremental Internet checksum update (RFC 1624) and the L2 header a next
//! hop gets.

use crate::packet::parse::{ETH_HLEN, ETH_P_8021Q, VLAN_HLEN};

/// New checksum after a 16-bit header word changes from `old` to `new`
/// (RFC 1624, eqn. 3: HC' = ~(~HC + ~m + m')). All values are the words as
/// read in network order.
#[inline(always)]
pub const fn csum_replace16(csum: u16, old: u16, new: u16) -> u16 {
    let mut sum = (!csum) as u32 + (!old) as u32 + new as u32;
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    !(sum as u16)
}

/// IPv4 header checksum after decrementing TTL by one. `ttl_proto` is the
/// header word holding TTL (high byte) and protocol.
#[inline(always)]
pub const fn ipv4_csum_after_ttl_decrement(csum: u16, ttl_proto: u16) -> u16 {
    csum_replace16(csum, ttl_proto, ttl_proto.wrapping_sub(0x0100))
}

/// Longest L2 header the program writes: Ethernet plus one 802.1Q tag.
pub const L2_OUT_MAX: usize = ETH_HLEN + VLAN_HLEN;

/// The Ethernet header (and 802.1Q tag when the next hop has a VLAN) a
/// routed packet leaves with; ingress tags never carry over, as in any
/// router; `vlan` 0 sends untagged. Returns the header buffer and its
/// length.
#[inline(always)]
pub fn egress_l2_header(
    dst_mac: &[u8; 6],
    src_mac: &[u8; 6],
    vlan: u16,
    ethertype: u16,
) -> ([u8; L2_OUT_MAX], usize) {
    let mut h = [0u8; L2_OUT_MAX];
    h[..6].copy_from_slice(dst_mac);
    h[6..12].copy_from_slice(src_mac);
    if vlan != 0 {
        h[12..14].copy_from_slice(&ETH_P_8021Q.to_be_bytes());
        h[14..16].copy_from_slice(&(vlan & 0x0fff).to_be_bytes());
        h[16..18].copy_from_slice(&ethertype.to_be_bytes());
        (h, ETH_HLEN + VLAN_HLEN)
    } else {
        h[12..14].copy_from_slice(&ethertype.to_be_bytes());
        (h, ETH_HLEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Full recomputation, the reference the incremental form must match.
    fn ipv4_header_checksum(h: &[u8]) -> u16 {
        let mut sum = 0u32;
        for (i, w) in h.chunks(2).enumerate() {
            if i != 5 {
                sum += u16::from_be_bytes([w[0], w[1]]) as u32;
            }
        }
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        !(sum as u16)
    }

    #[test]
    fn ttl_decrement_matches_recomputation() {
        let mut h = [
            0x45, 0, 0, 0x54, 0xab, 0xcd, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 1, 0, 2,
        ];
        for ttl in 2..=255u8 {
            for (a, b) in [(0u8, 0u8), (0xff, 0xff), (0x12, 0x80), (0xfe, 0x01)] {
                h[8] = ttl;
                h[4] = a;
                h[5] = b;
                let csum = ipv4_header_checksum(&h);
                let ttl_proto = u16::from_be_bytes([h[8], h[9]]);
                h[8] = ttl - 1;
                assert_eq!(
                    ipv4_csum_after_ttl_decrement(csum, ttl_proto),
                    ipv4_header_checksum(&h),
                    "ttl {ttl} id {a:#x}{b:02x}"
                );
            }
        }
    }

    const DST: [u8; 6] = [0x02, 0, 0, 0, 0, 0xaa];
    const SRC: [u8; 6] = [0x02, 0, 0, 0, 0, 0xbb];

    #[test]
    fn untagged_egress_header() {
        let (h, len) = egress_l2_header(&DST, &SRC, 0, 0x0800);
        assert_eq!(len, 14);
        assert_eq!(
            &h[..len],
            &[2, 0, 0, 0, 0, 0xaa, 2, 0, 0, 0, 0, 0xbb, 0x08, 0x00]
        );
    }

    #[test]
    fn tagged_egress_header() {
        let (h, len) = egress_l2_header(&DST, &SRC, 100, 0x86dd);
        assert_eq!(len, 18);
        assert_eq!(
            &h[..len],
            &[
                2, 0, 0, 0, 0, 0xaa, 2, 0, 0, 0, 0, 0xbb, 0x81, 0x00, 0x00, 100, 0x86, 0xdd
            ]
        );
    }
}
