//! fabriclb's forwarding path in XDP. All decisions come from `lb-common`;
//! this crate reads the packet, looks up maps, writes headers and counts
//! verdicts. The objects (`src/main.rs` for production, `src/bin/` for the
//! benchmark and the testbed's receiver) declare entry points over it.
//!
//! One module per stage of [`forward::process`], in the order it runs them:
//! [`parse`], [`ports`], [`route`], [`select`], [`rewrite`], [`count`]; [`maps`] is
//! what they share; [`tx_errors`] counts, off the path, what the
//! kernel failed to send. The packet view lives in `lb-ebpf-frame`, which the
//! testbed's receiver links without this crate's maps.
#![no_std]

pub mod count;
pub mod forward;
pub mod maps;
pub mod parse;
pub mod ports;
pub mod report;
pub mod rewrite;
pub mod route;
pub mod select;
pub mod tx_errors;
