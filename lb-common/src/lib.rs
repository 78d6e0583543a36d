//! fabriclb's pure data-plane logic: packet parsing, flow hashing, bucket
//! assignment and header rewriting, shared by the XDP program (`no_std`) and
//! the daemon, and unit-tested on the host.
#![cfg_attr(not(test), no_std)]

#[cfg(any(test, feature = "craft"))]
extern crate alloc;

pub mod buckets;
pub mod checksum;
#[cfg(any(test, feature = "craft"))]
pub mod craft;
pub mod flowlet;
pub mod hash;
pub mod maps;
pub mod parse;
pub mod roce;
