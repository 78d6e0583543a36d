//! The data plane's state for one simulated CPU: the tables a config
//! makes ([`Offline`], read as the program reads its maps), and in memory
//! what the program writes (flowlet table, spray cursors, recent loads,
//! counters), all behind `lb_common::steer::Maps`, so the choice made is
//! the program's own code.

use std::collections::HashMap;

use lb_common::abi::events::{EVENT_NONE, PendingEvent};
use lb_common::abi::{GroupEntry, GroupStats, NEXTHOP_USABLE, NextHopStats};
use lb_common::limits::{BUCKETS_PER_GROUP, NO_NEXTHOP};
use lb_common::route::Destination;
use lb_common::select::choice::Drawn;
use lb_common::select::flowlet::FlowletState;
use lb_common::select::load::{load_epoch, member_load};
use lb_common::steer::{Counted, Maps, MemberWalk, member};

use crate::inspect::offline::Offline;
use crate::inspect::view::MapView;

/// One CPU's maps over `tables`, at the simulated time `now_ns`.
pub struct MemoryMaps<'a> {
    tables: &'a Offline,
    now_ns: u64,
    load_clock: u64,
    flowlets: HashMap<u32, FlowletState>,
    cursors: HashMap<u32, u64>,
    nexthops: HashMap<u32, NextHopStats>,
    groups: HashMap<u32, GroupStats>,
    /// The flow event the last packet noted.
    noted: PendingEvent,
}

impl<'a> MemoryMaps<'a> {
    pub fn new(tables: &'a Offline) -> Self {
        Self {
            tables,
            now_ns: 0,
            load_clock: 0,
            flowlets: HashMap::new(),
            cursors: HashMap::new(),
            nexthops: HashMap::new(),
            groups: HashMap::new(),
            noted: PendingEvent::default(),
        }
    }

    /// Moves the clock flowlet gaps are measured on to `now_ns`.
    pub fn set_now(&mut self, now_ns: u64) {
        self.now_ns = now_ns;
    }

    /// Counts a forwarded packet of `len` bytes on next hop `nh_id`, and
    /// its recent load at `epoch` where the group tracks one (the
    /// program's `count::forwarded`).
    pub fn forwarded(&mut self, nh_id: u32, len: u64, epoch: Option<u64>) {
        let stats = self.nexthops.entry(nh_id).or_default();
        stats.packets += 1;
        stats.bytes += len;
        if let Some(epoch) = epoch {
            stats.load.add(epoch, len);
        }
    }

    pub fn group_stats(&self, group: u32) -> GroupStats {
        self.groups.get(&group).copied().unwrap_or_default()
    }

    /// The flow event the packet just chosen noted, cleared.
    pub fn take_noted(&mut self) -> Option<PendingEvent> {
        let noted = std::mem::take(&mut self.noted);
        (noted.kind != EVENT_NONE).then_some(noted)
    }

    fn load(&self, nh_id: u32, epoch: u64) -> u64 {
        let own = self
            .nexthops
            .get(&nh_id)
            .map(|s| s.load)
            .unwrap_or_default();
        // One CPU: no other CPU's flows to add.
        member_load(&own, epoch, 0)
    }
}

impl Maps for MemoryMaps<'_> {
    fn usable(&self, nh_id: u32) -> bool {
        matches!(self.tables.nexthop(nh_id), Ok(Some(nh)) if nh.flags & NEXTHOP_USABLE != 0)
    }

    fn quality(&self, destination: Destination, nh_id: u32) -> u32 {
        (self.tables)
            .quality(destination.quality_index(nh_id))
            .unwrap_or(0)
    }

    fn slot_of(&self, group: &GroupEntry, nh_id: u32) -> Option<u32> {
        (0..group.member_count).find(|&slot| member(group, slot) == nh_id)
    }

    fn choose(
        &self,
        group: &GroupEntry,
        destination: Destination,
        epoch: u64,
        current: Option<u32>,
        own: u64,
        drawn: Drawn,
    ) -> Option<u32> {
        let mut walk = MemberWalk::new(drawn, current);
        for slot in 0..group.member_count {
            let nh_id = member(group, slot);
            if nh_id == NO_NEXTHOP {
                break;
            }
            walk.visit(slot, nh_id, self.usable(nh_id), || {
                (self.load(nh_id, epoch), self.quality(destination, nh_id))
            });
        }
        walk.decide(own)
    }

    fn spray_entry(&self, destination: Destination, index: u32) -> Option<u32> {
        (self.tables)
            .spray_slot(destination.spray_row() * BUCKETS_PER_GROUP + index)
            .ok()
            .flatten()
    }

    fn next_position(&mut self, destination: Destination) -> Option<u64> {
        let cursor = self.cursors.entry(destination.spray_row()).or_default();
        let at = *cursor;
        *cursor = at.wrapping_add(1);
        Some(at)
    }

    fn load_epoch(&mut self, len: u64) -> Option<u64> {
        self.load_clock += len;
        Some(load_epoch(self.load_clock))
    }

    fn now(&self) -> u64 {
        self.now_ns
    }

    fn flowlet_table_size(&self) -> u32 {
        self.tables.flowlet_capacity()
    }

    fn flowlet(&self, index: u32) -> Option<FlowletState> {
        (index < self.flowlet_table_size())
            .then(|| self.flowlets.get(&index).copied().unwrap_or_default())
    }

    fn set_flowlet(&mut self, index: u32, state: FlowletState) {
        self.flowlets.insert(index, state);
    }

    fn move_load(&mut self, from: u32, to: u32, epoch: u64, bytes: u64) {
        self.nexthops
            .entry(from)
            .or_default()
            .load
            .remove(epoch, bytes);
        self.nexthops.entry(to).or_default().load.add(epoch, bytes);
    }

    fn count(&mut self, group: u32, counted: Counted) {
        let stats = self.groups.entry(group).or_default();
        match counted {
            Counted::Sprayed => stats.sprayed += 1,
            Counted::Pinned => stats.pinned += 1,
            Counted::NewFlowlet => stats.new_flowlets += 1,
            Counted::FlowletMove => stats.flowlet_moves += 1,
        }
    }

    /// Overrides' counters are not part of a simulation's report.
    fn count_override(&mut self, _index: u32, _len: u64, _fallback: bool) {}

    fn note(&mut self, event: &PendingEvent) {
        self.noted = *event;
    }
}
