//! Byte arrays read a machine word at a time.

/// The native-endian 64-bit word at byte `8 * i` of `bytes`. Written
/// byte by byte so that LLVM sees one 8-byte load (the BPF objects allow
/// misaligned access); a slice copy here becomes a call to a byte loop.
#[inline(always)]
pub fn word64<const N: usize>(bytes: &[u8; N], i: usize) -> u64 {
    u64::from_ne_bytes([
        bytes[8 * i],
        bytes[8 * i + 1],
        bytes[8 * i + 2],
        bytes[8 * i + 3],
        bytes[8 * i + 4],
        bytes[8 * i + 5],
        bytes[8 * i + 6],
        bytes[8 * i + 7],
    ])
}
