//! Header parsing: Ethernet (up to two VLAN tags), IPv4 (with options),
//! IPv6 (with extension headers), TCP, UDP and the RoCEv2 BTH.
//!
//! The parser reads through [`PacketView`], which the XDP program implements
//! with explicit `data_end` checks the verifier understands and the host
//! implements over a slice, so the same code is unit-tested here and runs in
//! the kernel.

use crate::verdict::Reason;
use crate::words::word64;

pub const ETH_HLEN: usize = 14;
pub const VLAN_HLEN: usize = 4;
pub const ETH_P_IPV4: u16 = 0x0800;
pub const ETH_P_IPV6: u16 = 0x86dd;
pub const ETH_P_8021Q: u16 = 0x8100;
pub const ETH_P_8021AD: u16 = 0x88a8;
pub const IPPROTO_TCP: u8 = 6;
pub const IPPROTO_UDP: u8 = 17;
pub const ROCEV2_UDP_PORT: u16 = 4791;
pub const BTH_LEN: usize = 12;
pub const IPV4_MIN_HLEN: usize = 20;
pub const IPV6_HLEN: usize = 40;
const TCP_MIN_HLEN: usize = 20;
const UDP_HLEN: usize = 8;
/// Extension headers walked before giving the packet to the kernel; real
/// traffic carries one or two.
pub const MAX_IPV6_EXT_HEADERS: usize = 6;

/// Bounds-checked reads from a packet.
pub trait PacketView {
    /// Frame length in bytes.
    fn len(&self) -> usize;
    /// `N` bytes at `offset`, or `None` when the frame ends first.
    fn bytes<const N: usize>(&self, offset: usize) -> Option<[u8; N]>;

    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl PacketView for [u8] {
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }

    fn bytes<const N: usize>(&self, offset: usize) -> Option<[u8; N]> {
        self.get(offset..offset.checked_add(N)?)?.try_into().ok()
    }
}

/// The header fields a flow hash may use. IPv4 addresses sit in the first
/// four bytes of `src`/`dst`; the rest stays zero.
// Addresses first and 8-aligned, so that [`FlowFields::clear`] is a few
// wide stores.
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FlowFields {
    pub src: [u8; 16],
    pub dst: [u8; 16],
    /// RoCEv2 destination QP (24 bits), zero for other traffic.
    pub dest_qp: u32,
    /// Zero when the packet has no L4 ports (fragments, other protocols).
    pub src_port: u16,
    pub dst_port: u16,
    pub protocol: u8,
    pub is_ipv6: bool,
}

impl FlowFields {
    /// Back to [`FlowFields::default`], in 64-bit words. LLVM merges plain
    /// zero stores into a memset, which the BPF backend makes a call to a
    /// byte-at-a-time loop (42 rounds per packet); volatile stores stay as
    /// they are written.
    #[inline(always)]
    pub fn clear(&mut self) {
        let words = (self as *mut Self).cast::<u64>();
        let mut i = 0;
        while i < size_of::<Self>() / 8 {
            // SAFETY: the struct is a whole number of aligned words, and
            // all zeros is its default.
            unsafe { core::ptr::write_volatile(words.add(i), 0) };
            i += 1;
        }
    }

    /// Sets the IPv6 addresses from the header's 32 bytes `src | dst`, in
    /// 64-bit words: a plain copy becomes a byte-at-a-time memcpy call,
    /// as in [`FlowFields::clear`].
    #[inline(always)]
    pub fn set_ipv6_addresses(&mut self, addresses: &[u8; 32]) {
        let words = (self as *mut Self).cast::<u64>();
        let mut i = 0;
        while i < 4 {
            let word = word64(addresses, i);
            // SAFETY: `src` and `dst` are the struct's first four aligned
            // words.
            unsafe { core::ptr::write_volatile(words.add(i), word) };
            i += 1;
        }
        self.is_ipv6 = true;
    }
}

/// RoCEv2 Base Transport Header fields.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bth {
    pub opcode: u8,
    pub dest_qp: u32,
    pub psn: u32,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Parsed {
    /// Offset of the IP header: 14 plus 4 per VLAN tag.
    pub l3_offset: usize,
    pub vlan_tags: u8,
    /// TTL or hop limit.
    pub ttl: u8,
    /// Any fragment of a fragmented datagram; its hash uses L3 fields only
    /// so that all fragments of a datagram take one path.
    pub fragment: bool,
    pub flow: FlowFields,
    pub bth: Option<Bth>,
}

#[inline(always)]
fn be16(b: [u8; 2]) -> u16 {
    u16::from_be_bytes(b)
}

/// Parses a frame up to the headers the balancer hashes on. The error is the
/// verdict reason for a frame that cannot be forwarded.
#[inline(always)]
pub fn parse<P: PacketView + ?Sized>(pkt: &P) -> Result<Parsed, Reason> {
    let mut parsed = Parsed::default();
    parse_into(pkt, &mut parsed)?;
    Ok(parsed)
}

/// [`parse`] into `parsed`, field by field: the data plane parses into a
/// map slot, and a whole-struct copy would store the undefined payload of
/// `bth: None`, which the verifier refuses to read.
#[inline(always)]
pub fn parse_into<P: PacketView + ?Sized>(pkt: &P, parsed: &mut Parsed) -> Result<(), Reason> {
    let eth: [u8; ETH_HLEN] = pkt.bytes(0).ok_or(Reason::L2Truncated)?;
    if eth[0] & 1 != 0 {
        return Err(Reason::NotUnicast);
    }
    let mut ethertype = be16([eth[12], eth[13]]);
    let mut l3_offset = ETH_HLEN;
    let mut vlan_tags = 0u8;
    if ethertype == ETH_P_8021AD || ethertype == ETH_P_8021Q {
        let tag: [u8; VLAN_HLEN] = pkt.bytes(l3_offset).ok_or(Reason::L2Truncated)?;
        ethertype = be16([tag[2], tag[3]]);
        l3_offset += VLAN_HLEN;
        vlan_tags = 1;
        if ethertype == ETH_P_8021Q {
            let tag: [u8; VLAN_HLEN] = pkt.bytes(l3_offset).ok_or(Reason::L2Truncated)?;
            ethertype = be16([tag[2], tag[3]]);
            l3_offset += VLAN_HLEN;
            vlan_tags = 2;
        }
        if ethertype == ETH_P_8021Q || ethertype == ETH_P_8021AD {
            return Err(Reason::Unsupported);
        }
    }
    parsed.l3_offset = l3_offset;
    parsed.vlan_tags = vlan_tags;
    parsed.ttl = 0;
    parsed.fragment = false;
    parsed.flow.clear();
    parsed.bth = None;
    match ethertype {
        ETH_P_IPV4 => parse_ipv4(pkt, parsed),
        ETH_P_IPV6 => parse_ipv6(pkt, parsed),
        _ => Err(Reason::NotIp),
    }
}

#[inline(always)]
fn parse_ipv4<P: PacketView + ?Sized>(pkt: &P, parsed: &mut Parsed) -> Result<(), Reason> {
    let off = parsed.l3_offset;
    let ip: [u8; IPV4_MIN_HLEN] = pkt.bytes(off).ok_or(Reason::L3Malformed)?;
    let ihl = ((ip[0] & 0x0f) as usize) * 4;
    let total_len = be16([ip[2], ip[3]]) as usize;
    if ip[0] >> 4 != 4 || ihl < IPV4_MIN_HLEN || total_len < ihl || off + total_len > pkt.len() {
        return Err(Reason::L3Malformed);
    }
    let flow = &mut parsed.flow;
    flow.src[..4].copy_from_slice(&ip[12..16]);
    flow.dst[..4].copy_from_slice(&ip[16..20]);
    flow.protocol = ip[9];
    parsed.ttl = ip[8];
    // MF set or a non-zero offset.
    parsed.fragment = be16([ip[6], ip[7]]) & 0x3fff != 0;
    if parsed.fragment {
        return Ok(());
    }
    parse_l4(pkt, parsed, off + ihl, off + total_len)
}

#[inline(always)]
fn parse_ipv6<P: PacketView + ?Sized>(pkt: &P, parsed: &mut Parsed) -> Result<(), Reason> {
    let off = parsed.l3_offset;
    // The fixed header: 8 bytes of fields, then the two addresses.
    let ip: [u8; 8] = pkt.bytes(off).ok_or(Reason::L3Malformed)?;
    let addresses: [u8; 32] = pkt.bytes(off + 8).ok_or(Reason::L3Malformed)?;
    let payload_len = be16([ip[4], ip[5]]) as usize;
    if ip[0] >> 4 != 6 {
        return Err(Reason::L3Malformed);
    }
    if payload_len == 0 {
        // Jumbogram (RFC 2675) or garbage; either way not for the fast path.
        return Err(Reason::Unsupported);
    }
    let end = off + IPV6_HLEN + payload_len;
    if end > pkt.len() {
        return Err(Reason::L3Malformed);
    }
    parsed.flow.set_ipv6_addresses(&addresses);
    parsed.ttl = ip[7];
    let mut next = ip[6];
    let mut l4_offset = off + IPV6_HLEN;
    // Up to MAX_IPV6_EXT_HEADERS extension headers, then the upper-layer
    // header: one step more than there are extension headers.
    for step in 0..=MAX_IPV6_EXT_HEADERS {
        match next {
            // The last step is the upper layer's: an extension header there
            // is past the limit and is not read, so that it decides nothing
            // (a fragment header would make the packet a fragment).
            0 | 43 | 60 | 44 if step == MAX_IPV6_EXT_HEADERS => {
                return Err(Reason::Unsupported);
            }
            // Hop-by-hop, routing, destination options: length in 8-octet
            // units, not counting the first eight.
            0 | 43 | 60 => {
                let ext: [u8; 2] = pkt.bytes(l4_offset).ok_or(Reason::L3Malformed)?;
                next = ext[0];
                l4_offset += (ext[1] as usize + 1) * 8;
                // Checked at each header, not once at the end: the frame
                // may go on past the datagram (Ethernet padding), and a
                // fragment header read from there would end the walk.
                if l4_offset > end {
                    return Err(Reason::L3Malformed);
                }
            }
            44 => {
                let frag: [u8; 8] = pkt.bytes(l4_offset).ok_or(Reason::L3Malformed)?;
                if l4_offset + 8 > end {
                    return Err(Reason::L3Malformed);
                }
                // An atomic fragment (offset 0, M clear; RFC 6946) is a whole
                // datagram and hashes like one.
                if be16([frag[2], frag[3]]) & 0xfff9 != 0 {
                    parsed.fragment = true;
                    parsed.flow.protocol = frag[0];
                    return Ok(());
                }
                next = frag[0];
                l4_offset += 8;
            }
            _ => {
                parsed.flow.protocol = next;
                return parse_l4(pkt, parsed, l4_offset, end);
            }
        }
    }
    Err(Reason::Unsupported)
}

/// Reads ports (and the BTH for RoCEv2) from the L4 header at `off`; the IP
/// datagram ends at `end`. Every length field the header carries is held
/// to the datagram: a TCP data offset below five words or past `end`, a UDP
/// length below its own header or past `end`, a BTH past the UDP length are
/// all `L4Truncated`, so nothing is forwarded on ports read from a header
/// that does not say what it holds. A UDP length short of `end` is valid
/// (receivers trim the rest, RFC 768); its BTH must still fit inside it.
#[inline(always)]
fn parse_l4<P: PacketView + ?Sized>(
    pkt: &P,
    parsed: &mut Parsed,
    off: usize,
    end: usize,
) -> Result<(), Reason> {
    let flow = &mut parsed.flow;
    match flow.protocol {
        IPPROTO_TCP => {
            let tcp: [u8; TCP_MIN_HLEN] = pkt.bytes(off).ok_or(Reason::L4Truncated)?;
            let header_len = ((tcp[12] >> 4) as usize) * 4;
            if header_len < TCP_MIN_HLEN || off + header_len > end {
                return Err(Reason::L4Truncated);
            }
            flow.src_port = be16([tcp[0], tcp[1]]);
            flow.dst_port = be16([tcp[2], tcp[3]]);
        }
        IPPROTO_UDP => {
            let udp: [u8; UDP_HLEN] = pkt.bytes(off).ok_or(Reason::L4Truncated)?;
            let udp_end = off + be16([udp[4], udp[5]]) as usize;
            if udp_end < off + UDP_HLEN || udp_end > end {
                return Err(Reason::L4Truncated);
            }
            flow.src_port = be16([udp[0], udp[1]]);
            flow.dst_port = be16([udp[2], udp[3]]);
            if flow.dst_port == ROCEV2_UDP_PORT {
                let bth: [u8; BTH_LEN] = pkt.bytes(off + UDP_HLEN).ok_or(Reason::L4Truncated)?;
                if off + UDP_HLEN + BTH_LEN > udp_end {
                    return Err(Reason::L4Truncated);
                }
                let dest_qp = u32::from_be_bytes([0, bth[5], bth[6], bth[7]]);
                flow.dest_qp = dest_qp;
                parsed.bth = Some(Bth {
                    opcode: bth[0],
                    dest_qp,
                    psn: u32::from_be_bytes([0, bth[9], bth[10], bth[11]]),
                });
            }
        }
        // Unknown L4: the hash falls back to the L3 fields.
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests;
