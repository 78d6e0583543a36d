//! fabriclb's pure data-plane logic, shared by the XDP program (`no_std`)
//! and the daemon, and unit-tested on the host.
//!
//! Dependency order, leaves first; nothing imports back up:
//! - [`verdict`], [`limits`]: verdict reasons, table sizes (leaves);
//! - [`packet`]: parsing, RoCEv2 semantics, checksum arithmetic, frame
//!   building for the generator and tests (feature `craft`);
//! - [`route`]: what is the box's own whatever the routes say, and what a
//!   route lookup's value means;
//! - [`select`]: flow hash, resilient buckets, recent load, flowlet and
//!   per-packet decisions;
//! - [`abi`]: program and map names, map key/value types (`aya::Pod`
//!   behind feature `user`);
//! - [`steer`]: a packet's next hop once its ECMP bucket is read
//!   (overrides, spraying, flowlets, drains), over the [`steer::Maps`] the
//!   program keeps in maps and the simulator in memory.
#![cfg_attr(not(test), no_std)]

#[cfg(any(test, feature = "craft"))]
extern crate alloc;

pub mod abi;
pub mod limits;
pub mod packet;
pub mod route;
pub mod select;
pub mod steer;
pub mod verdict;
pub mod words;
