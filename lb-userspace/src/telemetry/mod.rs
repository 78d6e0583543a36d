//! Telemetry sources: where the daemon reads how congested each next hop's
//! path is. One module per source, all behind [`Source`]; the daemon polls
//! each configured source on a thread of its own
//! (`daemon::telemetry`), turns readings into path quality
//! (`lb_common::select::quality`) and never lets a source stall a reload.
//!
//! - [`linux`]: the box's own egress queues (qdisc backlog over netlink,
//!   BQL in-flight bytes from sysfs).
//! - [`counters_db`]: SONiC's COUNTERS_DB in Redis, as syncd's flex
//!   counters write it.
//! - [`remote`]: the next-hop switch's own egress queue, scraped as
//!   Prometheus text over HTTP (node_exporter's qdisc collector).
//!
//! [`template`] makes the paths of next hops a group learns, for the
//! sources that read the next switch.

use std::time::Instant;

pub mod counters_db;
mod fanout;
pub mod linux;
pub mod remote;
pub mod template;

/// What a source read for one path at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reading {
    /// Bytes queued toward the path now.
    pub queued_bytes: u64,
    /// A monotonic counter of bytes sent toward the path (the daemon turns
    /// two readings into a rate); `None` when the source has none.
    pub tx_bytes: Option<u64>,
    /// The port's operational speed, bytes per second, where the switch
    /// publishes it (SONiC's STATE_DB); `None` when the source does not
    /// say.
    pub speed_bytes_per_s: Option<u64>,
    /// When the switch read the counters, where the source can tell it
    /// closer than the end of the poll (one switch's answer among many
    /// asked at once); `None`: the poll's end.
    pub read_at: Option<Instant>,
}

/// Why a path could not be read this time.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum TelemetryError {
    /// The source did not answer: connection refused, timeout, a missing
    /// interface or database.
    #[error("{source_name} unreachable: {why}")]
    Unreachable {
        source_name: &'static str,
        why: String,
    },
    /// The source answered, but not with what was asked for: a missing
    /// key, row or series, a value that is not a number.
    #[error("{source_name} answered garbage for {what}: {why}")]
    Garbage {
        source_name: &'static str,
        what: String,
        why: String,
    },
}

/// A source of per-path readings. Blocking: the daemon gives each source a
/// thread of its own.
pub trait Source: Send {
    /// The source's name in config and logs (`linux`, `counters-db`,
    /// `remote`).
    fn name(&self) -> &'static str;

    /// Reads every path, in the order the source was built with. Each
    /// path has its own result, so one bad row or one silent switch does
    /// not blind the others.
    fn poll(&mut self) -> Vec<Result<Reading, TelemetryError>>;
}
