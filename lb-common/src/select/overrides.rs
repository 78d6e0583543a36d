//! Traffic-engineering overrides: which of a group's overrides a packet
//! matches (the first, most specific first, as the daemon orders them),
//! and where the group's run of them lies.

use crate::abi::OverrideEntry;
use crate::limits::MAX_OVERRIDES_PER_GROUP;
use crate::packet::parse::FlowFields;
use crate::words::word64;

/// Whether `entry` matches a packet of `flow` that came in on `ingress`
/// (an ifindex; 0 when unknown, which no entry naming one matches).
#[inline(always)]
pub fn matches(entry: &OverrideEntry, flow: &FlowFields, ingress: u32) -> bool {
    (entry.is_ipv6 != 0) == flow.is_ipv6
        && (entry.ingress == 0 || entry.ingress == ingress)
        && (entry.dest_qp == 0 || entry.dest_qp == flow.dest_qp)
        && masked_equal(&flow.dst, &entry.dst, &entry.dst_mask)
        && masked_equal(&flow.src, &entry.src, &entry.src_mask)
}

/// Whether `addr` under `mask` is `want` (stored masked): two 64-bit
/// compares, no branch per byte.
#[inline(always)]
fn masked_equal(addr: &[u8; 16], want: &[u8; 16], mask: &[u8; 16]) -> bool {
    let differs = |i| (word64(addr, i) ^ word64(want, i)) & word64(mask, i);
    differs(0) | differs(1) == 0
}

/// The index in `OVERRIDES` of override `i` of group `group` in `half`.
#[inline(always)]
pub fn override_index(group: u32, half: u32, i: u32) -> u32 {
    (group * 2 + (half & 1)) * MAX_OVERRIDES_PER_GROUP + i
}

/// The mask of a prefix of `len` bits over 16 bytes.
pub fn prefix_mask(len: u8) -> [u8; 16] {
    let mut mask = [0u8; 16];
    for (i, byte) in mask.iter_mut().enumerate() {
        let bits = (len as usize).saturating_sub(8 * i).min(8);
        *byte = !(0xffu8.checked_shr(bits as u32).unwrap_or(0));
    }
    mask
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(src: [u8; 4], dst: [u8; 4], qp: u32) -> FlowFields {
        let mut f = FlowFields::default();
        f.src[..4].copy_from_slice(&src);
        f.dst[..4].copy_from_slice(&dst);
        f.dest_qp = qp;
        f
    }

    fn entry(dst: [u8; 4], dst_len: u8, src: [u8; 4], src_len: u8) -> OverrideEntry {
        let mut e = OverrideEntry::default();
        let (dm, sm) = (prefix_mask(dst_len), prefix_mask(src_len));
        for i in 0..4 {
            e.dst[i] = dst[i] & dm[i];
            e.src[i] = src[i] & sm[i];
        }
        e.dst_mask = dm;
        e.src_mask = sm;
        e
    }

    #[test]
    fn masks() {
        assert_eq!(prefix_mask(0), [0; 16]);
        assert_eq!(prefix_mask(12)[..3], [0xff, 0xf0, 0]);
        assert_eq!(prefix_mask(128), [0xff; 16]);
    }

    #[test]
    fn prefixes_ingress_and_qp_match_as_given() {
        let f = flow([10, 1, 2, 3], [198, 19, 1, 9], 0x42);
        assert!(matches(&entry([198, 19, 0, 0], 16, [0; 4], 0), &f, 3));
        assert!(!matches(&entry([198, 19, 2, 0], 24, [0; 4], 0), &f, 3));
        assert!(matches(
            &entry([198, 19, 1, 0], 24, [10, 1, 0, 0], 16),
            &f,
            3
        ));
        assert!(!matches(
            &entry([198, 19, 1, 0], 24, [10, 2, 0, 0], 16),
            &f,
            3
        ));
        let on = |ingress| OverrideEntry {
            ingress,
            ..entry([198, 19, 0, 0], 16, [0; 4], 0)
        };
        assert!(matches(&on(3), &f, 3));
        assert!(!matches(&on(4), &f, 3));
        assert!(
            !matches(&on(4), &f, 0),
            "unknown ingress matches none named"
        );
        let qp = |dest_qp| OverrideEntry {
            dest_qp,
            ..entry([198, 19, 0, 0], 16, [0; 4], 0)
        };
        assert!(matches(&qp(0x42), &f, 3));
        assert!(!matches(&qp(0x43), &f, 3));
        let v6 = FlowFields { is_ipv6: true, ..f };
        assert!(!matches(&entry([198, 19, 0, 0], 16, [0; 4], 0), &v6, 3));
        assert_eq!(override_index(2, 1, 3), (5 * MAX_OVERRIDES_PER_GROUP) + 3);
    }
}
