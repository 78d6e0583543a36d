//! The data plane's ABI: program and map names, and the `#[repr(C)]` key
//! and value types both sides of every map agree on. The top of the
//! crate's dependency order (packet -> select -> abi): map values embed
//! selection state, nothing below imports from here.

pub mod bench;
pub mod events;
mod forwarding;
pub mod generator;
pub mod sink;
pub mod tx_errors;

pub use forwarding::*;
