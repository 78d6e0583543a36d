//! Next-hop selection: the flow hash, resilient buckets, recent load and
//! the flowlet/per-packet decisions.

pub mod buckets;
pub mod choice;
pub mod flowlet;
pub mod hash;
pub mod load;
pub mod overrides;
pub mod placement;
pub mod position;
pub mod quality;
