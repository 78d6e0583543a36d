//! A leaf-spine fabric in network namespaces, for tests, demos and
//! benchmarks. Test tooling: no product module imports it.

pub mod sink;
mod topology;

pub use topology::*;
