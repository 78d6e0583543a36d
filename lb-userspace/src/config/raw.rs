//! What serde fills in from the TOML, before validation: the file's
//! shape, with the source span of every value an error may point at.
//!
//! Bounded integers are read as i64, TOML's own integer type, so that a
//! value out of bounds is reported by validation, naming the key and its
//! range, instead of by serde as a mere type mismatch.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    pub(super) switch: RawSwitch,
    pub(super) ars_profile: Option<Spanned<RawArsProfile>>,
    pub(super) telemetry: Option<Spanned<RawTelemetry>>,
    pub(super) events: Option<RawEvents>,
    #[serde(default)]
    pub(super) group: Vec<Spanned<RawGroup>>,
    #[serde(default)]
    pub(super) route: Vec<Spanned<RawRoute>>,
    #[serde(default, rename = "override")]
    pub(super) overrides: Vec<Spanned<RawOverride>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOverride {
    pub(super) name: Spanned<String>,
    pub(super) dst: Spanned<String>,
    pub(super) src: Option<Spanned<String>>,
    pub(super) ingress: Option<Spanned<String>>,
    pub(super) dest_qp: Option<Spanned<i64>>,
    pub(super) next_hop: Spanned<RawNextHop>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSwitch {
    #[serde(default)]
    pub(super) hash_seed: u32,
    pub(super) interfaces: Spanned<Vec<Spanned<String>>>,
    pub(super) xdp_mode: Option<Spanned<String>>,
    pub(super) flowlet_table_size: Option<Spanned<i64>>,
    pub(super) dlb_mac: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGroup {
    pub(super) name: Spanned<String>,
    pub(super) mode: Option<Spanned<String>>,
    pub(super) hash_fields: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) flowlet_gap_us: Option<Spanned<i64>>,
    pub(super) spray: Option<Spanned<String>>,
    pub(super) flowlet_choice: Option<Spanned<String>>,
    pub(super) telemetry: Option<Spanned<String>>,
    /// Templates for the next hops a group learns.
    pub(super) telemetry_url: Option<Spanned<String>>,
    pub(super) telemetry_device: Option<Spanned<String>>,
    pub(super) counters_db: Option<Spanned<String>>,
    pub(super) sonic_port: Option<Spanned<String>>,
    /// Port -> the management address of the switch behind it, for the
    /// templates' `{switch}`.
    pub(super) switch_addresses: Option<Spanned<BTreeMap<String, Spanned<String>>>>,
    pub(super) next_hops: Option<Spanned<Vec<Spanned<RawNextHop>>>>,
    pub(super) kernel_routes: Option<Spanned<RawKernelRoutes>>,
    pub(super) sonic_routes: Option<Spanned<RawSonicRoutes>>,
    pub(super) destinations: Option<Spanned<Vec<Spanned<RawDestination>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDestination {
    pub(super) name: Spanned<String>,
    pub(super) prefixes: Spanned<Vec<Spanned<String>>>,
    pub(super) telemetry_device: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSonicRoutes {
    pub(super) protocol: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawKernelRoutes {
    pub(super) table: Option<Spanned<NameOrNumber>>,
    pub(super) protocol: Option<Spanned<NameOrNumber>>,
}

/// A routing table or protocol, by iproute2's name or by number.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum NameOrNumber {
    Name(String),
    Number(i64),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNextHop {
    pub(super) interface: Spanned<String>,
    pub(super) mac: Option<Spanned<String>>,
    pub(super) ip: Option<Spanned<String>>,
    pub(super) vlan: Option<Spanned<i64>>,
    pub(super) telemetry_url: Option<Spanned<String>>,
    pub(super) telemetry_device: Option<Spanned<String>>,
    pub(super) sonic_port: Option<Spanned<String>>,
    pub(super) counters_db: Option<Spanned<String>>,
}

/// `[ars_profile]`, with SONiC's `ARS_PROFILE` field names.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawArsProfile {
    pub(super) algorithm: Option<Spanned<String>>,
    pub(super) sampling_interval: Option<Spanned<i64>>,
    pub(super) ewma_time_constant: Option<Spanned<i64>>,
    pub(super) worst_band_hold: Option<Spanned<i64>>,
    pub(super) past_load_min_value: Option<Spanned<i64>>,
    pub(super) past_load_max_value: Option<Spanned<i64>>,
    pub(super) past_load_weight: Option<Spanned<i64>>,
    pub(super) current_load_min_value: Option<Spanned<i64>>,
    pub(super) current_load_max_value: Option<Spanned<i64>>,
    pub(super) current_load_weight: Option<Spanned<i64>>,
    pub(super) future_load_min_value: Option<Spanned<i64>>,
    pub(super) future_load_max_value: Option<Spanned<i64>>,
    pub(super) future_load_weight: Option<Spanned<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTelemetry {
    pub(super) stale_after_ms: Option<Spanned<i64>>,
    pub(super) timeout_ms: Option<Spanned<i64>>,
    pub(super) counters_db: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEvents {
    pub(super) rate: Option<Spanned<i64>>,
    pub(super) sample: Option<Spanned<i64>>,
    pub(super) log: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRoute {
    pub(super) prefix: Spanned<String>,
    pub(super) group: Spanned<String>,
}
