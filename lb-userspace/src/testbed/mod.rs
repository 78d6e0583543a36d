//! A leaf-spine fabric in network namespaces, for tests, demos and
//! benchmarks. Test tooling: no product module imports it.

pub mod bpffs;
mod collective;
mod counters;
mod cross;
mod daemon;
pub mod demo;
mod drops;
mod exporters;
pub mod fabric;
pub mod frr;
mod hop;
mod leaf_maps;
mod leftovers;
mod netns;
mod queues;
pub mod redis;
pub mod scenario;
pub mod sink;
mod topology;
mod udp;
mod watch;

pub use collective::{
    Collective, CollectiveReport, FIVE_TUPLE, Leaf, run_collective, run_collective_with,
};
pub use counters::{LeafCounters, SpineCount, mmr, nexthop_labels, read_metric};
pub use cross::{CrossReport, CrossTraffic};
pub use daemon::{Daemon, PATIENCE};
pub use drops::LinkDrops;
pub use exporters::{Exporters, cpu_time};
pub use hop::{Hop, HopReport, HopRun, h1_generator, run_hop};
pub use leaf_maps::{LeafMaps, ifindex_in, leaf_ifindex, xdp_prog_id};
pub use netns::in_netns;
pub use queues::{QueueWatch, SpineQueue};
pub use topology::{
    FAR_PORT, LINK_MTU, LOSSLESS_LIMIT_BYTES, Queues, ROCE_MTU, Routing, SENT_TTL, Shape, Testbed,
    host_addr, namespaces, receiver_addr, remove_namespaces, spine_addr, tear_down_on_signal,
};
pub use udp::{LoadReport, TrafficReport, UdpLoad, run_traffic};
pub use watch::EventWatch;
