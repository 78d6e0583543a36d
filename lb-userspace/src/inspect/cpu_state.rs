//! One CPU's data-plane state as `lb_common::steer` reads and writes it,
//! over a [`MapView`]: what the program reads comes from the view (an
//! instance's maps, or a config's tables built in memory), what it writes
//! is kept here, over the view's values. `explain` runs one packet's
//! choice on it, `simulate` a whole capture: the choice is the program's
//! own code either way.

use std::cell::RefCell;
use std::collections::HashMap;

use lb_common::abi::events::{EVENT_NONE, PendingEvent};
use lb_common::abi::{GroupEntry, GroupStats, NEXTHOP_USABLE, NextHopStats};
use lb_common::limits::{BUCKETS_PER_GROUP, NO_NEXTHOP};
use lb_common::route::Destination;
use lb_common::select::choice::Drawn;
use lb_common::select::flowlet::FlowletState;
use lb_common::select::load::{RecentLoad, member_load};
use lb_common::steer::{Counted, Decision, Maps, MemberWalk, member};

use super::maps::InspectError;
use super::view::MapView;

/// CPU `cpu` of `view`, at the flowlet clock's `now_ns`.
pub struct CpuState<'a> {
    view: &'a dyn MapView,
    cpu: usize,
    now_ns: u64,
    /// Bytes added to the CPU's load clock since the view's.
    added: u64,
    flowlets: HashMap<u32, FlowletState>,
    cursors: HashMap<u32, u64>,
    nexthops: HashMap<u32, NextHopStats>,
    /// By [`Destination::class_load_index`].
    class_loads: HashMap<u32, RecentLoad>,
    groups: HashMap<u32, GroupStats>,
    /// The flow event the last packet noted.
    noted: PendingEvent,
    decision: Option<Decision>,
    /// The first read of the view that failed: the choice then saw
    /// nothing there, so what it decided is not the program's.
    failed: RefCell<Option<InspectError>>,
}

impl<'a> CpuState<'a> {
    pub fn new(view: &'a dyn MapView, cpu: usize, now_ns: u64) -> Self {
        Self {
            view,
            cpu,
            now_ns,
            added: 0,
            flowlets: HashMap::new(),
            cursors: HashMap::new(),
            nexthops: HashMap::new(),
            class_loads: HashMap::new(),
            groups: HashMap::new(),
            noted: PendingEvent::default(),
            decision: None,
            failed: RefCell::new(None),
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
        let stats = self.stats_mut(nh_id);
        stats.packets += 1;
        stats.bytes += len;
        if let Some(epoch) = epoch {
            stats.load.add(epoch, len);
        }
    }

    /// This CPU's counters of group `group`, as the choices here left them.
    pub fn group_stats(&self, group: u32) -> GroupStats {
        self.groups.get(&group).copied().unwrap_or_default()
    }

    /// The flow event the packet just chosen noted, cleared.
    pub fn take_noted(&mut self) -> Option<PendingEvent> {
        let noted = std::mem::take(&mut self.noted);
        (noted.kind != EVENT_NONE).then_some(noted)
    }

    /// What the last dynamic choice decided, cleared.
    pub fn take_decision(&mut self) -> Option<Decision> {
        self.decision.take()
    }

    /// The first read of the view that failed, if one did.
    pub fn failed(&self) -> Result<(), InspectError> {
        match self.failed.borrow_mut().take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// `read`'s value, or `default` once it failed (said by [`Self::failed`]).
    fn read<T>(&self, read: Result<T, InspectError>, default: T) -> T {
        read.unwrap_or_else(|e| {
            self.failed.borrow_mut().get_or_insert(e);
            default
        })
    }

    /// This CPU's value of a per-CPU read.
    fn on_cpu<T: Copy>(&self, read: Result<Option<Vec<T>>, InspectError>) -> Option<T> {
        self.read(read, None)?.get(self.cpu).copied()
    }

    fn stats(&self, nh_id: u32) -> NextHopStats {
        match self.nexthops.get(&nh_id) {
            Some(stats) => *stats,
            None => (self.on_cpu(self.view.nexthop_stats(nh_id))).unwrap_or_default(),
        }
    }

    fn stats_mut(&mut self, nh_id: u32) -> &mut NextHopStats {
        let stats = self.stats(nh_id);
        self.nexthops.entry(nh_id).or_insert(stats)
    }

    /// Class load `index`, as the view has it or this CPU left it; `None`
    /// past the map ([`lb_common::limits::NO_NEXTHOP`] included).
    fn class_load(&self, index: u32) -> Option<RecentLoad> {
        match self.class_loads.get(&index) {
            Some(load) => Some(*load),
            None => self.on_cpu(self.view.class_loads(index)),
        }
    }

    fn class_load_mut(&mut self, index: u32) -> Option<&mut RecentLoad> {
        let load = self.class_load(index)?;
        Some(self.class_loads.entry(index).or_insert(load))
    }

    /// What a choice toward `destination` weighs of the member `nh_id` in
    /// `slot`, this CPU's and what the daemon told it of the others': the
    /// load toward a class above 0 over it, else the next hop's (the
    /// program's `weighed_load`).
    pub fn weighed_load(&self, destination: Destination, slot: u32, nh_id: u32, epoch: u64) -> u64 {
        let index = destination.class_load_index(slot);
        if let Some(own) = self.class_load(index) {
            let peers = self.on_cpu(self.view.class_peer_loads(index)).unwrap_or(0);
            return member_load(&own, epoch, peers);
        }
        let peers = self.on_cpu(self.view.peer_loads(nh_id)).unwrap_or(0);
        member_load(&self.stats(nh_id).load, epoch, peers)
    }
}

impl Maps for CpuState<'_> {
    fn usable(&self, nh_id: u32) -> bool {
        self.read(self.view.nexthop(nh_id), None)
            .is_some_and(|nh| nh.flags & NEXTHOP_USABLE != 0)
    }

    fn quality(&self, destination: Destination, nh_id: u32) -> u32 {
        self.read(self.view.quality(destination.quality_index(nh_id)), 0)
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
        let mut walk = MemberWalk::new(drawn, current, own);
        for slot in 0..group.member_count {
            let nh_id = member(group, slot);
            if nh_id == NO_NEXTHOP {
                break;
            }
            walk.visit(slot, nh_id, self.usable(nh_id), || {
                (
                    self.weighed_load(destination, slot, nh_id, epoch),
                    self.quality(destination, nh_id),
                )
            });
        }
        walk.decide()
    }

    fn spray_entry(&self, destination: Destination, index: u32) -> Option<u32> {
        let at = destination.spray_row() * BUCKETS_PER_GROUP + index;
        self.read(self.view.spray_slot(at), None)
    }

    fn next_position(&mut self, destination: Destination) -> Option<u64> {
        let row = destination.spray_row();
        let at = match self.cursors.get(&row) {
            Some(at) => *at,
            None => {
                let cursors = self.read(self.view.spray_cursor(row), Vec::new());
                cursors.get(self.cpu).copied().unwrap_or(0)
            }
        };
        self.cursors.insert(row, at.wrapping_add(1));
        Some(at)
    }

    fn cpu(&self) -> u32 {
        // Possible CPUs, which index the per-CPU values, number far below.
        self.cpu as u32
    }

    fn load_epoch(&mut self, len: u64) -> Option<u64> {
        self.added += len;
        let epochs = self.read(self.view.epochs(self.added), Vec::new());
        epochs.get(self.cpu).copied()
    }

    fn now(&self) -> u64 {
        self.now_ns
    }

    fn flowlet_table_size(&self) -> u32 {
        self.view.flowlet_capacity()
    }

    fn flowlet(&self, index: u32) -> Option<FlowletState> {
        match self.flowlets.get(&index) {
            Some(state) => Some(*state),
            None => self.on_cpu(self.view.flowlet(index)),
        }
    }

    fn set_flowlet(&mut self, index: u32, state: FlowletState) {
        self.flowlets.insert(index, state);
    }

    fn move_load(&mut self, from: u32, to: u32, epoch: u64, bytes: u64) {
        self.stats_mut(from).load.remove(epoch, bytes);
        self.stats_mut(to).load.add(epoch, bytes);
    }

    fn add_class_load(&mut self, destination: Destination, slot: u32, epoch: u64, len: u64) {
        if let Some(load) = self.class_load_mut(destination.class_load_index(slot)) {
            load.add(epoch, len);
        }
    }

    fn remove_class_load(&mut self, destination: Destination, slot: u32, epoch: u64, bytes: u64) {
        if let Some(load) = self.class_load_mut(destination.class_load_index(slot)) {
            load.remove(epoch, bytes);
        }
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

    /// Overrides' counters are neither explained nor simulated.
    fn count_override(&mut self, _index: u32, _len: u64, _fallback: bool) {}

    fn note(&mut self, event: &PendingEvent) {
        self.noted = *event;
    }

    fn decided(&mut self, decision: &Decision) {
        self.decision = Some(*decision);
    }
}
