//! The loaded XDP program and what the daemon writes into it: typed map
//! access ([`loader`]), the tables built from a config ([`tables`]), whose
//! program is in the way when ours cannot attach ([`occupant`]), the
//! tracepoints that count frames redirected but never sent ([`tx_errors`]),
//! and what the program needs of the kernel ([`kernel_floor`]).

pub mod bpffs;
mod btf;
pub mod kernel_floor;
mod loader;
mod maps;
pub mod occupant;
pub mod pins;
pub mod tables;
mod tx_errors;

pub use bpffs::mount_bpffs;
// The tooling's objects' unit tests read their declarations too.
#[cfg(all(test, feature = "tooling"))]
pub(crate) use loader::declared;
pub(crate) use loader::said;
pub use loader::{
    Dataplane, DataplaneError, LoadRow, Pinned, PinningError, Plan, holder, remove_instance,
};
pub use maps::Maps;
