//! The fabriclb daemon's library: config, loader, map programming.

pub mod config;
pub mod daemon;
pub mod dataplane;
pub mod metrics;
pub mod netlink;
pub mod tables;
pub mod testbed;
