//! Ids for groups, next hops and destination classes that survive a
//! reload: the previous owner's first, then ids neither config holds.

use std::collections::{BTreeSet, HashMap};

use super::TablesError;

/// Hands out ids: the previous owner's first, then ids nobody holds in
/// either the old or the new config.
pub(super) struct Ids<K> {
    previous: HashMap<K, u32>,
    taken: BTreeSet<u32>,
    max: u32,
    what: &'static str,
}

impl<K: std::hash::Hash + Eq> Ids<K> {
    pub(super) fn new(previous: HashMap<K, u32>, max: u32, what: &'static str) -> Self {
        let taken = previous.values().copied().collect();
        Self {
            previous,
            taken,
            max,
            what,
        }
    }

    fn fresh(&mut self) -> Result<u32, TablesError> {
        let id =
            (0..self.max)
                .find(|id| !self.taken.contains(id))
                .ok_or(TablesError::OutOfIds {
                    what: self.what,
                    max: self.max,
                })?;
        self.taken.insert(id);
        Ok(id)
    }

    /// Holds `id` back: no key is given it.
    pub(super) fn reserve(&mut self, id: u32) {
        self.taken.insert(id);
    }

    /// Ids for `keys`, in order.
    pub(super) fn ids(&mut self, keys: &[K]) -> Result<Vec<u32>, TablesError> {
        keys.iter()
            .map(|k| match self.previous.get(k) {
                Some(&id) => Ok(id),
                None => self.fresh(),
            })
            .collect()
    }
}
