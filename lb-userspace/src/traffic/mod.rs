//! RoCEv2 traffic shaped like collectives, sent through an AF_PACKET TX
//! ring. Test tooling: no product module imports it.

mod generator;
mod send;
pub mod txring;

pub use generator::{Generator, Pattern, Sender, Workload};
pub use send::{Pace, SendReport, resolve_sender, send};
