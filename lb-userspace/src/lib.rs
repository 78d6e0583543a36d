//! fabriclb's userspace.
//!
//! The product, what runs on a switch: [`config`], [`daemon`],
//! [`dataplane`], [`inspect`], [`logging`], [`metrics`], [`netlink`],
//! [`simulate`], [`sonic`], [`telemetry`], [`workload`] (a collective's
//! frames, which `simulate` runs and the testbed sends). Test tooling,
//! apart from it and only with the `tooling` feature (a default, which a
//! switch's build leaves out): `testbed` (namespace fabrics, scenarios, the receiver
//! sink) and `traffic` (the RoCEv2 collective generator). Tooling may use
//! the product; the product never imports tooling (`cargo xtask test`
//! checks, and builds the product alone).

/// The commit this build was made from (`unknown` outside a checkout).
pub const COMMIT: &str = env!("FABRICLB_COMMIT");

/// This build's version and commit, as `--version` and the daemon's start
/// say them.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("FABRICLB_COMMIT"),
    ")"
);

pub mod config;
pub mod daemon;
pub mod dataplane;
pub mod inspect;
pub mod logging;
pub mod metrics;
pub mod netlink;
pub mod simulate;
pub mod sonic;
pub mod telemetry;
#[cfg(feature = "tooling")]
pub mod testbed;
#[cfg(feature = "tooling")]
pub mod traffic;
pub mod workload;
