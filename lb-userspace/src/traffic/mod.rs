//! RoCEv2 traffic shaped like collectives, sent through an AF_PACKET TX
//! ring or, for XDP paths at millions of packets per second, as live
//! frames (`live`). Test tooling: no product module imports it.

pub mod live;
mod send;
pub mod txring;

pub use crate::workload::{Exchange, Generator, Pattern, Sender, Workload};
pub use send::{Pace, SendReport, resolve_sender, send};
