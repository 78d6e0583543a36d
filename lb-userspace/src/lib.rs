//! fabriclb's userspace: config, loader, map programming, and the testbed
//! with its RoCEv2 traffic generator.

pub mod config;
pub mod daemon;
pub mod dataplane;
pub mod metrics;
pub mod netlink;
pub mod sink;
pub mod tables;
pub mod testbed;
pub mod traffic;
pub mod txring;
