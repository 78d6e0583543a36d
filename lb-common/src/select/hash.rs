//! Seeded CRC-32 flow hash over the configured header fields.
//!
//! The CRC is the IEEE 802.3 polynomial (reflected, 0xEDB88320), the same one
//! `crc32fast` computes, so the daemon and tests can predict the data plane's
//! choice bit for bit. The per-switch seed is the CRC's initial value: two
//! switches with different seeds split the same flows differently, which
//! breaks hash polarization across tiers.

use crate::packet::parse::FlowFields;

/// Which header fields feed the hash; SONiC's field names.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HashFields(pub u32);

impl HashFields {
    pub const SRC_IP: Self = Self(1 << 0);
    pub const DST_IP: Self = Self(1 << 1);
    pub const IP_PROTOCOL: Self = Self(1 << 2);
    pub const L4_SRC_PORT: Self = Self(1 << 3);
    pub const L4_DST_PORT: Self = Self(1 << 4);
    pub const RDMA_BTH_DEST_QP: Self = Self(1 << 5);
    pub const ALL: Self = Self(0x3f);

    /// Config names, in the order the fields are hashed.
    pub const NAMES: [(&'static str, Self); 6] = [
        ("src_ip", Self::SRC_IP),
        ("dst_ip", Self::DST_IP),
        ("ip_protocol", Self::IP_PROTOCOL),
        ("l4_src_port", Self::L4_SRC_PORT),
        ("l4_dst_port", Self::L4_DST_PORT),
        ("rdma_bth_dest_qp", Self::RDMA_BTH_DEST_QP),
    ];

    pub fn from_name(name: &str) -> Option<Self> {
        Self::NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, f)| *f)
    }

    #[inline(always)]
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    #[inline(always)]
    pub const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }
}

/// Longest hash input: two IPv6 addresses, protocol, two ports, 24-bit QP.
pub const HASH_INPUT_MAX: usize = 16 + 16 + 1 + 2 + 2 + 3;

/// The bytes the flow hash covers: `src_ip | dst_ip | ip_protocol |
/// l4_src_port | l4_dst_port | rdma_bth_dest_qp`, addresses 4 bytes for IPv4
/// and 16 for IPv6, multi-byte fields in network order. A field not selected
/// is hashed as zeros, so the layout never shifts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HashInput {
    pub bytes: [u8; HASH_INPUT_MAX],
    pub len: usize,
}

impl HashInput {
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// Lays out the selected fields of a parsed flow as hash input.
#[inline(always)]
pub fn hash_input(flow: &FlowFields, fields: HashFields) -> HashInput {
    // Constant address lengths per branch keep every copy fixed-size, which
    // the BPF backend inlines (it has no variable-length memcpy).
    if flow.is_ipv6 {
        layout::<16>(flow, fields)
    } else {
        layout::<4>(flow, fields)
    }
}

#[inline(always)]
fn layout<const A: usize>(flow: &FlowFields, fields: HashFields) -> HashInput {
    let mut bytes = [0u8; HASH_INPUT_MAX];
    if fields.contains(HashFields::SRC_IP) {
        bytes[..A].copy_from_slice(&flow.src[..A]);
    }
    if fields.contains(HashFields::DST_IP) {
        bytes[A..2 * A].copy_from_slice(&flow.dst[..A]);
    }
    let p = 2 * A;
    if fields.contains(HashFields::IP_PROTOCOL) {
        bytes[p] = flow.protocol;
    }
    if fields.contains(HashFields::L4_SRC_PORT) {
        bytes[p + 1..p + 3].copy_from_slice(&flow.src_port.to_be_bytes());
    }
    if fields.contains(HashFields::L4_DST_PORT) {
        bytes[p + 3..p + 5].copy_from_slice(&flow.dst_port.to_be_bytes());
    }
    if fields.contains(HashFields::RDMA_BTH_DEST_QP) {
        bytes[p + 5..p + 8].copy_from_slice(&flow.dest_qp.to_be_bytes()[1..]);
    }
    HashInput { bytes, len: p + 8 }
}

const fn crc_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
}

static CRC_TABLE: [u32; 256] = crc_table();

/// CRC-32 of `data` continuing from `seed`; equals
/// `crc32fast::Hasher::new_with_initial(seed)` updated with `data`.
#[inline(always)]
pub fn crc32(seed: u32, data: &[u8]) -> u32 {
    let mut crc = !seed;
    for &b in data {
        crc = CRC_TABLE[((crc ^ b as u32) & 0xff) as usize] ^ (crc >> 8);
    }
    !crc
}

/// The flow hash the data plane selects a bucket with.
#[inline(always)]
pub fn flow_hash(seed: u32, flow: &FlowFields, fields: HashFields) -> u32 {
    input_hash(seed, &hash_input(flow, fields))
}

/// The flow hash of an input [`hash_input`] laid out.
#[inline(always)]
pub fn input_hash(seed: u32, input: &HashInput) -> u32 {
    // Fixed lengths let the CRC loop unroll.
    if input.len == HASH_INPUT_MAX {
        crc32(seed, &input.bytes[..HASH_INPUT_MAX])
    } else {
        crc32(seed, &input.bytes[..16])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4_flow() -> FlowFields {
        let mut f = FlowFields::default();
        f.src[..4].copy_from_slice(&[10, 0, 0, 1]);
        f.dst[..4].copy_from_slice(&[10, 1, 0, 2]);
        f.protocol = 17;
        f.src_port = 0xc000;
        f.dst_port = 4791;
        f.dest_qp = 0x00ab_cdef;
        f
    }

    #[test]
    fn crc_matches_crc32fast_for_many_seeds_and_lengths() {
        let data: [u8; 64] = core::array::from_fn(|i| (i as u8).wrapping_mul(37).wrapping_add(11));
        for seed in [0u32, 1, 0xdead_beef, 0xffff_ffff, 0x5eed_1234] {
            for len in 0..=data.len() {
                let mut h = crc32fast::Hasher::new_with_initial(seed);
                h.update(&data[..len]);
                assert_eq!(
                    crc32(seed, &data[..len]),
                    h.finalize(),
                    "seed {seed:#x} len {len}"
                );
            }
        }
    }

    #[test]
    fn ipv4_layout_is_sixteen_bytes_in_field_order() {
        let input = hash_input(&v4_flow(), HashFields::ALL);
        assert_eq!(
            input.as_bytes(),
            &[
                10, 0, 0, 1, 10, 1, 0, 2, 17, 0xc0, 0x00, 0x12, 0xb7, 0xab, 0xcd, 0xef
            ]
        );
    }

    #[test]
    fn ipv6_layout_is_forty_bytes() {
        let mut f = v4_flow();
        f.is_ipv6 = true;
        f.src = [0x20; 16];
        f.dst = [0x30; 16];
        let input = hash_input(&f, HashFields::ALL);
        assert_eq!(input.len, 40);
        assert_eq!(&input.bytes[..16], &[0x20; 16]);
        assert_eq!(&input.bytes[16..32], &[0x30; 16]);
        assert_eq!(
            &input.bytes[32..],
            &[17, 0xc0, 0x00, 0x12, 0xb7, 0xab, 0xcd, 0xef]
        );
    }

    #[test]
    fn unselected_fields_hash_as_zeros() {
        let fields = HashFields::SRC_IP.union(HashFields::DST_IP);
        let input = hash_input(&v4_flow(), fields);
        assert_eq!(
            input.as_bytes(),
            &[10, 0, 0, 1, 10, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0]
        );
    }

    #[test]
    fn qp_changes_hash_only_when_selected() {
        let a = v4_flow();
        let mut b = a;
        b.dest_qp = 0x12;
        assert_ne!(
            flow_hash(7, &a, HashFields::ALL),
            flow_hash(7, &b, HashFields::ALL)
        );
        let no_qp = HashFields(HashFields::ALL.0 & !HashFields::RDMA_BTH_DEST_QP.0);
        assert_eq!(flow_hash(7, &a, no_qp), flow_hash(7, &b, no_qp));
    }

    #[test]
    fn seed_changes_hash() {
        let f = v4_flow();
        assert_ne!(
            flow_hash(1, &f, HashFields::ALL),
            flow_hash(2, &f, HashFields::ALL)
        );
    }

    #[test]
    fn field_names_round_trip() {
        for (name, f) in HashFields::NAMES {
            assert_eq!(HashFields::from_name(name), Some(f));
        }
        assert_eq!(HashFields::from_name("inner_src_ip"), None);
        let all = HashFields::NAMES
            .iter()
            .fold(HashFields(0), |acc, (_, f)| acc.union(*f));
        assert_eq!(all, HashFields::ALL);
    }
}
