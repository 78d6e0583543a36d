//! End to end through network namespaces, with the real `fabriclb run`
//! (XDP in driver mode on the leaf's veths) and the kernel forwarding on
//! the spines and the far leaf.
//!
//! Needs root; every testbed is removed even when an assertion fails.
//! Nothing here asserts how fast something happens: a loaded machine may
//! take its time, so tests wait for events (log lines, metrics) up to
//! [`fabriclb::testbed::PATIENCE`] and count what the links dropped.

mod attach;
mod bed;
mod config_file;
mod dlb;
mod fabric;
mod failover;
mod hop;
mod inspect;
mod kernel_routes;
mod links;
mod local;
mod neighbours;
mod observability;
mod overrides;
mod privileges;
mod reload;
mod restart;
mod rollback;
mod routing;
mod scenario;
mod service;
mod simulate;
mod soak;
mod sonic;
mod startup;
mod teardown;
mod telemetry;
mod traffic;
mod tx_errors;
mod watch;
