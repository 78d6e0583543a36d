//! fabriclb's TOML configuration: parsing and validation.
//!
//! Pure: [`parse`] looks at nothing but the text it is given and [`load`]
//! only reads the file, so `fabriclb check-config` can run anywhere. Interface
//! names are checked for shape only, not for existence, and next-hop IPs are
//! resolved later by the daemon.
//!
//! ```toml
//! [switch]
//! hash_seed = 0x5eed1234     # u32, default 0
//! interfaces = ["eth0"]      # non-empty, unique
//! xdp_mode = "auto"          # "auto" (default) | "driver" | "generic"
//! flowlet_table_size = 65536 # entries of the flowlet table, indexed by flow hash
//!
//! [[group]]
//! name = "spines"            # unique, non-empty
//! mode = "ecmp"              # "ecmp" (default) | "flowlet" | "per-packet"
//! hash_fields = ["src_ip", "dst_ip"]   # default: all six
//! flowlet_gap_us = 256       # idle gap that ends a flowlet, default 256
//! spray = "self-contained"   # per-packet: "self-contained" (default) | "all"
//! next_hops = [
//!   { interface = "eth1", mac = "02:00:00:00:01:02" },
//!   { interface = "eth2", ip = "10.0.2.2", vlan = 100 },
//! ]
//!
//! [[route]]
//! prefix = "10.1.0.0/16"
//! group = "spines"
//!
//! [[group]]
//! name = "uplinks"           # routes and next hops from the kernel:
//! kernel_routes = { table = "main", protocol = "bgp" }   # no next_hops
//! # or, under `run --sonic`, APPL_DB's: sonic_routes = { protocol = "bgp" }
//! ```
//!
//! Parsing happens in two layers: serde fills a raw layer whose fields carry
//! their source spans ([`toml::Spanned`]), then validation turns it into the
//! plain [`Config`], reporting every problem it finds as a line
//! `{file}:{line}:{column}: {reason}` pointing at the offending value: each
//! table, group, route and override is checked on its own. A file that is
//! not TOML, or holds a key fabriclb does not know, is refused at that one
//! place: serde stops there.
//! What is valid but likely a mistake (a key with no effect in its group's
//! mode, a group no route uses) becomes a [`Warning`] in
//! [`Config::warnings`], `{file}:{line}:{column}: warning: {reason}`.
//!
//! The modules follow those steps: `raw` is the serde layer, `validate`
//! checks it table by table, `diagnostics` renders where a problem is, and
//! `schema` holds the validated types. `diff` compares two of them for the
//! log of a live reload.

mod diagnostics;
mod diff;
mod overrides;
mod prefix;
mod raw;
mod schema;
mod validate;

use std::path::Path;

use diagnostics::Ctx;
use raw::RawConfig;

pub use diagnostics::{ConfigError, PROBLEMS_LISTED, Problem, Warning};
pub use diff::changes;
pub use prefix::PrefixError;
pub use schema::{
    ARS_WEIGHT_MAX, ArsProfile, BYTES_PER_SEC_PER_MBIT, Config, Destination, EventLog, Events,
    FLOWLET_GAP_DEFAULT_US, FLOWLET_GAP_MAX_US, FLOWLET_GAP_MIN_US, FLOWLET_TABLE_MAX,
    FLOWLET_TABLE_MIN, FlowletChoice, Group, GroupTelemetry, IFNAME_MAX_LEN, KernelRoutes,
    MAX_INGRESS_INTERFACES, Mode, NAME_MAX_LEN, NextHopAddr, NextHopSpec, Override, Prefix, QP_MAX,
    RT_TABLE_MAIN, Route, RouteSource, SAMPLING_INTERVAL_MAX_US, SAMPLING_INTERVAL_MIN_US,
    SonicRoutes, Spray, Switch, TelemetrySettings, TelemetrySource, VLAN_MAX, VLAN_MIN,
    XdpModeSetting, format_mac, learned_group_name, parse_mac, parse_number,
};

/// Reads and validates the config file at `path`.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let text = read(path)?;
    parse(&text, path)
}

/// The most a config file may hold: 16384 routes and 1024 next hops take
/// about 2 MB of TOML; anything far past that is a mistake or an attack.
pub const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// Reads a config file: a regular file only, opened without blocking (a
/// FIFO would otherwise hold the daemon until someone writes to it), and
/// at most [`MAX_CONFIG_BYTES`].
pub fn read(path: &Path) -> Result<String, ConfigError> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;

    let io = |error| ConfigError::Io {
        file: path.to_path_buf(),
        error,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(ConfigError::NotAFile {
            file: path.to_path_buf(),
        });
    }
    let too_large = |len| ConfigError::TooLarge {
        file: path.to_path_buf(),
        len,
        max: MAX_CONFIG_BYTES,
    };
    if meta.len() > MAX_CONFIG_BYTES {
        return Err(too_large(meta.len()));
    }
    // The file may grow while it is read: read no more than allowed.
    let mut text = String::new();
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(io)?;
    if text.len() as u64 > MAX_CONFIG_BYTES {
        return Err(too_large(text.len() as u64));
    }
    Ok(text)
}

/// Parses and validates config `text`; `file` is only used in errors.
pub fn parse(text: &str, file: &Path) -> Result<Config, ConfigError> {
    let ctx = Ctx::new(text, file);
    let raw: RawConfig = toml::from_str(text).map_err(|e| ctx.toml_error(&e))?;
    ctx.validate(raw)
}

#[cfg(test)]
mod tests;
