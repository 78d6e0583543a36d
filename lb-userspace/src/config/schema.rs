//! The validated configuration: what [`parse`](super::parse) returns and
//! the daemon programs into the data plane, with the bounds validation
//! holds its values to.

use std::fmt;
use std::net::IpAddr;

use lb_common::select::flowlet;
use lb_common::select::hash::HashFields;
use lb_common::select::quality::{LEVEL_UNIT, Profile, Scale};

use crate::telemetry::{counters_db, remote};

/// Longest interface name the kernel accepts (`IFNAMSIZ - 1`).
pub const IFNAME_MAX_LEN: usize = 15;

/// Flowlet gap bounds and default, microseconds. 256 is what switch ASICs
/// default to; a second is far past any path's queueing delay.
pub const FLOWLET_GAP_MIN_US: u32 = 1;
pub const FLOWLET_GAP_MAX_US: u32 = 1_000_000;
pub const FLOWLET_GAP_DEFAULT_US: u32 = 256;

/// Flowlet table size bounds (entries, each with a value per CPU).
pub const FLOWLET_TABLE_MIN: u32 = 1024;
pub const FLOWLET_TABLE_MAX: u32 = 4 << 20;

/// Smallest and largest 802.1Q VLAN id a next hop may carry.
pub const VLAN_MIN: u16 = 1;
pub const VLAN_MAX: u16 = 4094;

/// A validated configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub switch: Switch,
    pub ars_profile: ArsProfile,
    pub telemetry: TelemetrySettings,
    /// In file order; [`Route::group`] indexes this.
    pub groups: Vec<Group>,
    /// In file order.
    pub routes: Vec<Route>,
}

/// The `[switch]` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Switch {
    /// Per-switch CRC seed (default 0).
    pub hash_seed: u32,
    /// Ingress interfaces the XDP program attaches to; non-empty, unique.
    pub interfaces: Vec<String>,
    pub xdp_mode: XdpModeSetting,
    /// Flowlet table entries; fixed once the program is loaded.
    pub flowlet_table_size: u32,
}

/// A config enum: its variants and their names in the file, which give
/// `NAMES` (for parsing and error messages), `name()` and `Display` from
/// one list.
macro_rules! named_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $($(#[$variant_meta:meta])* $variant:ident => $text:literal,)+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$variant_meta])* $variant,)+
        }

        impl $name {
            /// Config names.
            pub const NAMES: [(&'static str, Self); [$($text),+].len()] =
                [$(($text, Self::$variant)),+];

            /// The config name.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => $text,)+
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

named_enum! {
    /// How the XDP program is attached.
    pub enum XdpModeSetting {
        /// Driver mode, falling back to generic mode with a warning.
        #[default]
        Auto => "auto",
        /// Driver (native) mode only.
        Driver => "driver",
        /// Generic (SKB) mode only.
        Generic => "generic",
    }
}

named_enum! {
    /// How a group spreads traffic over its next hops.
    pub enum Mode {
        /// Per-flow hashing over the group's hash fields.
        #[default]
        Ecmp => "ecmp",
        /// Flows move to the least loaded next hop after idle gaps.
        Flowlet => "flowlet",
        /// Sprayable packets pick a next hop each; the rest follow flowlets.
        PerPacket => "per-packet",
    }
}

impl Mode {
    /// The data plane's code for it.
    pub const fn code(self) -> u32 {
        match self {
            Self::Ecmp => flowlet::MODE_ECMP,
            Self::Flowlet => flowlet::MODE_FLOWLET,
            Self::PerPacket => flowlet::MODE_PER_PACKET,
        }
    }
}

named_enum! {
    /// Which packets a per-packet group sprays.
    pub enum Spray {
        /// RoCEv2 packets that carry their own placement (ONLY opcodes,
        /// acknowledgements); FIRST/MIDDLE/LAST stay on flowlets.
        #[default]
        SelfContained => "self-contained",
        /// Every RoCEv2 packet: for receivers that reorder themselves.
        All => "all",
    }
}

impl Spray {
    /// The data plane's code for it.
    pub const fn code(self) -> u32 {
        match self {
            Self::SelfContained => flowlet::SPRAY_SELF_CONTAINED,
            Self::All => flowlet::SPRAY_ALL,
        }
    }
}

/// A `[[group]]`: a set of next hops traffic is spread over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    /// Unique, non-empty.
    pub name: String,
    pub mode: Mode,
    /// Non-empty; all six fields by default.
    pub hash_fields: HashFields,
    /// Idle time that ends a flowlet, in flowlet and per-packet modes.
    pub flowlet_gap_us: u32,
    /// What per-packet mode sprays.
    pub spray: Spray,
    /// Where the next hops' path quality comes from; `None` keeps every
    /// next hop at the default quality.
    pub telemetry: Option<GroupTelemetry>,
    /// `1..=MAX_NEXTHOPS_PER_GROUP`, no two equal.
    pub next_hops: Vec<NextHopSpec>,
}

/// One next hop of a group, as configured.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NextHopSpec {
    /// Egress interface, `1..=IFNAME_MAX_LEN` bytes.
    pub interface: String,
    pub addr: NextHopAddr,
    /// 802.1Q tag to push, `VLAN_MIN..=VLAN_MAX`; `None` sends untagged.
    pub vlan: Option<u16>,
}

impl fmt::Display for NextHopSpec {
    /// `eth1 02:00:00:00:01:02`, `eth3 fe80::2 vlan 100`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.interface, self.addr)?;
        if let Some(vlan) = self.vlan {
            write!(f, " vlan {vlan}")?;
        }
        Ok(())
    }
}

/// Where a next hop's destination MAC comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NextHopAddr {
    /// Given directly; always unicast and non-zero.
    Mac([u8; 6]),
    /// Resolved by the daemon from the neighbour table.
    Ip(IpAddr),
}

impl fmt::Display for NextHopAddr {
    /// A MAC as lowercase `02:00:00:00:01:02`, an IP in its standard form.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Mac(mac) => write_mac(f, mac),
            Self::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// Formats a MAC address as lowercase `aa:bb:cc:dd:ee:ff`.
pub fn format_mac(mac: [u8; 6]) -> String {
    NextHopAddr::Mac(mac).to_string()
}

fn write_mac(f: &mut fmt::Formatter<'_>, mac: &[u8; 6]) -> fmt::Result {
    let [a, b, c, d, e, g] = mac;
    write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
}

/// A `[[route]]`: destination prefix -> group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Route {
    pub prefix: Prefix,
    /// Index into [`Config::groups`].
    pub group: usize,
}

/// An IPv4 or IPv6 CIDR prefix with no host bits set and a length within
/// its family's bounds (0..=32 or 0..=128).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Prefix {
    pub addr: IpAddr,
    pub len: u8,
}

impl fmt::Display for Prefix {
    /// `10.1.0.0/16`, `2001:db8::/32`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

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
                ewma_shift: EWMA_SHIFT,
                hysteresis: HYSTERESIS,
            },
        }
    }
}

/// The past load's EWMA gives the newest sample a quarter.
pub const EWMA_SHIFT: u32 = 2;
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
    /// SONiC port names (`sonic_port`, default the interface name).
    CountersDb { ports: Vec<String> },
    /// `telemetry_url` and `telemetry_device` of each next hop.
    Remote { targets: Vec<remote::Target> },
}

impl GroupTelemetry {
    pub fn source(&self) -> TelemetrySource {
        match self {
            Self::Linux => TelemetrySource::Linux,
            Self::CountersDb { .. } => TelemetrySource::CountersDb,
            Self::Remote { .. } => TelemetrySource::Remote,
        }
    }
}
