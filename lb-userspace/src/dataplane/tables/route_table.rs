//! Prefixes compiled into the data plane's fixed-stride route table
//! (`lb_common::route::table`), and the writes that move the maps from
//! one compiled table to the next without ever exposing a half-built
//! path.
//!
//! Each block belongs to one path (the address bytes leading to it) for
//! as long as it is in use: a path keeps its block from one table to the
//! next, and a new path takes a block the previous table does not use.
//! So a block the maps may still point to is only ever changed in place,
//! entry by entry, each entry the old or the new route; a new block is
//! written whole before the entry pointing to it (deeper blocks first,
//! the first level last); a block dropped is left as it is, nothing
//! pointing to it any more, and is handed out again only by a later
//! table. A rollback, the old table written over the new, keeps the same
//! rules: neither uses the other's new blocks for another path.

use std::collections::{BTreeMap, BTreeSet};

use lb_common::route::table::{
    BLOCK_ENTRIES, EMPTY, Entry, FIRST_ENTRIES, IN_TRIE, Levels, first_index, pool_index,
};

const BLOCK: usize = BLOCK_ENTRIES as usize;

/// Which family's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    V4,
    V6,
}

impl std::fmt::Display for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::V4 => "IPv4",
            Self::V6 => "IPv6",
        })
    }
}

/// Which map of a table a raw entry goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    First,
    Pool,
}

/// The pool cannot hold the table beside the one the maps hold now.
#[derive(Debug, thiserror::Error)]
#[error(
    "the {family} route table needs {needed} blocks, counting those the running one uses \
     until it is replaced, and its pool has {room}"
)]
pub struct PoolFull {
    pub family: Family,
    pub needed: usize,
    pub room: u32,
}

/// A compiled table, entry for entry what the maps hold for it.
#[derive(Clone, PartialEq, Eq)]
pub struct Layout {
    first: Vec<u32>,
    /// Block index -> the address bytes leading to it, and its entries.
    blocks: BTreeMap<u32, (Vec<u8>, Vec<u32>)>,
}

impl std::fmt::Debug for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let used = self.first.iter().filter(|&&e| e != EMPTY).count();
        write!(
            f,
            "Layout {{ first: {used} entries, blocks: {} }}",
            self.blocks.len()
        )
    }
}

/// A slot of the table being built: final, or the block one byte deeper.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Slot {
    Final(Option<u32>),
    Down,
}

/// The table being built, blocks by path.
struct Draft {
    first: Vec<Slot>,
    blocks: BTreeMap<Vec<u8>, Vec<Slot>>,
}

impl Draft {
    /// The slot for `path` (two bytes and more) inside its parent.
    fn parent_slot(&mut self, path: &[u8]) -> &mut Slot {
        let (parent, byte) = path.split_at(path.len() - 1);
        if parent.len() < 2 {
            &mut self.first[first_index(path) as usize]
        } else {
            &mut self.blocks.get_mut(parent).expect("parents first")[byte[0] as usize]
        }
    }

    /// The block at `path`, made from its parent slot's value if new.
    fn descend(&mut self, path: &[u8]) {
        let slot = self.parent_slot(path);
        if let Slot::Final(value) = *slot {
            *slot = Slot::Down;
            self.blocks
                .insert(path.to_vec(), vec![Slot::Final(value); BLOCK]);
        }
    }

    /// Paints `addr/len` -> `value` over what shorter prefixes painted.
    fn paint(&mut self, addr: &[u8], len: u8, value: u32) {
        let len = usize::from(len);
        if len <= 16 {
            let span = 1usize << (16 - len);
            let start = first_index(addr) as usize & !(span - 1);
            self.first[start..start + span].fill(Slot::Final(Some(value)));
            return;
        }
        // The block indexed by byte `depth`, down to the one the prefix
        // ends in.
        let mut depth = 2;
        loop {
            self.descend(&addr[..depth]);
            let bits = len - 8 * depth;
            if bits <= 8 {
                let span = 1usize << (8 - bits);
                let start = usize::from(addr[depth]) & !(span - 1);
                let block = self.blocks.get_mut(&addr[..depth]).expect("descended");
                block[start..start + span].fill(Slot::Final(Some(value)));
                return;
            }
            depth += 1;
        }
    }
}

impl Layout {
    /// An all-empty table: what fresh maps hold.
    pub fn empty() -> Self {
        Self {
            first: vec![EMPTY; FIRST_ENTRIES as usize],
            blocks: BTreeMap::new(),
        }
    }

    /// A table that leaves every route to the trie: [`IN_TRIE`] in each
    /// first-level entry, no block.
    pub fn in_trie() -> Self {
        Self {
            first: vec![IN_TRIE; FIRST_ENTRIES as usize],
            blocks: BTreeMap::new(),
        }
    }

    /// Whether this table leaves its routes to the trie.
    pub fn is_in_trie(&self) -> bool {
        self.first.first() == Some(&IN_TRIE)
    }

    /// `routes` (address, prefix length -> value), longest match first,
    /// placed so that `previous`'s paths keep their blocks and new ones
    /// take blocks it does not use, among the pool's `room`.
    pub fn compile<const N: usize>(
        routes: &BTreeMap<([u8; N], u8), u32>,
        previous: Option<&Layout>,
        room: u32,
    ) -> Result<Self, PoolFull> {
        let family = if N == 4 { Family::V4 } else { Family::V6 };
        let mut draft = Draft {
            first: vec![Slot::Final(None); FIRST_ENTRIES as usize],
            blocks: BTreeMap::new(),
        };
        let mut by_length: Vec<_> = routes.iter().collect();
        by_length.sort_by_key(|((_, len), _)| *len);
        for ((addr, len), &value) in by_length {
            draft.paint(addr, (*len).min(8 * N as u8), value);
        }

        let kept: BTreeMap<&[u8], u32> = previous
            .map(|p| {
                p.blocks
                    .iter()
                    .map(|(&i, (path, _))| (path.as_slice(), i))
                    .collect()
            })
            .unwrap_or_default();
        let taken: BTreeSet<u32> = kept.values().copied().collect();
        let mut free = (0..room).filter(|i| !taken.contains(i));
        let mut index = BTreeMap::new();
        for path in draft.blocks.keys() {
            let i = match kept.get(path.as_slice()) {
                Some(&i) => i,
                None => free.next().ok_or(PoolFull {
                    family,
                    needed: draft.blocks.len() + taken.len()
                        - draft
                            .blocks
                            .keys()
                            .filter(|p| kept.contains_key(p.as_slice()))
                            .count(),
                    room,
                })?,
            };
            index.insert(path.clone(), i);
        }

        let raw = |slot: Slot, path: &[u8], byte: u8| match slot {
            Slot::Final(None) => EMPTY,
            Slot::Final(Some(value)) => Entry::Value(value).encode(),
            Slot::Down => {
                let mut child = path.to_vec();
                child.push(byte);
                Entry::Next(index[&child]).encode()
            }
        };
        let first = (0..FIRST_ENTRIES)
            .zip(&draft.first)
            .map(|(i, &slot)| raw(slot, &[(i >> 8) as u8], i as u8))
            .collect();
        let blocks = draft
            .blocks
            .iter()
            .map(|(path, slots)| {
                let entries = (0..=255u8)
                    .zip(slots)
                    .map(|(b, &s)| raw(s, path, b))
                    .collect();
                (index[path], (path.clone(), entries))
            })
            .collect();
        Ok(Self { first, blocks })
    }

    /// The writes that turn the maps from `previous` (unknown: `None`)
    /// into this table, in an order that never exposes a half-built path:
    /// deeper blocks first, the first level last.
    pub fn writes(&self, previous: Option<&Layout>) -> Vec<(Level, u32, u32)> {
        let mut writes = Vec::new();
        let mut blocks: Vec<_> = self.blocks.iter().collect();
        blocks.sort_by_key(|(_, (path, _))| std::cmp::Reverse(path.len()));
        for (&block, (path, entries)) in blocks {
            let old = previous
                .and_then(|p| p.blocks.get(&block))
                .filter(|(old_path, _)| old_path == path)
                .map(|(_, old)| old);
            for (byte, &raw) in (0..=255u8).zip(entries) {
                if old.is_none_or(|old| old[usize::from(byte)] != raw) {
                    writes.push((Level::Pool, pool_index(block, byte), raw));
                }
            }
        }
        for (i, &raw) in (0u32..).zip(&self.first) {
            if previous.is_none_or(|p| p.first[i as usize] != raw) {
                writes.push((Level::First, i, raw));
            }
        }
        writes
    }

    /// The table the maps hold, read through `read`, following the first
    /// level's pointers down at most `N - 2` levels; a pointer out of the
    /// pool or to a block already reached is kept as an entry only.
    pub fn read_back<const N: usize, E>(
        mut read: impl FnMut(Level, u32) -> Result<Option<u32>, E>,
    ) -> Result<Self, E> {
        let mut first = Vec::with_capacity(FIRST_ENTRIES as usize);
        for i in 0..FIRST_ENTRIES {
            first.push(read(Level::First, i)?.unwrap_or(EMPTY));
        }
        let mut blocks = BTreeMap::new();
        let mut pending: Vec<(Vec<u8>, u32)> = (0..FIRST_ENTRIES)
            .zip(&first)
            .filter_map(|(i, &raw)| match Entry::decode(raw) {
                Entry::Next(block) => Some((vec![(i >> 8) as u8, i as u8], block)),
                _ => None,
            })
            .collect();
        while let Some((path, block)) = pending.pop() {
            if path.len() >= N || blocks.contains_key(&block) {
                continue;
            }
            let mut entries = Vec::with_capacity(BLOCK);
            for byte in 0..=255u8 {
                match read(Level::Pool, pool_index(block, byte))? {
                    Some(raw) => entries.push(raw),
                    None => break,
                }
            }
            if entries.len() < BLOCK {
                continue;
            }
            for (byte, &raw) in (0..=255u8).zip(&entries) {
                if let Entry::Next(child) = Entry::decode(raw) {
                    let mut deeper = path.clone();
                    deeper.push(byte);
                    pending.push((deeper, child));
                }
            }
            blocks.insert(block, (path, entries));
        }
        Ok(Self { first, blocks })
    }
}

/// The table as the maps would hold it once written whole: what a lookup
/// over memory (`explain` with no instance) walks.
impl Levels for Layout {
    fn first(&self, index: u32) -> Option<u32> {
        self.first.get(index as usize).copied()
    }

    fn pool(&self, index: u32) -> Option<u32> {
        let (block, byte) = (index / BLOCK_ENTRIES, index % BLOCK_ENTRIES);
        match self.blocks.get(&block) {
            Some((_, entries)) => entries.get(byte as usize).copied(),
            // A block no path holds: as fresh maps hold it.
            None => Some(EMPTY),
        }
    }
}

#[cfg(test)]
mod tests;
