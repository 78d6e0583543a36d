//! fabriclb's userspace.
//!
//! The product, what runs on a switch: [`config`], [`daemon`],
//! [`dataplane`], [`inspect`], [`metrics`], [`netlink`], [`sonic`], [`telemetry`]. Test tooling, apart from it:
//! [`testbed`] (namespace fabrics, scenarios, the receiver sink) and
//! [`traffic`] (the RoCEv2 collective generator). Tooling may use the
//! product; the product never imports tooling (`cargo xtask test` checks).

pub mod config;
pub mod daemon;
pub mod dataplane;
pub mod inspect;
pub mod metrics;
pub mod netlink;
pub mod sonic;
pub mod telemetry;
pub mod testbed;
pub mod traffic;
