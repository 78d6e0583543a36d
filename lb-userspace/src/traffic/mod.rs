//! RoCEv2 traffic shaped like collectives, sent through an AF_PACKET TX
//! ring. Test tooling: no product module imports it.

mod generator;
pub mod txring;

pub use generator::*;
