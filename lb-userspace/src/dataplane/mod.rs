//! The loaded XDP program and what the daemon writes into it: typed map
//! access ([`loader`]) and the tables built from a config ([`tables`]).

mod loader;
pub mod tables;

#[cfg(test)]
pub(crate) use loader::declared;
pub use loader::{Dataplane, DataplaneError};
