//! The telemetry half of the schema: `[ars_profile]`, `[telemetry]` and a
//! group's source.

use std::fmt;

use lb_common::select::quality::{LEVEL_UNIT, Profile, Scale};

use super::NextHopSpec;
use crate::telemetry::template::TargetTemplate;
use crate::telemetry::{counters_db, remote};

/// Sampling interval bounds and default, microseconds. SONiC's default is
/// an ASIC's 16; a daemon polling over sockets keeps to milliseconds.
pub const SAMPLING_INTERVAL_MIN_US: u32 = 1_000;
pub const SAMPLING_INTERVAL_MAX_US: u32 = 1_000_000;
pub const SAMPLING_INTERVAL_DEFAULT_US: u32 = 10_000;

/// Bytes per second in one Mbit/s: the file gives loads in Mbit/s.
pub const BYTES_PER_SEC_PER_MBIT: u64 = 125_000;

/// `[ars_profile]`: how telemetry becomes path quality, with SONiC's
/// `ARS_PROFILE` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArsProfile {
    /// How often each source is polled (`sampling_interval`).
    pub sampling_interval_us: u32,
    /// Loads in bytes per second, the queueing delay in microseconds.
    pub quality: Profile,
}

impl Default for ArsProfile {
    /// The queue alone decides: a load means congestion only against the
    /// port's speed, which differs per path. Up to 2 ms of queueing is
    /// idle (a collective's bursts meeting on a path); each further
    /// millisecond is a band, so a path is in the worst band from 10 ms
    /// on, inside a shallow buffer's 20 or so.
    fn default() -> Self {
        Self {
            sampling_interval_us: SAMPLING_INTERVAL_DEFAULT_US,
            quality: Profile {
                past_load: Scale::default(),
                current_load: Scale::default(),
                future_load: Scale {
                    min: 2000,
                    max: 10_000,
                    weight: 1,
                },
                smoothing_us: EWMA_TIME_CONSTANT_DEFAULT_US,
                worst_hold_us: WORST_BAND_HOLD_DEFAULT_US,
                hysteresis: HYSTERESIS,
            },
        }
    }
}

/// The largest weight a measure of `[ars_profile]` may have.
pub const ARS_WEIGHT_MAX: u32 = 100;

/// The EWMAs' time constant by default: a quarter of the way per sample
/// at the default 10 ms interval.
pub const EWMA_TIME_CONSTANT_DEFAULT_US: u32 = 30_000;
/// How long the worst band holds before it cuts a path to an eighth, by
/// default: three samples in a row at the default interval.
pub const WORST_BAND_HOLD_DEFAULT_US: u32 = 20_000;
/// The longest either may be: beyond 10 s a path's quality would outlive
/// any congestion it followed.
pub const QUALITY_TIME_MAX_US: u32 = 10_000_000;
/// A band improves once the level is a quarter band below it.
pub const HYSTERESIS: u32 = LEVEL_UNIT / 4;

/// Staleness bounds and default, milliseconds.
pub const STALE_AFTER_MIN_MS: u32 = 10;
pub const STALE_AFTER_MAX_MS: u32 = 60_000;
pub const STALE_AFTER_DEFAULT_MS: u32 = 100;
/// Source timeout bounds and default, milliseconds.
pub const TELEMETRY_TIMEOUT_MIN_MS: u32 = 1;
pub const TELEMETRY_TIMEOUT_MAX_MS: u32 = 10_000;
pub const TELEMETRY_TIMEOUT_DEFAULT_MS: u32 = 50;

/// `[telemetry]`: what every source shares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TelemetrySettings {
    /// A path with no good reading for this long falls back to the
    /// default quality.
    pub stale_after_ms: u32,
    /// How long one read of a source may take.
    pub timeout_ms: u32,
    /// SONiC's Redis, for groups with `telemetry = "counters-db"`.
    pub counters_db: Option<counters_db::Address>,
}

impl Default for TelemetrySettings {
    fn default() -> Self {
        Self {
            stale_after_ms: STALE_AFTER_DEFAULT_MS,
            timeout_ms: TELEMETRY_TIMEOUT_DEFAULT_MS,
            counters_db: None,
        }
    }
}

named_enum! {
    /// A group's telemetry source.
    pub enum TelemetrySource {
        /// This box's own egress queues.
        #[default]
        Linux => "linux",
        /// SONiC's COUNTERS_DB.
        CountersDb => "counters-db",
        /// The next-hop switch's egress queue, scraped over HTTP.
        Remote => "remote",
    }
}

/// A group's telemetry: the source and, per next hop in config order,
/// where that source finds the path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupTelemetry {
    /// Each next hop's own egress interface.
    Linux,
    /// SONiC port names (`sonic_port`, default the interface name), and
    /// each path's switch: its next hop's `counters_db` (the next
    /// switch's COUNTERS_DB), or `None` for `[telemetry] counters_db`
    /// (this switch's own).
    CountersDb {
        ports: Vec<String>,
        switches: Vec<Option<counters_db::Address>>,
    },
    /// `telemetry_url` and `telemetry_device` of each next hop.
    Remote { targets: Vec<remote::Target> },
    /// In a group that learns its next hops: the group's `telemetry_url`
    /// and `telemetry_device`, each learned next hop's target made from
    /// them.
    RemoteTemplate { template: TargetTemplate },
    /// In a group that learns its next hops: the group's `counters_db` and
    /// `sonic_port`, each learned next hop's switch and port made from
    /// them.
    CountersDbTemplate { template: TargetTemplate },
}

impl GroupTelemetry {
    pub fn source(&self) -> TelemetrySource {
        match self {
            Self::Linux => TelemetrySource::Linux,
            Self::CountersDb { .. } | Self::CountersDbTemplate { .. } => {
                TelemetrySource::CountersDb
            }
            Self::Remote { .. } | Self::RemoteTemplate { .. } => TelemetrySource::Remote,
        }
    }

    /// A learning group's telemetry for the group it learned with
    /// `next_hops`: a SONiC port (and switch) and a remote target per next
    /// hop, made from the templates or, without a `counters_db` template,
    /// its interface's name on this switch's own COUNTERS_DB. A next hop
    /// the template makes no address for (one known without an IP address
    /// whose port `switch_addresses` does not list) is read there too.
    pub fn for_learned(&self, next_hops: &[NextHopSpec]) -> Self {
        match self {
            Self::Linux | Self::Remote { .. } => self.clone(),
            Self::CountersDb { .. } => Self::CountersDb {
                ports: next_hops.iter().map(|n| n.interface.clone()).collect(),
                switches: vec![None; next_hops.len()],
            },
            Self::CountersDbTemplate { template } => {
                let (ports, switches) = next_hops
                    .iter()
                    .map(|n| {
                        let path = template.target(n.addr.ip(), &n.interface);
                        (path.device, path.url.parse().ok())
                    })
                    .unzip();
                Self::CountersDb { ports, switches }
            }
            Self::RemoteTemplate { template } => Self::Remote {
                targets: next_hops
                    .iter()
                    .map(|n| template.target(n.addr.ip(), &n.interface))
                    .collect(),
            },
        }
    }
}
