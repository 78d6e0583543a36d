//! The route table the data plane reads: longest-prefix match by fixed
//! strides, so a lookup costs the same few dependent reads however many
//! routes are installed (the kernel's LPM trie walks a node per branching
//! bit level: at 100k routes some 17 dependent cache misses).
//!
//! A first level of [`FIRST_ENTRIES`] entries indexed by the address's
//! first two bytes, then one [`BLOCK_ENTRIES`]-entry block per further
//! byte, from a pool of blocks: an IPv4 address takes at most three
//! reads, an IPv6 address one per byte its longest prefix reaches past
//! the second (a /64: seven). IPv6 tables whose blocks do not fit their
//! pool hold [`IN_TRIE`] in every first-level entry: the data plane then
//! asks the LPM trie ([`or_trie`]). Each entry is final (the value of the longest prefix covering
//! every address below it, or none) or the index of the block for the
//! next byte. Userspace expands prefixes to these strides (controlled
//! prefix expansion) and writes a block whole before the entry pointing
//! to it, so the data plane never reads a half-built path.

use crate::limits::LOCAL_ROUTE;

/// First-level entries: one per value of the address's first 16 bits.
pub const FIRST_ENTRIES: u32 = 1 << 16;
/// Entries per block: one per value of the byte it indexes.
pub const BLOCK_ENTRIES: u32 = 256;

/// The raw entry a zeroed map holds: no route.
pub const EMPTY: u32 = 0;
/// Set in an entry pointing to a block; the rest is the block's index.
const NEXT: u32 = 1 << 31;
/// Set in a final entry; the rest is the value.
const VALUE: u32 = 1 << 30;
/// [`LOCAL_ROUTE`]'s final entry: the value bits all set.
const LOCAL: u32 = NEXT - 1;
/// A first-level entry of a table whose routes did not fit its pool: the
/// route is the trie's. Neither mark: [`Entry::decode`] reads it as empty.
pub const IN_TRIE: u32 = 1;

/// One decoded table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    /// No prefix covers the addresses below it.
    Empty,
    /// The longest prefix covering them routes to this value: a group id
    /// (below `MAX_GROUPS`) or [`LOCAL_ROUTE`].
    Value(u32),
    /// The block for the next byte.
    Next(u32),
}

impl Entry {
    pub const fn encode(self) -> u32 {
        match self {
            Entry::Empty => EMPTY,
            Entry::Value(LOCAL_ROUTE) => LOCAL,
            Entry::Value(value) => VALUE | value,
            Entry::Next(block) => NEXT | block,
        }
    }

    /// What an entry holds; one with neither mark (never written by the
    /// daemon) counts as empty.
    pub const fn decode(raw: u32) -> Self {
        if raw & NEXT != 0 {
            Entry::Next(raw & !NEXT)
        } else if raw == LOCAL {
            Entry::Value(LOCAL_ROUTE)
        } else if raw & VALUE != 0 {
            Entry::Value(raw & !VALUE)
        } else {
            Entry::Empty
        }
    }
}

/// Reads the table's two maps; `None` for an index out of range (or a
/// failed read), which the lookup takes as an empty entry: no route.
pub trait Levels {
    /// First-level entry `index` (the address's first two bytes).
    fn first(&self, index: u32) -> Option<u32>;
    /// Pool entry `index`: `block * BLOCK_ENTRIES + byte`.
    fn pool(&self, index: u32) -> Option<u32>;
}

/// The first-level index of `addr`.
#[inline(always)]
pub fn first_index(addr: &[u8]) -> u32 {
    (u32::from(addr[0]) << 8) | u32::from(addr[1])
}

/// The pool index of entry `byte` of `block`.
#[inline(always)]
pub fn pool_index(block: u32, byte: u8) -> u32 {
    block.wrapping_mul(BLOCK_ENTRIES) | u32::from(byte)
}

/// The raw entry the walk for `addr` (4 or 16 bytes) ends on: at most
/// `N - 1` reads, one per level, no other loop. It stays a plain `u32`
/// on every path, a failed read included, because the data plane takes
/// it: an `Option` or `Entry` leaves its payload undefined on the empty
/// path, and LLVM may copy that register before the branch that makes
/// it unused, which the verifier refuses as a read of an uninitialised
/// register (it did, for some builds of the bench object).
#[inline(always)]
pub fn lookup_entry<L: Levels + ?Sized, const N: usize>(levels: &L, addr: &[u8; N]) -> u32 {
    let mut raw = levels.first(first_index(addr)).unwrap_or(EMPTY);
    for &byte in &addr[2..] {
        if raw & NEXT == 0 {
            break;
        }
        raw = levels.pool(pool_index(raw & !NEXT, byte)).unwrap_or(EMPTY);
    }
    raw
}

/// The value of the longest prefix covering `addr`, or `None`.
#[inline(always)]
pub fn lookup<L: Levels + ?Sized, const N: usize>(levels: &L, addr: &[u8; N]) -> Option<u32> {
    entry_value(lookup_entry(levels, addr))
}

/// The entry [`group`](super::group) takes for a route value found by
/// another lookup (the IPv6 trie's): the value's final entry, or
/// [`EMPTY`] for none.
#[inline(always)]
pub fn value_entry(value: Option<u32>) -> u32 {
    value.map_or(EMPTY, |value| Entry::Value(value).encode())
}

/// The entry a walk that ended on `raw` stands for: `raw` itself, or,
/// where the table left the routes to the trie ([`IN_TRIE`]), the trie's
/// value for the address, which `trie` looks up.
#[inline(always)]
pub fn or_trie(raw: u32, trie: impl FnOnce() -> Option<u32>) -> u32 {
    if raw == IN_TRIE {
        value_entry(trie())
    } else {
        raw
    }
}

/// The route value an entry [`lookup_entry`] ended on holds: a group id,
/// [`LOCAL_ROUTE`], or `None` (no route; also a block pointer past the
/// last byte, which is never written). Bit tests on the raw entry, for
/// the reason `lookup_entry` gives.
#[inline(always)]
pub fn entry_value(raw: u32) -> Option<u32> {
    if raw == LOCAL {
        Some(LOCAL_ROUTE)
    } else if raw & (NEXT | VALUE) == VALUE {
        Some(raw & !VALUE)
    } else {
        None
    }
}

#[cfg(test)]
mod tests;
