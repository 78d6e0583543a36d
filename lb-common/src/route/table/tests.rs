use super::*;

/// A table in two vectors, as the maps hold it.
struct Table {
    first: [u32; FIRST_ENTRIES as usize],
    pool: [u32; 4 * BLOCK_ENTRIES as usize],
}

impl Table {
    fn empty() -> Self {
        Self {
            first: [EMPTY; FIRST_ENTRIES as usize],
            pool: [EMPTY; 4 * BLOCK_ENTRIES as usize],
        }
    }
}

impl Levels for Table {
    fn first(&self, index: u32) -> Option<u32> {
        self.first.get(index as usize).copied()
    }
    fn pool(&self, index: u32) -> Option<u32> {
        self.pool.get(index as usize).copied()
    }
}

fn set(table: &mut Table, block: u32, byte: u8, entry: Entry) {
    table.pool[pool_index(block, byte) as usize] = entry.encode();
}

#[test]
fn entries_round_trip_and_zero_is_empty() {
    for entry in [
        Entry::Empty,
        Entry::Value(0),
        Entry::Value(63),
        Entry::Value(LOCAL_ROUTE),
        Entry::Next(0),
        Entry::Next(34_815),
    ] {
        assert_eq!(Entry::decode(entry.encode()), entry);
    }
    assert_eq!(Entry::decode(0), Entry::Empty);
    // Group 0 and block 0 are not the zeroed entry.
    assert_ne!(Entry::Value(0).encode(), EMPTY);
    assert_ne!(Entry::Next(0).encode(), EMPTY);
    // Unmarked garbage is no route rather than group 5.
    assert_eq!(Entry::decode(5), Entry::Empty);
}

/// 10.1.0.0/16 -> 1 in the first level; 10.2.0.0/16 -> 2 with
/// 10.2.7.0/24 -> 3 in block 0 and 10.2.7.9/32 local in block 1.
#[test]
fn each_level_answers_for_its_own_bytes() {
    let mut t = Table::empty();
    t.first[0x0a01] = Entry::Value(1).encode();
    t.first[0x0a02] = Entry::Next(0).encode();
    for byte in 0..=255 {
        set(&mut t, 0, byte, Entry::Value(2));
        set(&mut t, 1, byte, Entry::Value(3));
    }
    set(&mut t, 0, 7, Entry::Next(1));
    set(&mut t, 1, 9, Entry::Value(LOCAL_ROUTE));
    for (addr, value) in [
        ([10, 1, 200, 3], Some(1)),
        ([10, 2, 6, 255], Some(2)),
        ([10, 2, 7, 8], Some(3)),
        ([10, 2, 7, 9], Some(LOCAL_ROUTE)),
        ([10, 3, 0, 0], None),
    ] {
        assert_eq!(lookup(&t, &addr), value, "{addr:?}");
    }
    // IPv6 strides are the same: the first two bytes, then one a level;
    // a final entry answers for every byte below it.
    let mut v6 = [0; 16];
    v6[..4].copy_from_slice(&[10, 2, 7, 9]);
    assert_eq!(lookup(&t, &v6), Some(LOCAL_ROUTE));
    set(&mut t, 1, 9, Entry::Next(2));
    for byte in 0..=255 {
        set(&mut t, 2, byte, Entry::Value(4));
    }
    assert_eq!(lookup(&t, &v6), Some(4));
    assert_eq!(
        lookup(&t, &[10, 2, 7, 9]),
        None,
        "a pointer past the last byte"
    );
}

#[test]
fn a_pointer_out_of_the_pool_or_past_the_address_is_no_route() {
    let mut t = Table::empty();
    t.first[0x0a01] = Entry::Next(9).encode();
    assert_eq!(lookup(&t, &[10, 1, 0, 0]), None);
    t.first[0x0a02] = Entry::Next(0).encode();
    set(&mut t, 0, 0, Entry::Next(1));
    set(&mut t, 1, 0, Entry::Next(2));
    assert_eq!(lookup(&t, &[10, 2, 0, 0]), None);
    // A block index whose pool index wraps stays out of range.
    t.first[0x0a03] = Entry::Next(0x7fff_ffff).encode();
    assert_eq!(lookup(&t, &[10, 3, 0, 0]), None);
}
