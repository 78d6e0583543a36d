//! What `explain` reads of the data plane's state, map by map, as the
//! program reads it: from a running instance's maps
//! ([`super::maps::MapSet`]), or from
//! the tables a config would fill them with, built in memory
//! ([`super::offline::Offline`]). Per-CPU values come one per CPU.

use std::net::IpAddr;

use lb_common::abi::{GroupEntry, NextHop, NextHopStats, OverrideEntry, PortMacs};
use lb_common::select::flowlet::FlowletState;
use lb_common::select::load::RecentLoad;

use super::maps::InspectError;

pub type Result<T> = std::result::Result<T, InspectError>;

/// One instance's forwarding state. Each read answers `None` (or 0)
/// where the data plane's lookup finds nothing.
pub trait MapView {
    /// Group `id`.
    fn group_at(&self, id: u32) -> Result<Option<GroupEntry>>;
    /// Override `index` of `FL_OVERRIDES`.
    fn override_at(&self, index: u32) -> Result<Option<OverrideEntry>>;
    /// Next hop `id`.
    fn nexthop(&self, id: u32) -> Result<Option<NextHop>>;
    /// Path quality at a [`lb_common::route::quality_index`].
    fn quality(&self, index: u32) -> Result<u32>;
    /// Entry `group * BUCKETS_PER_GROUP + bucket` of the bucket tables.
    fn bucket(&self, index: u32) -> Result<Option<u32>>;
    /// Entry `row * BUCKETS_PER_GROUP + position` of the spray sequences.
    fn spray_slot(&self, index: u32) -> Result<Option<u32>>;
    /// The MACs ingress port `ifindex` accepts.
    fn port_macs(&self, ifindex: u32) -> Result<Option<PortMacs>>;
    /// Whether [`Self::port_macs`] knows the ingress ports: where it does
    /// not, a frame's destination MAC is not checked.
    fn knows_port_macs(&self) -> bool {
        true
    }
    /// Whether egress port `ifindex` is in the devmap.
    fn has_port(&self, ifindex: u32) -> Result<bool>;
    /// The value of the longest prefix covering `dst` (4 or 16 bytes).
    fn route(&self, dst: &[u8]) -> Result<Option<u32>>;
    /// Every route's prefix of the family of `dst`: the lookup returns a
    /// value only, and explain names the prefix it came from.
    fn route_prefixes(&self, ipv6: bool) -> Result<Vec<(IpAddr, u8)>>;
    /// Each CPU's load epoch as its next packet of `len` bytes sees it.
    fn epochs(&self, len: u64) -> Result<Vec<u64>>;
    /// Next hop `id`'s counters and recent load, per CPU.
    fn nexthop_stats(&self, id: u32) -> Result<Option<Vec<NextHopStats>>>;
    /// What each CPU was told the others' flows put on next hop `id`.
    fn peer_loads(&self, id: u32) -> Result<Option<Vec<u64>>>;
    /// Entry `index` ([`lb_common::route::Destination::class_load_index`])
    /// of the loads toward a class over a member, per CPU.
    fn class_loads(&self, index: u32) -> Result<Option<Vec<RecentLoad>>>;
    /// What each CPU was told the others' flows put at class load `index`.
    fn class_peer_loads(&self, index: u32) -> Result<Option<Vec<u64>>>;
    /// Spray row `row`'s cursor, per CPU.
    fn spray_cursor(&self, row: u32) -> Result<Vec<u64>>;
    /// Flowlet table entry `index`, per CPU.
    fn flowlet(&self, index: u32) -> Result<Option<Vec<FlowletState>>>;
    /// The flowlet table's size.
    fn flowlet_capacity(&self) -> u32;
}
