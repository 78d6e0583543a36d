use std::collections::BTreeMap;

use lb_common::limits::LOCAL_ROUTE;
use lb_common::route::table::{
    BLOCK_ENTRIES, EMPTY, FIRST_ENTRIES, IN_TRIE, Levels, lookup, lookup_entry, or_trie,
};
use proptest::prelude::*;

use super::{Family, Layout, Level, PoolFull};

type Routes = BTreeMap<([u8; 4], u8), u32>;

/// The maps, as the data plane reads them.
struct Memory {
    first: Vec<u32>,
    pool: Vec<u32>,
}

impl Memory {
    fn new(room: u32) -> Self {
        Self {
            first: vec![EMPTY; FIRST_ENTRIES as usize],
            pool: vec![EMPTY; (room * BLOCK_ENTRIES) as usize],
        }
    }

    fn apply(&mut self, (level, index, raw): (Level, u32, u32)) {
        match level {
            Level::First => self.first[index as usize] = raw,
            Level::Pool => self.pool[index as usize] = raw,
        }
    }
}

impl Levels for Memory {
    fn first(&self, index: u32) -> Option<u32> {
        self.first.get(index as usize).copied()
    }
    fn pool(&self, index: u32) -> Option<u32> {
        self.pool.get(index as usize).copied()
    }
}

fn masked(addr: [u8; 4], len: u8) -> [u8; 4] {
    let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
    (u32::from_be_bytes(addr) & mask).to_be_bytes()
}

/// Longest-prefix match the slow way.
fn naive(routes: &Routes, dst: [u8; 4]) -> Option<u32> {
    routes
        .iter()
        .filter(|((addr, len), _)| masked(dst, *len) == *addr)
        .max_by_key(|((_, len), _)| *len)
        .map(|(_, &value)| value)
}

/// Each prefix's first and last address and the ones just outside.
fn probes(sets: &[&Routes]) -> Vec<[u8; 4]> {
    let mut probes = vec![[0; 4], [255; 4]];
    for ((addr, len), _) in sets.iter().flat_map(|r| r.iter()) {
        let start = u32::from_be_bytes(*addr);
        let end = start | u32::MAX.checked_shr(u32::from(*len)).unwrap_or(0);
        for a in [start, end, start.wrapping_sub(1), end.wrapping_add(1)] {
            probes.push(a.to_be_bytes());
        }
    }
    probes
}

fn routes(list: &[([u8; 4], u8, u32)]) -> Routes {
    list.iter()
        .map(|&(a, l, v)| ((masked(a, l), l), v))
        .collect()
}

/// Prefixes crowded into a few /16s so that they nest and share blocks.
fn route_sets() -> impl Strategy<Value = Routes> {
    let byte = prop::sample::select(vec![0u8, 1, 7, 128, 200, 255]);
    let prefix = (
        prop::sample::select(vec![10u8, 11]),
        0u8..3,
        byte.clone(),
        byte,
        prop::sample::select(vec![0u8, 8, 12, 15, 16, 17, 20, 23, 24, 25, 30, 31, 32]),
        prop::sample::select(vec![0u32, 1, 2, LOCAL_ROUTE]),
    );
    prop::collection::vec(prefix, 0..24).prop_map(|list| {
        list.into_iter()
            .map(|(a, b, c, d, len, value)| ((masked([a, b, c, d], len), len), value))
            .collect()
    })
}

const ROOM: u32 = 64;

fn written(layout: &Layout) -> Memory {
    let mut memory = Memory::new(ROOM);
    for write in layout.writes(None) {
        memory.apply(write);
    }
    memory
}

#[test]
fn nested_prefixes_and_local_addresses_match_longest_first() {
    let table = routes(&[
        ([0, 0, 0, 0], 0, 9),
        ([10, 0, 0, 0], 8, 1),
        ([10, 1, 0, 0], 16, 2),
        ([10, 1, 7, 0], 24, 3),
        ([10, 1, 7, 128], 25, 4),
        ([10, 1, 7, 129], 32, LOCAL_ROUTE),
        ([10, 2, 0, 0], 20, 5),
    ]);
    let layout = Layout::compile(&table, None, ROOM).expect("fits");
    // 10.1/16 gets a block for /24 and /25, 10.1.7/24 one for the /32;
    // the /20 fills 16 entries of 10.2's block.
    assert_eq!(layout.blocks.len(), 3);
    let memory = written(&layout);
    for (dst, value) in [
        ([10, 1, 7, 129], Some(LOCAL_ROUTE)),
        ([10, 1, 7, 130], Some(4)),
        ([10, 1, 7, 127], Some(3)),
        ([10, 1, 8, 0], Some(2)),
        ([10, 2, 15, 255], Some(5)),
        ([10, 2, 16, 0], Some(1)),
        ([11, 0, 0, 0], Some(9)),
    ] {
        assert_eq!(lookup(&memory, &dst), value, "{dst:?}");
        assert_eq!(naive(&table, dst), value, "{dst:?}");
    }
}

#[test]
fn a_table_the_pool_cannot_hold_beside_the_running_one_is_refused() {
    let hosts = |third: u8| routes(&[([10, 1, third, 1], 32, 1), ([10, 1, third, 2], 32, 2)]);
    let two = Layout::compile(&hosts(0), None, 2).expect("10.1/16 and 10.1.0/24: two blocks");
    // Another /24 under the same /16 needs one more block: 10.1's block
    // stays, 10.1.0's stays in use until the new table is written.
    let err = Layout::compile(&hosts(1), Some(&two), 2).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the IPv4 route table needs 3 blocks, counting those the running one uses \
         until it is replaced, and its pool has 2"
    );
    assert!(matches!(
        err,
        PoolFull {
            family: Family::V4,
            needed: 3,
            room: 2
        }
    ));
    Layout::compile(&hosts(1), Some(&two), 3).expect("room for both");
}

#[test]
fn the_table_reads_back_as_written() {
    let table = routes(&[
        ([10, 1, 7, 129], 32, LOCAL_ROUTE),
        ([10, 1, 0, 0], 16, 2),
        ([11, 0, 0, 0], 23, 1),
    ]);
    let layout = Layout::compile(&table, None, ROOM).expect("fits");
    let memory = written(&layout);
    let read = Layout::read_back::<4, ()>(|level, index| {
        Ok(match level {
            Level::First => memory.first(index),
            Level::Pool => memory.pool(index),
        })
    })
    .expect("read");
    assert_eq!(read, layout);
    assert!(read.writes(Some(&layout)).is_empty());
}

proptest! {
    // Each case compiles and writes whole tables: a few dozen cover the
    // shapes (nested, shared blocks, local /32s) in a debug build's time.
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn lookups_equal_naive_longest_prefix_match(table in route_sets()) {
        let layout = Layout::compile(&table, None, ROOM).expect("fits");
        let memory = written(&layout);
        for dst in probes(&[&table]) {
            prop_assert_eq!(lookup(&memory, &dst), naive(&table, dst), "{:?}", dst);
        }
    }

    /// From one route set to the next, every write leaves each address
    /// with its old or its new route (a block is written before what
    /// points to it, a block in use only changes in place), and the
    /// end is the new table exactly, read back as compiled.
    #[test]
    fn updates_never_expose_a_half_built_table(steps in prop::collection::vec(route_sets(), 2..5)) {
        let mut layout = Layout::compile(&steps[0], None, ROOM).expect("fits");
        let mut memory = written(&layout);
        for pair in steps.windows(2) {
            let (old, new) = (&pair[0], &pair[1]);
            let next = Layout::compile(new, Some(&layout), ROOM).expect("fits");
            for (&block, (path, _)) in &next.blocks {
                if let Some((old_path, _)) = layout.blocks.get(&block) {
                    prop_assert_eq!(old_path, path, "block {} changed hands", block);
                }
            }
            let expected: Vec<_> = probes(&[old, new])
                .into_iter()
                .map(|dst| (dst, naive(old, dst), naive(new, dst)))
                .collect();
            for write in next.writes(Some(&layout)) {
                memory.apply(write);
                for &(dst, before, after) in &expected {
                    let seen = lookup(&memory, &dst);
                    prop_assert!(
                        seen == before || seen == after,
                        "{:?} -> {:?} after {:?}", dst, seen, write
                    );
                }
            }
            for &(dst, _, after) in &expected {
                prop_assert_eq!(lookup(&memory, &dst), after, "{:?}", dst);
            }
            layout = next;
        }
    }

    /// A write that failed part-way, undone by writing the old table over
    /// the new one, leaves the old routes.
    #[test]
    fn a_rollback_restores_the_old_routes(old in route_sets(), new in route_sets(), cut in 0usize..2000) {
        let before = Layout::compile(&old, None, ROOM).expect("fits");
        let mut memory = written(&before);
        let after = Layout::compile(&new, Some(&before), ROOM).expect("fits");
        for write in after.writes(Some(&before)).into_iter().take(cut) {
            memory.apply(write);
        }
        for write in before.writes(Some(&after)) {
            memory.apply(write);
        }
        for dst in probes(&[&old, &new]) {
            prop_assert_eq!(lookup(&memory, &dst), naive(&old, dst), "{:?}", dst);
        }
    }
}

/// IPv6: a fabric's /48s and /64s under one /32, a /128 local address
/// inside one of them, the default route; each address takes the longest
/// prefix, one read per byte the prefix reaches. A table that does not
/// fit its pool is refused as IPv6's, and the table that leaves the
/// routes to the trie sends every address there.
#[test]
fn ipv6_prefixes_match_longest_first_and_a_table_left_to_the_trie_asks_it() {
    let v6 = |groups: [u16; 8]| {
        let mut a = [0u8; 16];
        for (i, g) in groups.iter().enumerate() {
            a[2 * i..2 * i + 2].copy_from_slice(&g.to_be_bytes());
        }
        a
    };
    let routes: BTreeMap<([u8; 16], u8), u32> = [
        ((v6([0; 8]), 0), 9),
        ((v6([0x2001, 0xdb8, 1, 0, 0, 0, 0, 0]), 48), 1),
        ((v6([0x2001, 0xdb8, 1, 0x200, 0, 0, 0, 0]), 64), 2),
        (
            (v6([0x2001, 0xdb8, 1, 0x200, 0, 0, 0, 7]), 128),
            LOCAL_ROUTE,
        ),
    ]
    .into_iter()
    .collect();
    let layout = Layout::compile(&routes, None, ROOM).expect("fits");
    let memory = written(&layout);
    for (dst, value) in [
        (v6([0x2001, 0xdb8, 1, 0x200, 0, 0, 0, 7]), Some(LOCAL_ROUTE)),
        (v6([0x2001, 0xdb8, 1, 0x200, 0, 0, 0, 8]), Some(2)),
        (v6([0x2001, 0xdb8, 1, 0x201, 0, 0, 0, 7]), Some(1)),
        (v6([0x2001, 0xdb8, 2, 0, 0, 0, 0, 1]), Some(9)),
    ] {
        assert_eq!(lookup(&memory, &dst), value, "{dst:?}");
    }
    // The /128 needs a block per byte past the second: fourteen.
    let err = Layout::compile(&routes, None, 13).unwrap_err();
    assert_eq!(err.family, Family::V6);
    assert!(
        err.to_string()
            .starts_with("the IPv6 route table needs 14 blocks"),
        "{err}"
    );

    let trie = Layout::in_trie();
    assert!(trie.is_in_trie() && !layout.is_in_trie());
    let mut memory = written(&layout);
    for write in trie.writes(Some(&layout)) {
        memory.apply(write);
    }
    let dst = v6([0x2001, 0xdb8, 1, 0x200, 0, 0, 0, 8]);
    let raw = lookup_entry(&memory, &dst);
    assert_eq!(raw, IN_TRIE);
    assert_eq!(
        lb_common::route::table::entry_value(or_trie(raw, || Some(5))),
        Some(5)
    );
    assert_eq!(or_trie(raw, || None), EMPTY);
    // And back: the table written over the trie's answers again.
    for write in layout.writes(Some(&trie)) {
        memory.apply(write);
    }
    assert_eq!(lookup(&memory, &dst), Some(2));
}
