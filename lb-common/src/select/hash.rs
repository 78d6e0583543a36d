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

/// Length of the hash input: two 32-bit addresses, protocol, two ports,
/// 24-bit QP.
pub const HASH_INPUT_LEN: usize = 4 + 4 + 1 + 2 + 2 + 3;

/// The bytes the flow hash covers: `src_ip | dst_ip | ip_protocol |
/// l4_src_port | l4_dst_port | rdma_bth_dest_qp`, multi-byte fields in
/// network order. An IPv6 address enters [folded](fold_address) to 32 bits,
/// so both families hash 16 bytes. A field not selected is hashed as zeros,
/// so the layout never shifts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HashInput(pub [u8; HASH_INPUT_LEN]);

impl HashInput {
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

/// A flow's address as the hash takes it: an IPv4 address as it is, an
/// IPv6 address as the XOR of its four 32-bit words. Switch ASICs fold
/// IPv6 addresses the same way before their hash engines; for the data
/// plane it makes an IPv6 hash cost what an IPv4 one does (16 table reads
/// instead of 40). Addresses that differ in one word still fold apart.
#[inline(always)]
pub fn fold_address(is_ipv6: bool, address: &[u8; 16]) -> [u8; 4] {
    let word = |w: usize| {
        u32::from_ne_bytes([
            address[4 * w],
            address[4 * w + 1],
            address[4 * w + 2],
            address[4 * w + 3],
        ])
    };
    let folded = if is_ipv6 {
        word(0) ^ word(1) ^ word(2) ^ word(3)
    } else {
        word(0)
    };
    folded.to_ne_bytes()
}

/// Lays out the selected fields of a parsed flow as hash input.
pub fn hash_input(flow: &FlowFields, fields: HashFields) -> HashInput {
    let mut bytes = [0u8; HASH_INPUT_LEN];
    if fields.contains(HashFields::SRC_IP) {
        bytes[..4].copy_from_slice(&fold_address(flow.is_ipv6, &flow.src));
    }
    if fields.contains(HashFields::DST_IP) {
        bytes[4..8].copy_from_slice(&fold_address(flow.is_ipv6, &flow.dst));
    }
    if fields.contains(HashFields::IP_PROTOCOL) {
        bytes[8] = flow.protocol;
    }
    if fields.contains(HashFields::L4_SRC_PORT) {
        bytes[9..11].copy_from_slice(&flow.src_port.to_be_bytes());
    }
    if fields.contains(HashFields::L4_DST_PORT) {
        bytes[11..13].copy_from_slice(&flow.dst_port.to_be_bytes());
    }
    if fields.contains(HashFields::RDMA_BTH_DEST_QP) {
        bytes[13..16].copy_from_slice(&flow.dest_qp.to_be_bytes()[1..]);
    }
    HashInput(bytes)
}

/// The CRC-32 register (zero initial value, no final inversion) after one
/// byte `b` followed by `j` zero bytes, at `[j][b]`. CRC is linear over
/// GF(2): the register after an input of length `L` is the XOR over its
/// bytes of `SHIFTED[L - 1 - i][byte i]`. So every byte is looked up on
/// its own, instead of waiting for the register the previous byte left
/// (a chain of dependent loads, most of the path's cost before), and the
/// zero bytes of fields not hashed add nothing and are skipped. 16 KiB.
static SHIFTED: [[u32; 256]; HASH_INPUT_LEN] = shifted_tables();

const fn shifted_tables() -> [[u32; 256]; HASH_INPUT_LEN] {
    let mut tables = [[0u32; 256]; HASH_INPUT_LEN];
    let mut b = 0;
    while b < 256 {
        let mut c = b as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        tables[0][b] = c;
        b += 1;
    }
    let mut j = 1;
    while j < HASH_INPUT_LEN {
        let mut b = 0;
        while b < 256 {
            // One more zero byte through the register.
            let c = tables[j - 1][b];
            tables[j][b] = tables[0][(c & 0xff) as usize] ^ (c >> 8);
            b += 1;
        }
        j += 1;
    }
    tables
}

/// The flow hash the data plane selects a bucket with: the CRC-32 of
/// [`hash_input`]`(flow, fields)` continuing from `seed`, i.e. equal to
/// `crc32fast::Hasher::new_with_initial(seed)` updated with its bytes,
/// computed from the fields without laying the input out.
#[inline(always)]
pub fn flow_hash(seed: u32, flow: &FlowFields, fields: HashFields) -> u32 {
    // Byte `i` of the input enters the register shifted by the
    // `HASH_INPUT_LEN - 1 - i` bytes after it.
    let at = |i: usize, byte: u8| SHIFTED[HASH_INPUT_LEN - 1 - i][byte as usize];
    // A register starting at `s` is a zero register whose first four input
    // bytes were XORed with `s`, low byte first (the CRC is reflected);
    // the inversions are crc32fast's.
    let start = (!seed).to_le_bytes();
    let src = if fields.contains(HashFields::SRC_IP) {
        fold_address(flow.is_ipv6, &flow.src)
    } else {
        [0; 4]
    };
    let mut crc = 0;
    let mut i = 0;
    while i < 4 {
        crc ^= at(i, src[i] ^ start[i]);
        i += 1;
    }
    if fields.contains(HashFields::DST_IP) {
        let dst = fold_address(flow.is_ipv6, &flow.dst);
        let mut i = 0;
        while i < 4 {
            crc ^= at(4 + i, dst[i]);
            i += 1;
        }
    }
    let p = 8;
    if fields.contains(HashFields::IP_PROTOCOL) {
        crc ^= at(p, flow.protocol);
    }
    if fields.contains(HashFields::L4_SRC_PORT) {
        let [hi, lo] = flow.src_port.to_be_bytes();
        crc ^= at(p + 1, hi) ^ at(p + 2, lo);
    }
    if fields.contains(HashFields::L4_DST_PORT) {
        let [hi, lo] = flow.dst_port.to_be_bytes();
        crc ^= at(p + 3, hi) ^ at(p + 4, lo);
    }
    if fields.contains(HashFields::RDMA_BTH_DEST_QP) {
        let [_, a, b, c] = flow.dest_qp.to_be_bytes();
        crc ^= at(p + 5, a) ^ at(p + 6, b) ^ at(p + 7, c);
    }
    !crc
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

    /// Flows whose every byte differs between flows and fields, for both
    /// families.
    fn flows() -> impl Iterator<Item = FlowFields> {
        (0u8..24).map(|n| {
            let mut f = FlowFields {
                is_ipv6: n % 2 == 1,
                ..FlowFields::default()
            };
            for i in 0..16 {
                f.src[i] = n.wrapping_mul(37).wrapping_add(i as u8 * 11);
                f.dst[i] = n.wrapping_mul(101).wrapping_add(i as u8 * 7 + 3);
            }
            f.protocol = 6 + n;
            f.src_port = 0xc000 + u16::from(n) * 257;
            f.dst_port = 4791 ^ (u16::from(n) << 9);
            f.dest_qp = 0x00ab_cdef ^ ((u32::from(n) * 0x0101_0101) & 0x00ff_ffff);
            f
        })
    }

    #[test]
    fn flow_hash_is_crc32fast_of_the_input_for_every_field_set_and_seed() {
        for seed in [0u32, 1, 0xdead_beef, 0xffff_ffff, 0x5eed_1234] {
            for flow in flows() {
                for fields in 0..=HashFields::ALL.0 {
                    let fields = HashFields(fields);
                    let mut h = crc32fast::Hasher::new_with_initial(seed);
                    h.update(hash_input(&flow, fields).as_bytes());
                    assert_eq!(
                        flow_hash(seed, &flow, fields),
                        h.finalize(),
                        "seed {seed:#x} fields {fields:?} flow {flow:?}"
                    );
                }
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
    fn ipv6_addresses_enter_folded_to_their_words_xor() {
        let mut f = v4_flow();
        f.is_ipv6 = true;
        f.src = [
            0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x00, 0x00, 0x01,
        ];
        f.dst = [0x30; 16];
        let input = hash_input(&f, HashFields::ALL);
        assert_eq!(
            input.as_bytes(),
            &[
                0x20, 0x01, 0x0d, 0xb9, 0, 0, 0, 0, 17, 0xc0, 0x00, 0x12, 0xb7, 0xab, 0xcd, 0xef
            ]
        );
    }

    #[test]
    fn ipv6_addresses_differing_in_one_word_hash_apart() {
        let mut a = v4_flow();
        a.is_ipv6 = true;
        a.src = [0x20; 16];
        for word in 0..4 {
            let mut b = a;
            b.src[4 * word + 3] ^= 1;
            assert_ne!(
                flow_hash(7, &a, HashFields::ALL),
                flow_hash(7, &b, HashFields::ALL),
                "word {word}"
            );
        }
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
