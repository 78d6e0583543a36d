//! The loaded XDP program and what the daemon writes into it: typed map
//! access ([`loader`]), the tables built from a config ([`tables`]), and
//! whose program is in the way when ours cannot attach ([`occupant`]).

mod loader;
pub mod occupant;
pub mod tables;

#[cfg(test)]
pub(crate) use loader::declared;
pub use loader::{Dataplane, DataplaneError};
