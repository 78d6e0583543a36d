//! Table sizes and sentinel values both sides size their maps and loops
//! by. A leaf module: bucket assignment needs them as much as the map ABI.

pub const MAX_ROUTES: u32 = 16_384;
/// Room each route trie keeps beyond [`MAX_ROUTES`] for the box's own
/// addresses, so a config at its limit still leaves them local.
pub const MAX_LOCAL_ROUTES: u32 = 1024;
/// Blocks in the IPv4 route table's pool (`route::table`): a prefix
/// longer than /16 needs at most one block for its third byte and, longer
/// than /24, one more for its fourth, so every config and local address
/// fits.
pub const ROUTE4_POOL_BLOCKS: u32 = 2 * (MAX_ROUTES + MAX_LOCAL_ROUTES);
/// Blocks in the IPv6 route table's pool. An IPv6 prefix may need a block
/// for each byte past its second, so no pool of sensible size fits every
/// config: this one fits a block per route and local address beside the
/// running table's, ample for a fabric's prefixes under a few common
/// ones; a table that does not fit leaves the IPv6 routes to the trie.
pub const ROUTE6_POOL_BLOCKS: u32 = MAX_ROUTES + MAX_LOCAL_ROUTES;
pub const MAX_GROUPS: u32 = 64;
/// Destination classes, class 0 (none) included. A class is one of a
/// group's destinations (a leaf's prefixes, say): its routes take the
/// group's next hops, each rated by the next switch's queue toward that
/// destination rather than by the next hop alone, since a spine's queues
/// are per egress port, i.e. per destination leaf.
pub const MAX_CLASSES: u32 = 64;
/// Traffic-engineering overrides a group may have.
pub const MAX_OVERRIDES_PER_GROUP: u32 = 16;
pub const MAX_NEXTHOPS: u32 = 1024;
pub const MAX_NEXTHOPS_PER_GROUP: usize = 64;
pub const MAX_EGRESS_PORTS: u32 = 256;
/// Flowlet table entries unless the config says otherwise.
pub const FLOWLET_TABLE_DEFAULT: u32 = 65_536;
/// Buckets per group; a power of two so a hash picks one with a mask. 512
/// keeps the share error under 0.2% per next hop up to 64 next hops.
pub const BUCKETS_PER_GROUP: u32 = 512;
/// Bucket value for "no usable next hop": the packet goes to the kernel.
pub const NO_NEXTHOP: u32 = u32::MAX;
/// Route value for the box's own addresses: the packet is the kernel's,
/// whatever covers it. No group id: those stay below [`MAX_GROUPS`].
pub const LOCAL_ROUTE: u32 = u32::MAX;
/// Quality rows and spray sequences: one per group (class 0), one per
/// class above it.
pub const SPRAY_ROWS: u32 = MAX_GROUPS + MAX_CLASSES - 1;
/// Recent loads kept per class above 0 and member slot: what a CPU sent
/// toward each destination over each path
/// ([`crate::route::Destination::class_load_index`]).
pub const CLASS_LOAD_ROWS: u32 = (MAX_CLASSES - 1) * MAX_NEXTHOPS_PER_GROUP as u32;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_count_is_a_power_of_two() {
        assert!(BUCKETS_PER_GROUP.is_power_of_two());
    }
}
