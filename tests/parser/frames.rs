//! Frames for the differential test, built from a structured description
//! whose every length field may lie: valid RoCEv2, TCP and UDP frames over
//! IPv4 and IPv6 with tags, options and extension headers, each length
//! exact, off by a little or arbitrary; then Ethernet padding, and a few
//! bytes overwritten. Besides them, random bytes, bare and behind an
//! Ethernet header that says IPv4 or IPv6.

use proptest::{collection::vec, prelude::*, sample::Index};

const TPIDS: [u16; 3] = [0x8100, 0x88a8, 0x9100];
const ETHERTYPES: [u16; 3] = [0x0800, 0x86dd, 0x0806];
/// TCP, UDP, GRE, the authentication header, no next header.
const PROTOCOLS: [u8; 5] = [6, 17, 47, 51, 59];
/// Hop-by-hop, routing, destination options, fragment, authentication.
const EXT_HEADERS: [u8; 5] = [0, 43, 60, 44, 51];
const ROCEV2_PORT: u16 = 4791;

/// What a length field says.
#[derive(Clone, Copy, Debug)]
pub enum Len {
    Exact,
    /// The exact value plus this, wrapping in the field's width.
    Off(i32),
    Raw(u16),
}

impl Len {
    fn of(self, exact: usize) -> u16 {
        match self {
            Len::Exact => exact as u16,
            Len::Off(delta) => (exact as i64 + i64::from(delta)) as u16,
            Len::Raw(raw) => raw,
        }
    }
}

fn len() -> impl Strategy<Value = Len> {
    prop_oneof![
        6 => Just(Len::Exact),
        3 => (-24i32..=24).prop_map(Len::Off),
        1 => any::<u16>().prop_map(Len::Raw),
    ]
}

#[derive(Clone, Debug)]
pub enum L4 {
    Tcp {
        ports: (u16, u16),
        /// The data offset in words, when it lies.
        data_offset: Option<u8>,
        options_words: usize,
    },
    Udp {
        ports: (u16, u16),
        length: Len,
        /// The BTH and what follows, on port 4791 and elsewhere alike.
        body: Vec<u8>,
    },
    Other(Vec<u8>),
}

fn l4() -> impl Strategy<Value = L4> {
    let port = prop_oneof![Just(ROCEV2_PORT), any::<u16>()];
    prop_oneof![
        (
            (any::<u16>(), any::<u16>()),
            prop::option::weighted(0.3, 0u8..16),
            0usize..=10,
        )
            .prop_map(|(ports, data_offset, options_words)| L4::Tcp {
                ports,
                data_offset,
                options_words,
            }),
        ((any::<u16>(), port), len(), vec(any::<u8>(), 0..24)).prop_map(|(ports, length, body)| {
            L4::Udp {
                ports,
                length,
                body,
            }
        }),
        vec(any::<u8>(), 0..12).prop_map(L4::Other),
    ]
}

impl L4 {
    fn protocol(&self) -> Option<u8> {
        match self {
            L4::Tcp { .. } => Some(6),
            L4::Udp { .. } => Some(17),
            L4::Other(_) => None,
        }
    }

    fn bytes(&self) -> Vec<u8> {
        match self {
            L4::Tcp {
                ports,
                data_offset,
                options_words,
            } => {
                let words = data_offset.unwrap_or(5 + *options_words as u8);
                let mut t = [&ports.0.to_be_bytes()[..], &ports.1.to_be_bytes()].concat();
                t.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, words << 4, 0x10, 0xff, 0xff]);
                t.extend_from_slice(&[0; 4]);
                t.resize(t.len() + options_words * 4, 1);
                t
            }
            L4::Udp {
                ports,
                length,
                body,
            } => {
                let mut u = [&ports.0.to_be_bytes()[..], &ports.1.to_be_bytes()].concat();
                u.extend_from_slice(&length.of(8 + body.len()).to_be_bytes());
                u.extend_from_slice(&[0, 0]);
                u.extend_from_slice(body);
                u
            }
            L4::Other(bytes) => bytes.clone(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Ipv4 {
    version: u8,
    /// Header length in words when it lies; options fill the header.
    ihl: Option<u8>,
    options_words: usize,
    total_len: Len,
    flags_fragment: u16,
    ttl: u8,
    protocol: u8,
    addresses: [u8; 8],
}

fn ipv4() -> impl Strategy<Value = Ipv4> {
    (
        prop_oneof![9 => Just(4u8), 1 => 0u8..16],
        prop::option::weighted(0.2, 0u8..16),
        0usize..=10,
        len(),
        prop_oneof![Just(0u16), Just(0x4000), Just(0x2000), any::<u16>()],
        any::<u8>(),
        prop::sample::select(PROTOCOLS.to_vec()),
        any::<[u8; 8]>(),
    )
        .prop_map(
            |(version, ihl, options_words, total_len, flags_fragment, ttl, protocol, addresses)| {
                Ipv4 {
                    version,
                    ihl,
                    options_words,
                    total_len,
                    flags_fragment,
                    ttl,
                    protocol,
                    addresses,
                }
            },
        )
}

impl Ipv4 {
    fn bytes(&self, l4: &L4) -> Vec<u8> {
        let words = self.ihl.unwrap_or(5 + self.options_words as u8);
        let body = l4.bytes();
        let header_len = 20 + self.options_words * 4;
        let total = self.total_len.of(header_len + body.len());
        let mut h = vec![self.version << 4 | (words & 0x0f), 0];
        h.extend_from_slice(&total.to_be_bytes());
        h.extend_from_slice(&[0x12, 0x34]);
        h.extend_from_slice(&self.flags_fragment.to_be_bytes());
        let protocol = l4.protocol().unwrap_or(self.protocol);
        // The checksum is never checked, by either parser.
        h.extend_from_slice(&[self.ttl, protocol, 0, 0]);
        h.extend_from_slice(&self.addresses);
        h.resize(header_len, 1);
        h.extend_from_slice(&body);
        h
    }
}

#[derive(Clone, Debug)]
pub struct Ext {
    kind: u8,
    /// Length in 8-octet units after the first eight (fragment: ignored).
    len8: u8,
    /// Fragment offset and flags word (others: ignored).
    fragment: u16,
}

fn ext() -> impl Strategy<Value = Ext> {
    (
        prop::sample::select(EXT_HEADERS.to_vec()),
        prop_oneof![4 => 0u8..3, 1 => any::<u8>()],
        prop_oneof![Just(0u16), Just(1), Just(0x0008), any::<u16>()],
    )
        .prop_map(|(kind, len8, fragment)| Ext {
            kind,
            len8,
            fragment,
        })
}

#[derive(Clone, Debug)]
pub struct Ipv6 {
    version: u8,
    payload_len: Len,
    hop_limit: u8,
    protocol: u8,
    /// Extension headers in order; one longer than 64 bytes is cut there,
    /// so its length lies.
    chain: Vec<Ext>,
    addresses: [u8; 32],
}

fn ipv6() -> impl Strategy<Value = Ipv6> {
    (
        prop_oneof![9 => Just(6u8), 1 => 0u8..16],
        len(),
        any::<u8>(),
        prop::sample::select(PROTOCOLS.to_vec()),
        prop_oneof![2 => vec(ext(), 0..3), 1 => vec(ext(), 3..9)],
        any::<[u8; 32]>(),
    )
        .prop_map(
            |(version, payload_len, hop_limit, protocol, chain, addresses)| Ipv6 {
                version,
                payload_len,
                hop_limit,
                protocol,
                chain,
                addresses,
            },
        )
}

impl Ipv6 {
    fn bytes(&self, l4: &L4) -> Vec<u8> {
        let upper = l4.protocol().unwrap_or(self.protocol);
        let mut body = Vec::new();
        for (i, ext) in self.chain.iter().enumerate() {
            let next = self.chain.get(i + 1).map_or(upper, |e| e.kind);
            if ext.kind == 44 {
                body.extend_from_slice(&[next, 0]);
                body.extend_from_slice(&ext.fragment.to_be_bytes());
                body.extend_from_slice(&[0, 0, 0, 42]);
            } else {
                // AH counts in 4-octet units (RFC 4302); the rest in eight.
                let bytes = if ext.kind == 51 {
                    (usize::from(ext.len8) + 2) * 4
                } else {
                    (usize::from(ext.len8) + 1) * 8
                };
                let start = body.len();
                body.resize(start + bytes.min(64), 0);
                body[start] = next;
                body[start + 1] = ext.len8;
            }
        }
        body.extend(l4.bytes());
        let first = self.chain.first().map_or(upper, |e| e.kind);
        let mut h = vec![self.version << 4, 0, 0, 0];
        h.extend_from_slice(&self.payload_len.of(body.len()).to_be_bytes());
        h.extend_from_slice(&[first, self.hop_limit]);
        h.extend_from_slice(&self.addresses);
        h.extend_from_slice(&body);
        h
    }
}

#[derive(Clone, Debug)]
pub enum L3 {
    V4(Ipv4),
    V6(Ipv6),
    /// Random bytes after an IPv4 or IPv6 ethertype.
    Random(u16, Vec<u8>),
}

#[derive(Clone, Debug)]
pub struct Spec {
    multicast: bool,
    tpids: Vec<u16>,
    /// An ethertype that is not IP, instead of the L3 header's.
    other_ethertype: Option<u16>,
    l3: L3,
    l4: L4,
    padding: usize,
    /// Bytes overwritten, at positions taken modulo the frame's length.
    overwrite: Vec<(Index, u8)>,
}

pub fn spec() -> impl Strategy<Value = Spec> {
    let l3 = prop_oneof![
        4 => ipv4().prop_map(L3::V4),
        4 => ipv6().prop_map(L3::V6),
        1 => (
            prop::sample::select(vec![0x0800u16, 0x86dd]),
            vec(any::<u8>(), 0..80)
        )
            .prop_map(|(ethertype, bytes)| L3::Random(ethertype, bytes)),
    ];
    (
        prop::bool::weighted(0.05),
        prop_oneof![
            3 => Just(Vec::new()),
            2 => vec(prop::sample::select(TPIDS.to_vec()), 1..=3),
        ],
        prop::option::weighted(
            0.05,
            prop_oneof![prop::sample::select(ETHERTYPES.to_vec()), any::<u16>()],
        ),
        l3,
        l4(),
        prop_oneof![3 => Just(0usize), 1 => 1usize..40],
        prop_oneof![3 => Just(Vec::new()), 1 => vec((any::<Index>(), any::<u8>()), 1..4)],
    )
        .prop_map(
            |(multicast, tpids, other_ethertype, l3, l4, padding, overwrite)| Spec {
                multicast,
                tpids,
                other_ethertype,
                l3,
                l4,
                padding,
                overwrite,
            },
        )
}

impl Spec {
    pub fn frame(&self) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2];
        if self.multicast {
            f[0] = 0x01;
        }
        for (vid, tpid) in self.tpids.iter().enumerate() {
            f.extend_from_slice(&tpid.to_be_bytes());
            f.extend_from_slice(&(100 + vid as u16).to_be_bytes());
        }
        let (ethertype, l3) = match &self.l3 {
            L3::V4(ip) => (0x0800, ip.bytes(&self.l4)),
            L3::V6(ip) => (0x86dd, ip.bytes(&self.l4)),
            L3::Random(ethertype, bytes) => (*ethertype, bytes.clone()),
        };
        f.extend_from_slice(&self.other_ethertype.unwrap_or(ethertype).to_be_bytes());
        f.extend_from_slice(&l3);
        f.resize(f.len() + self.padding, 0);
        for (at, byte) in &self.overwrite {
            let at = at.index(f.len());
            f[at] = *byte;
        }
        f
    }
}

/// Frames from the structured description, or random bytes.
pub fn frame() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        9 => spec().prop_map(|spec| spec.frame()),
        1 => vec(any::<u8>(), 0..96),
    ]
}
