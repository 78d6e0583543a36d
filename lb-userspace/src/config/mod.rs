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
//! flowlet_table_size = 65536 # flows the flowlet table holds (LRU)
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
//! ```
//!
//! Parsing happens in two layers: serde fills a raw layer whose fields carry
//! their source spans ([`toml::Spanned`]), then validation turns it into the
//! plain [`Config`], reporting the first problem as
//! `{file}:{line}:{column}: {reason}` pointing at the offending value.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::Hash;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::ops::Range;
use std::path::{Path, PathBuf};

use lb_common::limits::{
    FLOWLET_TABLE_DEFAULT, MAX_EGRESS_PORTS, MAX_GROUPS, MAX_NEXTHOPS, MAX_NEXTHOPS_PER_GROUP,
    MAX_ROUTES,
};
use lb_common::select::flowlet;
use lb_common::select::hash::HashFields;
use serde::Deserialize;
use toml::Spanned;

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

/// Why a config could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read (missing, unreadable, not UTF-8).
    #[error("{}: {source}", file.display())]
    Io {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML, or not a valid fabriclb config.
    /// `line` and `column` are 1-based; the column counts characters.
    #[error("{}:{line}:{column}: {reason}", file.display())]
    Invalid {
        file: PathBuf,
        line: usize,
        column: usize,
        reason: String,
    },
}

/// A validated configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub switch: Switch,
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

/// Reads and validates the config file at `path`.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
        file: path.to_path_buf(),
        source,
    })?;
    parse(&text, path)
}

/// Parses and validates config `text`; `file` is only used in errors.
pub fn parse(text: &str, file: &Path) -> Result<Config, ConfigError> {
    let ctx = Ctx { text, file };
    let raw: RawConfig = toml::from_str(text).map_err(|e| ctx.toml_error(&e))?;
    ctx.validate(raw)
}

/// What differs between two configs, one line per change, for the log of
/// a live reload.
pub fn changes(old: &Config, new: &Config) -> Vec<String> {
    let mut out = Vec::new();
    let (a, b) = (&old.switch, &new.switch);
    if a.hash_seed != b.hash_seed {
        out.push(format!(
            "switch.hash_seed {:#x} -> {:#x}",
            a.hash_seed, b.hash_seed
        ));
    }
    for name in b.interfaces.iter().filter(|i| !a.interfaces.contains(i)) {
        out.push(format!("switch.interfaces: {name:?} added"));
    }
    for name in a.interfaces.iter().filter(|i| !b.interfaces.contains(i)) {
        out.push(format!("switch.interfaces: {name:?} removed"));
    }
    if a.xdp_mode != b.xdp_mode {
        out.push(format!("switch.xdp_mode {} -> {}", a.xdp_mode, b.xdp_mode));
    }
    if a.flowlet_table_size != b.flowlet_table_size {
        out.push(format!(
            "switch.flowlet_table_size {} -> {}",
            a.flowlet_table_size, b.flowlet_table_size
        ));
    }
    for group in &new.groups {
        let Some(was) = old.groups.iter().find(|g| g.name == group.name) else {
            out.push(format!(
                "group {:?} added: mode {}, {} next hops",
                group.name,
                group.mode,
                group.next_hops.len()
            ));
            continue;
        };
        let name = &group.name;
        if was.mode != group.mode {
            out.push(format!(
                "group {name:?}: mode {} -> {}",
                was.mode, group.mode
            ));
        }
        if was.flowlet_gap_us != group.flowlet_gap_us {
            out.push(format!(
                "group {name:?}: flowlet_gap_us {} -> {}",
                was.flowlet_gap_us, group.flowlet_gap_us
            ));
        }
        if was.spray != group.spray {
            out.push(format!(
                "group {name:?}: spray {} -> {}",
                was.spray, group.spray
            ));
        }
        if was.hash_fields != group.hash_fields {
            out.push(format!(
                "group {name:?}: hash_fields {} -> {}",
                field_list(was.hash_fields),
                field_list(group.hash_fields)
            ));
        }
        for nh in group
            .next_hops
            .iter()
            .filter(|n| !was.next_hops.contains(n))
        {
            out.push(format!("group {name:?}: next hop \"{nh}\" added"));
        }
        for nh in was
            .next_hops
            .iter()
            .filter(|n| !group.next_hops.contains(n))
        {
            out.push(format!("group {name:?}: next hop \"{nh}\" removed"));
        }
    }
    for group in old
        .groups
        .iter()
        .filter(|g| !new.groups.iter().any(|n| n.name == g.name))
    {
        out.push(format!("group {:?} removed", group.name));
    }
    let target = |config: &Config, prefix: &Prefix| {
        config
            .routes
            .iter()
            .find(|r| r.prefix == *prefix)
            .map(|r| config.groups[r.group].name.clone())
    };
    for route in &new.routes {
        let group = &new.groups[route.group].name;
        match target(old, &route.prefix) {
            None => out.push(format!("route {} -> {group:?} added", route.prefix)),
            Some(was) if was != *group => out.push(format!(
                "route {}: group {was:?} -> {group:?}",
                route.prefix
            )),
            Some(_) => {}
        }
    }
    for route in &old.routes {
        if target(new, &route.prefix).is_none() {
            out.push(format!("route {} removed", route.prefix));
        }
    }
    out
}

/// `[src_ip, dst_ip]`.
fn field_list(fields: HashFields) -> String {
    let names: Vec<&str> = HashFields::NAMES
        .iter()
        .filter(|(_, f)| fields.contains(*f))
        .map(|(n, _)| *n)
        .collect();
    format!("[{}]", names.join(", "))
}

// ---------------------------------------------------------------------------
// Raw layer: what serde fills in, with source spans.

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    switch: RawSwitch,
    #[serde(default)]
    group: Vec<Spanned<RawGroup>>,
    #[serde(default)]
    route: Vec<Spanned<RawRoute>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSwitch {
    #[serde(default)]
    hash_seed: u32,
    interfaces: Spanned<Vec<Spanned<String>>>,
    xdp_mode: Option<Spanned<String>>,
    flowlet_table_size: Option<Spanned<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGroup {
    name: Spanned<String>,
    mode: Option<Spanned<String>>,
    hash_fields: Option<Spanned<Vec<Spanned<String>>>>,
    flowlet_gap_us: Option<Spanned<i64>>,
    spray: Option<Spanned<String>>,
    next_hops: Spanned<Vec<Spanned<RawNextHop>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNextHop {
    interface: Spanned<String>,
    mac: Option<Spanned<String>>,
    ip: Option<Spanned<String>>,
    vlan: Option<Spanned<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoute {
    prefix: Spanned<String>,
    group: Spanned<String>,
}

// ---------------------------------------------------------------------------
// Validation.

struct Ctx<'a> {
    text: &'a str,
    file: &'a Path,
}

impl Ctx<'_> {
    /// 1-based line and character column of byte `offset`.
    fn position(&self, offset: usize) -> (usize, usize) {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &self.text[..offset];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let line = before.matches('\n').count() + 1;
        let column = before[line_start..].chars().count() + 1;
        (line, column)
    }

    /// "line L, column C", for pointing back at an earlier definition.
    fn at(&self, span: &Range<usize>) -> String {
        let (line, column) = self.position(span.start);
        format!("line {line}, column {column}")
    }

    fn error(&self, span: Range<usize>, reason: impl Into<String>) -> ConfigError {
        let (line, column) = self.position(span.start);
        ConfigError::Invalid {
            file: self.file.to_path_buf(),
            line,
            column,
            reason: reason.into(),
        }
    }

    fn toml_error(&self, e: &toml::de::Error) -> ConfigError {
        let reason = e.message().trim().replace('\n', "; ");
        self.error(e.span().unwrap_or(0..0), reason)
    }

    /// The items of `list`; an error `empty` at the list if it has none.
    fn non_empty<T>(
        &self,
        list: Spanned<Vec<T>>,
        empty: fmt::Arguments<'_>,
    ) -> Result<Vec<T>, ConfigError> {
        let span = list.span();
        let list = list.into_inner();
        if list.is_empty() {
            return Err(self.error(span, empty.to_string()));
        }
        Ok(list)
    }

    /// An error `too_many` at the first item past `max`, if there is one.
    fn at_most<T>(
        &self,
        list: &[Spanned<T>],
        max: usize,
        too_many: fmt::Arguments<'_>,
    ) -> Result<(), ConfigError> {
        match list.get(max) {
            Some(extra) => Err(self.error(extra.span(), too_many.to_string())),
            None => Ok(()),
        }
    }

    /// Checks that there are `1..=max` `[[kind]]` tables: none is an error
    /// at the top of the file, too many one at the first past `max`.
    fn table_count<T>(
        &self,
        tables: &[Spanned<T>],
        kind: &str,
        max: u32,
    ) -> Result<(), ConfigError> {
        if tables.is_empty() {
            return Err(self.error(
                0..0,
                format!("no [[{kind}]] defined; at least one {kind} is required"),
            ));
        }
        self.at_most(
            tables,
            max as usize,
            format_args!("too many {kind}s: at most {max} are allowed"),
        )
    }

    /// Records that `key` is defined at `span`, or, if `seen` already has
    /// it, an error "duplicate {what} (first at ...)" at `span`.
    fn unique<K: Eq + Hash>(
        &self,
        seen: &mut HashMap<K, Range<usize>>,
        key: K,
        span: Range<usize>,
        what: fmt::Arguments<'_>,
    ) -> Result<(), ConfigError> {
        match seen.entry(key) {
            Entry::Occupied(first) => Err(self.error(
                span,
                format!("duplicate {what} (first at {})", self.at(first.get())),
            )),
            Entry::Vacant(slot) => {
                slot.insert(span);
                Ok(())
            }
        }
    }

    /// The value `names` gives `name`, or an error
    /// "{unknown} \"name\" ({listed}: \"a\", \"b\")" listing the valid names.
    fn lookup<T: Copy>(
        &self,
        name: &Spanned<String>,
        names: &[(&str, T)],
        unknown: &str,
        listed: &str,
    ) -> Result<T, ConfigError> {
        match names.iter().find(|(n, _)| n == name.get_ref()) {
            Some(&(_, value)) => Ok(value),
            None => Err(self.error(
                name.span(),
                format!(
                    "{unknown} {:?} ({listed}: {})",
                    name.get_ref(),
                    Quoted(names)
                ),
            )),
        }
    }

    fn validate(&self, raw: RawConfig) -> Result<Config, ConfigError> {
        let switch = self.switch(raw.switch)?;
        let groups = self.groups(raw.group)?;
        let routes = self.routes(raw.route, &groups)?;
        Ok(Config {
            switch,
            groups,
            routes,
        })
    }

    fn switch(&self, raw: RawSwitch) -> Result<Switch, ConfigError> {
        let list = self.non_empty(
            raw.interfaces,
            format_args!("switch.interfaces is empty; list at least one interface to attach to"),
        )?;
        let mut seen = HashMap::new();
        let mut interfaces = Vec::with_capacity(list.len());
        for name in list {
            let span = name.span();
            let name = self.ifname(name)?;
            self.unique(
                &mut seen,
                name.clone(),
                span,
                format_args!("interface {name:?} in switch.interfaces"),
            )?;
            interfaces.push(name);
        }

        let xdp_mode = raw.xdp_mode.map_or(Ok(XdpModeSetting::default()), |mode| {
            self.lookup(
                &mode,
                &XdpModeSetting::NAMES,
                "unknown xdp_mode",
                "valid modes",
            )
        })?;

        let flowlet_table_size = raw
            .flowlet_table_size
            .map_or(Ok(FLOWLET_TABLE_DEFAULT), |n| {
                self.in_range(
                    &n,
                    FLOWLET_TABLE_MIN,
                    FLOWLET_TABLE_MAX,
                    "switch.flowlet_table_size",
                )
            })?;

        Ok(Switch {
            hash_seed: raw.hash_seed,
            interfaces,
            xdp_mode,
            flowlet_table_size,
        })
    }

    /// `value` as a u32 within `min..=max`, or an error naming `what`.
    fn in_range(
        &self,
        value: &Spanned<i64>,
        min: u32,
        max: u32,
        what: &str,
    ) -> Result<u32, ConfigError> {
        let v = *value.get_ref();
        u32::try_from(v)
            .ok()
            .filter(|v| (min..=max).contains(v))
            .ok_or_else(|| {
                self.error(
                    value.span(),
                    format!("{what} {v} is out of range {min}..={max}"),
                )
            })
    }

    /// Checks a name the way the kernel's `dev_valid_name` does.
    fn ifname(&self, name: Spanned<String>) -> Result<String, ConfigError> {
        let span = name.span();
        let name = name.into_inner();
        if name.is_empty() {
            return Err(self.error(span, "interface name is empty"));
        }
        if name.len() > IFNAME_MAX_LEN {
            return Err(self.error(
                span,
                format!(
                    "interface name {name:?} is {} bytes long; at most {IFNAME_MAX_LEN} are allowed",
                    name.len()
                ),
            ));
        }
        let bad_byte = |b: &u8| {
            matches!(
                b,
                0 | b'/' | b':' | b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | 0xa0
            )
        };
        if name == "." || name == ".." || name.as_bytes().iter().any(bad_byte) {
            return Err(self.error(
                span,
                format!(
                    "invalid interface name {name:?}: it must not be \".\" or \"..\" \
                     or contain '/', ':', whitespace or NUL"
                ),
            ));
        }
        Ok(name)
    }

    fn groups(&self, raw: Vec<Spanned<RawGroup>>) -> Result<Vec<Group>, ConfigError> {
        self.table_count(&raw, "group", MAX_GROUPS)?;

        let mut names = HashMap::new();
        let mut egress: HashSet<String> = HashSet::new();
        let mut total_next_hops = 0usize;
        let mut groups = Vec::with_capacity(raw.len());
        for group in raw {
            let group = group.into_inner();

            let name_span = group.name.span();
            let name = group.name.into_inner();
            if name.is_empty() {
                return Err(self.error(name_span, "group name is empty"));
            }
            self.unique(
                &mut names,
                name.clone(),
                name_span,
                format_args!("group name {name:?}"),
            )?;

            let mode = group.mode.map_or(Ok(Mode::default()), |mode| {
                self.lookup(
                    &mode,
                    &Mode::NAMES,
                    "unsupported group mode",
                    "supported modes",
                )
            })?;

            let hash_fields = group
                .hash_fields
                .map_or(Ok(HashFields::ALL), |list| self.hash_fields(&name, list))?;
            let flowlet_gap_us =
                group
                    .flowlet_gap_us
                    .map_or(Ok(FLOWLET_GAP_DEFAULT_US), |gap| {
                        self.in_range(
                            &gap,
                            FLOWLET_GAP_MIN_US,
                            FLOWLET_GAP_MAX_US,
                            &format!("group {name:?} flowlet_gap_us"),
                        )
                    })?;
            let spray = group.spray.map_or(Ok(Spray::default()), |spray| {
                self.lookup(&spray, &Spray::NAMES, "unknown spray", "valid values")
            })?;

            let list = self.non_empty(
                group.next_hops,
                format_args!("group {name:?} has no next hops"),
            )?;
            self.at_most(
                &list,
                MAX_NEXTHOPS_PER_GROUP,
                format_args!(
                    "group {name:?} has too many next hops: at most \
                     {MAX_NEXTHOPS_PER_GROUP} are allowed per group"
                ),
            )?;
            let mut seen = HashMap::new();
            let mut next_hops = Vec::with_capacity(list.len());
            for nh in list {
                let span = nh.span();
                total_next_hops += 1;
                if total_next_hops > MAX_NEXTHOPS as usize {
                    return Err(self.error(
                        span,
                        format!(
                            "too many next hops: at most {MAX_NEXTHOPS} are allowed \
                             across all groups"
                        ),
                    ));
                }
                let if_span = nh.get_ref().interface.span();
                let spec = self.next_hop(nh)?;
                if !egress.contains(&spec.interface) {
                    if egress.len() >= MAX_EGRESS_PORTS as usize {
                        return Err(self.error(
                            if_span,
                            format!(
                                "too many egress interfaces: at most {MAX_EGRESS_PORTS} \
                                 distinct next-hop interfaces are allowed"
                            ),
                        ));
                    }
                    egress.insert(spec.interface.clone());
                }
                self.unique(
                    &mut seen,
                    spec.clone(),
                    span,
                    format_args!("next hop \"{spec}\" in group {name:?}"),
                )?;
                next_hops.push(spec);
            }

            groups.push(Group {
                name,
                mode,
                hash_fields,
                flowlet_gap_us,
                spray,
                next_hops,
            });
        }
        Ok(groups)
    }

    fn hash_fields(
        &self,
        group: &str,
        list: Spanned<Vec<Spanned<String>>>,
    ) -> Result<HashFields, ConfigError> {
        let list = self.non_empty(
            list,
            format_args!(
                "group {group:?} has empty hash_fields; list at least one of {} \
                 or omit the key to hash on all of them",
                Quoted(&HashFields::NAMES)
            ),
        )?;
        let mut fields = HashFields(0);
        for name in list {
            let field = self.lookup(
                &name,
                &HashFields::NAMES,
                "unknown hash field",
                "valid fields",
            )?;
            if fields.contains(field) {
                return Err(self.error(
                    name.span(),
                    format!("duplicate hash field {:?}", name.get_ref()),
                ));
            }
            fields = fields.union(field);
        }
        Ok(fields)
    }

    fn next_hop(&self, nh: Spanned<RawNextHop>) -> Result<NextHopSpec, ConfigError> {
        let span = nh.span();
        let nh = nh.into_inner();
        let interface = self.ifname(nh.interface)?;
        let addr = match (nh.mac, nh.ip) {
            (Some(_), Some(_)) => {
                return Err(self.error(span, "next hop has both `mac` and `ip`; give exactly one"));
            }
            (None, None) => {
                return Err(self.error(
                    span,
                    "next hop has neither `mac` nor `ip`; give exactly one",
                ));
            }
            (Some(mac), None) => NextHopAddr::Mac(self.mac(&mac)?),
            (None, Some(ip)) => NextHopAddr::Ip(self.neighbour_ip(&ip)?),
        };
        let vlan = match nh.vlan {
            None => None,
            Some(vlan) => {
                let value = *vlan.get_ref();
                match u16::try_from(value) {
                    Ok(v) if (VLAN_MIN..=VLAN_MAX).contains(&v) => Some(v),
                    _ => {
                        return Err(self.error(
                            vlan.span(),
                            format!(
                                "vlan {value} is out of range {VLAN_MIN}..={VLAN_MAX} \
                                 (omit vlan to send untagged)"
                            ),
                        ));
                    }
                }
            }
        };
        Ok(NextHopSpec {
            interface,
            addr,
            vlan,
        })
    }

    fn mac(&self, text: &Spanned<String>) -> Result<[u8; 6], ConfigError> {
        let Some(mac) = parse_mac(text.get_ref()) else {
            return Err(self.error(
                text.span(),
                format!(
                    "invalid MAC address {:?}: expected 6 hex octets separated by ':', \
                     e.g. \"02:00:00:00:01:02\"",
                    text.get_ref()
                ),
            ));
        };
        let kind = if mac == [0xff; 6] {
            "broadcast"
        } else if mac[0] & 1 != 0 {
            "multicast"
        } else if mac == [0; 6] {
            "all-zero"
        } else {
            return Ok(mac);
        };
        Err(self.error(
            text.span(),
            format!(
                "MAC address {} is {kind}; a next hop needs a unicast MAC",
                format_mac(mac)
            ),
        ))
    }

    fn neighbour_ip(&self, text: &Spanned<String>) -> Result<IpAddr, ConfigError> {
        let Ok(ip) = text.get_ref().parse::<IpAddr>() else {
            return Err(self.error(
                text.span(),
                format!("invalid IP address {:?}", text.get_ref()),
            ));
        };
        let kind = if ip.is_unspecified() {
            "unspecified"
        } else if ip.is_loopback() {
            "loopback"
        } else if ip.is_multicast() {
            "multicast"
        } else if ip == IpAddr::V4(Ipv4Addr::BROADCAST) {
            "broadcast"
        } else {
            return Ok(ip);
        };
        Err(self.error(
            text.span(),
            format!("next-hop IP {ip} is {kind}; a next hop needs a unicast neighbour address"),
        ))
    }

    fn routes(
        &self,
        raw: Vec<Spanned<RawRoute>>,
        groups: &[Group],
    ) -> Result<Vec<Route>, ConfigError> {
        self.table_count(&raw, "route", MAX_ROUTES)?;
        // Group names are unique, so the first match is the only one.
        let by_name: Vec<(&str, usize)> = groups
            .iter()
            .enumerate()
            .map(|(i, g)| (g.name.as_str(), i))
            .collect();
        let mut seen = HashMap::new();
        let mut routes = Vec::with_capacity(raw.len());
        for route in raw {
            let route = route.into_inner();
            let prefix = self.prefix(&route.prefix)?;
            self.unique(
                &mut seen,
                prefix,
                route.prefix.span(),
                format_args!("prefix {prefix}"),
            )?;
            let group = self.lookup(&route.group, &by_name, "unknown group", "defined groups")?;
            routes.push(Route { prefix, group });
        }
        Ok(routes)
    }

    fn prefix(&self, text: &Spanned<String>) -> Result<Prefix, ConfigError> {
        let s = text.get_ref().as_str();
        let invalid = |why: String| self.error(text.span(), format!("invalid prefix {s:?}: {why}"));
        let Some((addr, len)) = s.split_once('/') else {
            return Err(invalid(
                "expected address/length, e.g. \"10.1.0.0/16\" or \"2001:db8::/32\"".into(),
            ));
        };
        let Ok(addr) = addr.parse::<IpAddr>() else {
            return Err(invalid(format!("{addr:?} is not an IPv4 or IPv6 address")));
        };
        let (family, max) = match addr {
            IpAddr::V4(_) => ("IPv4", 32),
            IpAddr::V6(_) => ("IPv6", 128),
        };
        let parsed = if len.is_empty() || !len.bytes().all(|b| b.is_ascii_digit()) {
            None
        } else {
            // Saturates on absurd lengths so they report as out of range.
            Some(len.parse::<u32>().unwrap_or(u32::MAX))
        };
        let Some(len) = parsed else {
            return Err(invalid(format!("length {len:?} is not a number")));
        };
        let Some(len) = u8::try_from(len).ok().filter(|&l| l <= max) else {
            return Err(invalid(format!(
                "length {len} is out of range for {family} (0..={max})"
            )));
        };
        let masked = Prefix {
            addr: mask(addr, len),
            len,
        };
        if masked.addr != addr {
            return Err(self.error(
                text.span(),
                format!("prefix {s:?} has host bits set; did you mean \"{masked}\"?"),
            ));
        }
        Ok(masked)
    }
}

/// `addr` with everything past the first `len` bits cleared.
fn mask(addr: IpAddr, len: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let m = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(a) & m))
        }
        IpAddr::V6(a) => {
            let m = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(a) & m))
        }
    }
}

/// Six two-digit hex octets separated by ':', either case.
fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for octet in &mut mac {
        let part = parts.next()?;
        if part.len() != 2 || !part.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        *octet = u8::from_str_radix(part, 16).ok()?;
    }
    match parts.next() {
        Some(_) => None,
        None => Some(mac),
    }
}

/// A names table's names, as `"a", "b", "c"`.
struct Quoted<'a, T>(&'a [(&'a str, T)]);

impl<T> fmt::Display for Quoted<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (name, _)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{name:?}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "configs/x.toml";

    fn ok(text: &str) -> Config {
        match parse(text, Path::new(FILE)) {
            Ok(config) => config,
            Err(e) => panic!("expected a valid config, got: {e}"),
        }
    }

    fn err(text: &str) -> String {
        match parse(text, Path::new(FILE)) {
            Ok(config) => panic!("expected an error, got {config:?}"),
            Err(e) => e.to_string(),
        }
    }

    /// Lines 1-2.
    const SWITCH: &str = "[switch]\ninterfaces = [\"eth0\"]\n";

    /// `SWITCH`, then a group with a single next hop on lines 3-5, then
    /// `route` (starting on line 6).
    fn with_route(route: &str) -> String {
        format!(
            "{SWITCH}[[group]]\nname = \"spines\"\n\
             next_hops = [{{ interface = \"eth1\", mac = \"02:00:00:00:01:02\" }}]\n{route}"
        )
    }

    /// `SWITCH`, then `[[group]]` on line 3 followed by `group` (starting on
    /// line 4), then a route to it.
    fn with_group(group: &str) -> String {
        format!("{SWITCH}[[group]]\n{group}[[route]]\nprefix = \"10.0.0.0/8\"\ngroup = \"g\"\n")
    }

    /// A group "g" whose only next hop is `{ interface = "eth1", <next_hop> }`
    /// on line 5, column 14.
    fn with_next_hop(next_hop: &str) -> String {
        with_group(&format!(
            "name = \"g\"\nnext_hops = [{{ interface = \"eth1\", {next_hop} }}]\n"
        ))
    }

    /// A `next_hops` line with a single next hop.
    const NEXT_HOPS: &str = "next_hops = [{ interface = \"eth1\", ip = \"10.0.0.1\" }]\n";

    /// A group "g" with `key` on line 5 (column 1), then `NEXT_HOPS`.
    fn with_group_key(key: &str) -> String {
        with_group(&format!("name = \"g\"\n{key}\n{NEXT_HOPS}"))
    }

    /// `SWITCH`, then for each `(name, interface, ip)` a group of that one
    /// next hop (`[[group]]` on line 3, 6, ..., its name at column 8), then
    /// `routes`.
    fn with_groups(groups: &[(&str, &str, &str)], routes: &str) -> String {
        let mut text = String::from(SWITCH);
        for (name, interface, ip) in groups {
            text += &format!(
                "[[group]]\nname = \"{name}\"\n\
                 next_hops = [{{ interface = \"{interface}\", ip = \"{ip}\" }}]\n"
            );
        }
        text + routes
    }

    #[test]
    fn good_config_parses_to_exact_structure() {
        let text = r#"
# a comment
[switch]
hash_seed = 0x5eed1234
interfaces = ["eth0", "eth9"]
xdp_mode = "generic"

[[group]]
name = "spines"
mode = "ecmp"
hash_fields = ["rdma_bth_dest_qp", "dst_ip"]
next_hops = [
  { interface = "eth1", mac = "02:00:00:00:01:02" },
  { interface = "eth2", ip = "10.0.2.2" },
  { interface = "eth3", ip = "fe80::2", vlan = 100 },
  { interface = "eth3", mac = "0A:bC:00:00:00:FF", vlan = 4094 },
]

[[group]]
name = "unused"
next_hops = [{ interface = "eth1", ip = "10.0.1.1", vlan = 1 }]

[[group]]
name = "storage"
hash_fields = ["src_ip"]
next_hops = [{ interface = "eth4", mac = "02:00:00:00:04:01" }]

[[route]]
prefix = "10.1.0.0/16"
group = "spines"

[[route]]
prefix = "2001:DB8:0:0::/32"
group = "storage"

[[route]]
prefix = "0.0.0.0/0"
group = "spines"

[[route]]
prefix = "2001:db8:1::1/128"
group = "spines"
"#;
        let expected = Config {
            switch: Switch {
                hash_seed: 0x5eed_1234,
                interfaces: vec!["eth0".into(), "eth9".into()],
                xdp_mode: XdpModeSetting::Generic,
                flowlet_table_size: FLOWLET_TABLE_DEFAULT,
            },
            groups: vec![
                Group {
                    name: "spines".into(),
                    mode: Mode::Ecmp,
                    hash_fields: HashFields::RDMA_BTH_DEST_QP.union(HashFields::DST_IP),
                    flowlet_gap_us: FLOWLET_GAP_DEFAULT_US,
                    spray: Spray::SelfContained,
                    next_hops: vec![
                        NextHopSpec {
                            interface: "eth1".into(),
                            addr: NextHopAddr::Mac([2, 0, 0, 0, 1, 2]),
                            vlan: None,
                        },
                        NextHopSpec {
                            interface: "eth2".into(),
                            addr: NextHopAddr::Ip(IpAddr::V4(Ipv4Addr::new(10, 0, 2, 2))),
                            vlan: None,
                        },
                        NextHopSpec {
                            interface: "eth3".into(),
                            addr: NextHopAddr::Ip(IpAddr::V6(Ipv6Addr::new(
                                0xfe80, 0, 0, 0, 0, 0, 0, 2,
                            ))),
                            vlan: Some(100),
                        },
                        NextHopSpec {
                            interface: "eth3".into(),
                            addr: NextHopAddr::Mac([0x0a, 0xbc, 0, 0, 0, 0xff]),
                            vlan: Some(4094),
                        },
                    ],
                },
                Group {
                    name: "unused".into(),
                    mode: Mode::Ecmp,
                    hash_fields: HashFields::ALL,
                    flowlet_gap_us: FLOWLET_GAP_DEFAULT_US,
                    spray: Spray::SelfContained,
                    next_hops: vec![NextHopSpec {
                        interface: "eth1".into(),
                        addr: NextHopAddr::Ip(IpAddr::V4(Ipv4Addr::new(10, 0, 1, 1))),
                        vlan: Some(1),
                    }],
                },
                Group {
                    name: "storage".into(),
                    mode: Mode::Ecmp,
                    hash_fields: HashFields::SRC_IP,
                    flowlet_gap_us: FLOWLET_GAP_DEFAULT_US,
                    spray: Spray::SelfContained,
                    next_hops: vec![NextHopSpec {
                        interface: "eth4".into(),
                        addr: NextHopAddr::Mac([2, 0, 0, 0, 4, 1]),
                        vlan: None,
                    }],
                },
            ],
            routes: vec![
                Route {
                    prefix: Prefix {
                        addr: IpAddr::V4(Ipv4Addr::new(10, 1, 0, 0)),
                        len: 16,
                    },
                    group: 0,
                },
                Route {
                    prefix: Prefix {
                        addr: IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0)),
                        len: 32,
                    },
                    group: 2,
                },
                Route {
                    prefix: Prefix {
                        addr: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                        len: 0,
                    },
                    group: 0,
                },
                Route {
                    prefix: Prefix {
                        addr: IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 1)),
                        len: 128,
                    },
                    group: 0,
                },
            ],
        };
        assert_eq!(ok(text), expected);
    }

    #[test]
    fn defaults() {
        let config = ok(&with_route(
            "[[route]]\nprefix = \"10.1.0.0/16\"\ngroup = \"spines\"\n",
        ));
        assert_eq!(
            config.switch,
            Switch {
                hash_seed: 0,
                interfaces: vec!["eth0".into()],
                xdp_mode: XdpModeSetting::Auto,
                flowlet_table_size: FLOWLET_TABLE_DEFAULT,
            }
        );
        assert_eq!(config.groups[0].flowlet_gap_us, FLOWLET_GAP_DEFAULT_US);
        assert_eq!(config.groups[0].spray, Spray::SelfContained);
        assert_eq!(config.groups.len(), 1);
        assert_eq!(config.groups[0].mode, Mode::Ecmp);
        assert_eq!(config.groups[0].hash_fields, HashFields::ALL);
        assert_eq!(config.groups[0].next_hops[0].vlan, None);
        assert_eq!(XdpModeSetting::default(), XdpModeSetting::Auto);
        assert_eq!(Mode::default(), Mode::Ecmp);
    }

    #[test]
    fn xdp_modes() {
        for (name, mode) in [
            ("auto", XdpModeSetting::Auto),
            ("driver", XdpModeSetting::Driver),
            ("generic", XdpModeSetting::Generic),
        ] {
            let text = with_group(&format!("name = \"g\"\n{NEXT_HOPS}")).replacen(
                SWITCH,
                &format!("{SWITCH}xdp_mode = \"{name}\"\n"),
                1,
            );
            assert_eq!(ok(&text).switch.xdp_mode, mode);
            assert_eq!(mode.to_string(), name);
        }
        let text = "[switch]\ninterfaces = [\"eth0\"]\nxdp_mode = \"native\"\n";
        assert_eq!(
            err(text),
            "configs/x.toml:3:12: unknown xdp_mode \"native\" \
             (valid modes: \"auto\", \"driver\", \"generic\")"
        );
    }

    #[test]
    fn unsupported_group_mode() {
        assert_eq!(
            err(&with_group_key("mode = \"adaptive\"")),
            "configs/x.toml:5:8: unsupported group mode \"adaptive\" \
             (supported modes: \"ecmp\", \"flowlet\", \"per-packet\")"
        );
    }

    #[test]
    fn group_modes_gap_and_spray() {
        for (name, mode) in Mode::NAMES {
            let config = ok(&with_group_key(&format!("mode = \"{name}\"")));
            assert_eq!(config.groups[0].mode, mode);
            assert_eq!(mode.to_string(), name);
        }
        let config = ok(&with_group_key(
            "mode = \"per-packet\"\nflowlet_gap_us = 50\nspray = \"all\"",
        ));
        assert_eq!(config.groups[0].flowlet_gap_us, 50);
        assert_eq!(config.groups[0].spray, Spray::All);
        assert_eq!(
            err(&with_group_key("flowlet_gap_us = 0")),
            "configs/x.toml:5:18: group \"g\" flowlet_gap_us 0 is out of range 1..=1000000"
        );
        assert_eq!(
            err(&with_group_key("flowlet_gap_us = 1000001")),
            "configs/x.toml:5:18: group \"g\" flowlet_gap_us 1000001 is out of range 1..=1000000"
        );
        assert_eq!(
            err(&with_group_key("spray = \"middle\"")),
            "configs/x.toml:5:9: unknown spray \"middle\" (valid values: \"self-contained\", \"all\")"
        );
    }

    #[test]
    fn flowlet_table_size() {
        let text = |size: &str| {
            with_route("[[route]]\nprefix = \"10.1.0.0/16\"\ngroup = \"spines\"\n").replacen(
                SWITCH,
                &format!("{SWITCH}flowlet_table_size = {size}\n"),
                1,
            )
        };
        assert_eq!(ok(&text("1024")).switch.flowlet_table_size, 1024);
        assert_eq!(
            err(&text("1023")),
            "configs/x.toml:3:22: switch.flowlet_table_size 1023 is out of range 1024..=4194304"
        );
        assert_eq!(
            err(&text("-1")),
            "configs/x.toml:3:22: switch.flowlet_table_size -1 is out of range 1024..=4194304"
        );
    }

    #[test]
    fn changes_name_every_difference() {
        let old = ok(&with_groups(
            &[("a", "eth1", "10.0.0.1"), ("b", "eth2", "10.0.0.2")],
            "[[route]]\nprefix = \"10.1.0.0/16\"\ngroup = \"a\"\n\
             [[route]]\nprefix = \"10.2.0.0/16\"\ngroup = \"b\"\n",
        ));
        assert!(changes(&old, &old).is_empty());
        let mut new = old.clone();
        new.switch.hash_seed = 7;
        new.groups[0].mode = Mode::Flowlet;
        new.groups[0].flowlet_gap_us = 500;
        new.groups[0].spray = Spray::All;
        new.groups[0].hash_fields = HashFields::SRC_IP.union(HashFields::DST_IP);
        new.groups[0].next_hops.push(NextHopSpec {
            interface: "eth3".into(),
            addr: NextHopAddr::Mac([2, 0, 0, 0, 0, 3]),
            vlan: None,
        });
        new.groups.remove(1);
        new.routes[1].group = 0;
        new.routes.push(Route {
            prefix: Prefix {
                addr: IpAddr::V4(Ipv4Addr::new(10, 3, 0, 0)),
                len: 16,
            },
            group: 0,
        });
        assert_eq!(
            changes(&old, &new),
            [
                "switch.hash_seed 0x0 -> 0x7",
                "group \"a\": mode ecmp -> flowlet",
                "group \"a\": flowlet_gap_us 256 -> 500",
                "group \"a\": spray self-contained -> all",
                "group \"a\": hash_fields [src_ip, dst_ip, ip_protocol, l4_src_port, \
                 l4_dst_port, rdma_bth_dest_qp] -> [src_ip, dst_ip]",
                "group \"a\": next hop \"eth3 02:00:00:00:00:03\" added",
                "group \"b\" removed",
                "route 10.2.0.0/16: group \"b\" -> \"a\"",
                "route 10.3.0.0/16 -> \"a\" added",
            ]
        );
    }

    #[test]
    fn syntax_error() {
        assert_eq!(
            err("[switch\ninterfaces = [\"eth0\"]\n"),
            "configs/x.toml:1:8: unclosed table, expected `]`"
        );
        assert_eq!(
            err("[switch]\ninterfaces = [\"eth0\"\n"),
            "configs/x.toml:2:21: unclosed array, expected `]`"
        );
    }

    #[test]
    fn type_errors() {
        assert_eq!(
            err("[switch]\nhash_seed = -1\ninterfaces = [\"eth0\"]\n"),
            "configs/x.toml:2:13: invalid value: integer `-1`, expected u32"
        );
        assert_eq!(
            err("[switch]\nhash_seed = 0x1_0000_0000\ninterfaces = [\"eth0\"]\n"),
            "configs/x.toml:2:13: invalid value: integer `4294967296`, expected u32"
        );
        assert_eq!(
            err(&with_next_hop("ip = \"10.0.0.1\", vlan = \"100\"")),
            "configs/x.toml:5:60: invalid type: string \"100\", expected i64"
        );
    }

    #[test]
    fn unknown_key() {
        assert_eq!(
            err("[switch]\ninterfaces = [\"eth0\"]\nhash_sead = 1\n"),
            "configs/x.toml:3:1: unknown field `hash_sead`, \
             expected one of `hash_seed`, `interfaces`, `xdp_mode`, `flowlet_table_size`"
        );
        assert_eq!(
            err(&with_group_key("weight = 2")),
            "configs/x.toml:5:1: unknown field `weight`, \
             expected one of `name`, `mode`, `hash_fields`, `flowlet_gap_us`, `spray`, \
             `next_hops`"
        );
        assert_eq!(
            err(&with_next_hop("ip = \"10.0.0.1\", vlna = 5")),
            "configs/x.toml:5:53: unknown field `vlna`, \
             expected one of `interface`, `mac`, `ip`, `vlan`"
        );
        assert_eq!(
            err(&with_route(
                "[[route]]\nprefix = \"10.0.0.0/8\"\ngroup = \"spines\"\nmetric = 1\n"
            )),
            "configs/x.toml:9:1: unknown field `metric`, expected `prefix` or `group`"
        );
        assert_eq!(
            err(&format!("{}[routes]\n", with_route(""))),
            "configs/x.toml:6:2: unknown field `routes`, expected one of `switch`, `group`, `route`"
        );
    }

    #[test]
    fn missing_switch() {
        assert_eq!(
            err("# empty\n"),
            "configs/x.toml:1:1: missing field `switch`"
        );
        assert_eq!(
            err(&with_route("").replacen(SWITCH, "", 1)),
            "configs/x.toml:1:1: missing field `switch`"
        );
    }

    #[test]
    fn unknown_hash_field() {
        assert_eq!(
            err(&with_group_key(
                "hash_fields = [\"src_ip\", \"inner_dst_ip\"]"
            )),
            "configs/x.toml:5:26: unknown hash field \"inner_dst_ip\" (valid fields: \
             \"src_ip\", \"dst_ip\", \"ip_protocol\", \"l4_src_port\", \"l4_dst_port\", \
             \"rdma_bth_dest_qp\")"
        );
    }

    #[test]
    fn duplicate_hash_field() {
        assert_eq!(
            err(&with_group_key(
                "hash_fields = [\"src_ip\", \"dst_ip\", \"src_ip\"]"
            )),
            "configs/x.toml:5:36: duplicate hash field \"src_ip\""
        );
    }

    #[test]
    fn empty_hash_fields() {
        assert_eq!(
            err(&with_group_key("hash_fields = []")),
            "configs/x.toml:5:15: group \"g\" has empty hash_fields; list at least one of \
             \"src_ip\", \"dst_ip\", \"ip_protocol\", \"l4_src_port\", \"l4_dst_port\", \
             \"rdma_bth_dest_qp\" or omit the key to hash on all of them"
        );
    }

    #[test]
    fn mac_and_ip_both() {
        assert_eq!(
            err(&with_next_hop(
                "mac = \"02:00:00:00:01:02\", ip = \"10.0.0.1\""
            )),
            "configs/x.toml:5:14: next hop has both `mac` and `ip`; give exactly one"
        );
    }

    #[test]
    fn mac_and_ip_neither() {
        assert_eq!(
            err(&with_next_hop("vlan = 7")),
            "configs/x.toml:5:14: next hop has neither `mac` nor `ip`; give exactly one"
        );
    }

    #[test]
    fn missing_interface() {
        assert_eq!(
            err(&with_group(
                "name = \"g\"\nnext_hops = [{ ip = \"10.0.0.1\" }]\n"
            )),
            "configs/x.toml:5:14: missing field `interface`"
        );
    }

    #[test]
    fn bad_mac() {
        for bad in [
            "02:00:00:00:01",
            "02:00:00:00:01:02:03",
            "02-00-00-00-01-02",
            "02:00:00:00:1:02",
            "02:00:00:00:01:0g",
            "02:00:00:00:01:+2",
            "",
        ] {
            assert_eq!(
                err(&with_next_hop(&format!("mac = \"{bad}\""))),
                format!(
                    "configs/x.toml:5:42: invalid MAC address \"{bad}\": expected 6 hex \
                     octets separated by ':', e.g. \"02:00:00:00:01:02\""
                )
            );
        }
    }

    #[test]
    fn multicast_broadcast_and_zero_mac() {
        for (mac, shown, kind) in [
            ("01:00:5E:00:00:01", "01:00:5e:00:00:01", "multicast"),
            ("33:33:00:00:00:01", "33:33:00:00:00:01", "multicast"),
            ("ff:ff:ff:ff:ff:ff", "ff:ff:ff:ff:ff:ff", "broadcast"),
            ("00:00:00:00:00:00", "00:00:00:00:00:00", "all-zero"),
        ] {
            assert_eq!(
                err(&with_next_hop(&format!("mac = \"{mac}\""))),
                format!(
                    "configs/x.toml:5:42: MAC address {shown} is {kind}; \
                     a next hop needs a unicast MAC"
                )
            );
        }
    }

    #[test]
    fn bad_next_hop_ip() {
        assert_eq!(
            err(&with_next_hop("ip = \"10.0.0\"")),
            "configs/x.toml:5:41: invalid IP address \"10.0.0\""
        );
        assert_eq!(
            err(&with_next_hop("ip = \"fe80::2%eth1\"")),
            "configs/x.toml:5:41: invalid IP address \"fe80::2%eth1\""
        );
        for (ip, kind) in [
            ("0.0.0.0", "unspecified"),
            ("::", "unspecified"),
            ("127.0.0.1", "loopback"),
            ("::1", "loopback"),
            ("224.0.0.5", "multicast"),
            ("ff02::1", "multicast"),
            ("255.255.255.255", "broadcast"),
        ] {
            assert_eq!(
                err(&with_next_hop(&format!("ip = \"{ip}\""))),
                format!(
                    "configs/x.toml:5:41: next-hop IP {ip} is {kind}; \
                     a next hop needs a unicast neighbour address"
                )
            );
        }
    }

    #[test]
    fn vlan_zero() {
        assert_eq!(
            err(&with_next_hop("ip = \"10.0.0.1\", vlan = 0")),
            "configs/x.toml:5:60: vlan 0 is out of range 1..=4094 (omit vlan to send untagged)"
        );
    }

    #[test]
    fn vlan_4095() {
        for vlan in ["4095", "-1", "65537"] {
            assert_eq!(
                err(&with_next_hop(&format!("ip = \"10.0.0.1\", vlan = {vlan}"))),
                format!(
                    "configs/x.toml:5:60: vlan {vlan} is out of range 1..=4094 \
                     (omit vlan to send untagged)"
                )
            );
        }
    }

    /// The route's prefix is on line 7, column 10.
    fn route_prefix(prefix: &str) -> String {
        with_route(&format!(
            "[[route]]\nprefix = \"{prefix}\"\ngroup = \"spines\"\n"
        ))
    }

    #[test]
    fn bad_prefix() {
        assert_eq!(
            err(&route_prefix("10.1.0.0")),
            "configs/x.toml:7:10: invalid prefix \"10.1.0.0\": expected address/length, \
             e.g. \"10.1.0.0/16\" or \"2001:db8::/32\""
        );
        assert_eq!(
            err(&route_prefix("10.1.0/16")),
            "configs/x.toml:7:10: invalid prefix \"10.1.0/16\": \
             \"10.1.0\" is not an IPv4 or IPv6 address"
        );
        assert_eq!(
            err(&route_prefix("spines/16")),
            "configs/x.toml:7:10: invalid prefix \"spines/16\": \
             \"spines\" is not an IPv4 or IPv6 address"
        );
        for len in ["", "+16", "1x", "16/16", "-1"] {
            assert_eq!(
                err(&route_prefix(&format!("10.1.0.0/{len}"))),
                format!(
                    "configs/x.toml:7:10: invalid prefix \"10.1.0.0/{len}\": \
                     length \"{len}\" is not a number"
                )
            );
        }
    }

    #[test]
    fn host_bits_set() {
        for (prefix, meant) in [
            ("10.1.2.3/16", "10.1.0.0/16"),
            ("10.1.2.3/0", "0.0.0.0/0"),
            ("2001:db8:80ff::/33", "2001:db8:8000::/33"),
        ] {
            assert_eq!(
                err(&route_prefix(prefix)),
                format!(
                    "configs/x.toml:7:10: prefix \"{prefix}\" has host bits set; \
                     did you mean \"{meant}\"?"
                )
            );
        }
    }

    #[test]
    fn prefix_length_out_of_range() {
        for (prefix, len, range) in [
            ("10.1.0.0/33", "33", "IPv4 (0..=32)"),
            ("2001:db8::/129", "129", "IPv6 (0..=128)"),
            (
                "2001:db8::/99999999999999999999",
                "4294967295",
                "IPv6 (0..=128)",
            ),
        ] {
            assert_eq!(
                err(&route_prefix(prefix)),
                format!(
                    "configs/x.toml:7:10: invalid prefix \"{prefix}\": \
                     length {len} is out of range for {range}"
                )
            );
        }
    }

    #[test]
    fn unknown_group() {
        let text = with_groups(
            &[
                ("spines", "eth1", "10.0.0.1"),
                ("leaves", "eth2", "10.0.0.2"),
            ],
            "[[route]]\nprefix = \"10.1.0.0/16\"\ngroup = \"spines\"\n\
             [[route]]\nprefix = \"10.2.0.0/16\"\n  group = \"spine\"\n",
        );
        assert_eq!(
            err(&text),
            "configs/x.toml:14:11: unknown group \"spine\" \
             (defined groups: \"spines\", \"leaves\")"
        );
    }

    #[test]
    fn duplicate_prefix() {
        assert_eq!(
            err(&with_route(
                "[[route]]\nprefix = \"2001:db8::/32\"\ngroup = \"spines\"\n\
                 [[route]]\nprefix = \"10.0.0.0/8\"\ngroup = \"spines\"\n\
                 [[route]]\nprefix = \"2001:0DB8:0::/32\"\ngroup = \"spines\"\n"
            )),
            "configs/x.toml:13:10: duplicate prefix 2001:db8::/32 (first at line 7, column 10)"
        );
    }

    #[test]
    fn same_address_different_lengths_is_fine() {
        let config = ok(&with_route(
            "[[route]]\nprefix = \"10.0.0.0/8\"\ngroup = \"spines\"\n\
             [[route]]\nprefix = \"10.0.0.0/16\"\ngroup = \"spines\"\n",
        ));
        assert_eq!(
            config
                .routes
                .iter()
                .map(|r| r.prefix.to_string())
                .collect::<Vec<_>>(),
            ["10.0.0.0/8", "10.0.0.0/16"]
        );
    }

    #[test]
    fn duplicate_group_name() {
        let text = with_groups(
            &[
                ("spines", "eth1", "10.0.0.1"),
                ("spines", "eth2", "10.0.0.2"),
            ],
            "[[route]]\nprefix = \"10.1.0.0/16\"\ngroup = \"spines\"\n",
        );
        assert_eq!(
            err(&text),
            "configs/x.toml:7:8: duplicate group name \"spines\" (first at line 4, column 8)"
        );
    }

    #[test]
    fn empty_group_name() {
        assert_eq!(
            err(&with_group(&format!("name = \"\"\n{NEXT_HOPS}"))),
            "configs/x.toml:4:8: group name is empty"
        );
    }

    #[test]
    fn duplicate_next_hop() {
        let text = with_group(
            "name = \"g\"\nnext_hops = [\n\
             \x20 { interface = \"eth1\", ip = \"fe80::2\", vlan = 10 },\n\
             \x20 { interface = \"eth1\", ip = \"fe80::2\" },\n\
             \x20 { interface = \"eth1\", ip = \"fe80::2\", vlan = 11 },\n\
             \x20 { interface = \"eth2\", ip = \"fe80::2\", vlan = 10 },\n\
             \x20 { interface = \"eth1\", ip = \"FE80:0::2\", vlan = 10 },\n\
             ]\n",
        );
        assert_eq!(
            err(&text),
            "configs/x.toml:10:3: duplicate next hop \"eth1 fe80::2 vlan 10\" in group \"g\" \
             (first at line 6, column 3)"
        );
        assert_eq!(
            err(&with_group(
                "name = \"g\"\nnext_hops = [\
                 { interface = \"eth1\", mac = \"02:00:00:00:01:02\" }, \
                 { interface = \"eth1\", mac = \"02:00:00:00:01:02\" }]\n"
            )),
            "configs/x.toml:5:65: duplicate next hop \"eth1 02:00:00:00:01:02\" in group \"g\" \
             (first at line 5, column 14)"
        );
    }

    #[test]
    fn same_next_hop_in_two_groups_is_fine() {
        let text = with_groups(
            &[("a", "eth1", "10.0.0.1"), ("b", "eth1", "10.0.0.1")],
            "[[route]]\nprefix = \"10.1.0.0/16\"\ngroup = \"b\"\n",
        );
        let config = ok(&text);
        assert_eq!(config.groups[0].next_hops, config.groups[1].next_hops);
        assert_eq!(config.routes[0].group, 1);
    }

    #[test]
    fn empty_next_hops() {
        assert_eq!(
            err(&with_group("name = \"g\"\nnext_hops = []\n")),
            "configs/x.toml:5:13: group \"g\" has no next hops"
        );
    }

    #[test]
    fn empty_interfaces() {
        assert_eq!(
            err("[switch]\ninterfaces = []\n"),
            "configs/x.toml:2:14: switch.interfaces is empty; \
             list at least one interface to attach to"
        );
    }

    #[test]
    fn duplicate_switch_interface() {
        assert_eq!(
            err("[switch]\ninterfaces = [\"eth0\", \"eth1\", \"eth0\"]\n"),
            "configs/x.toml:2:31: duplicate interface \"eth0\" in switch.interfaces \
             (first at line 2, column 15)"
        );
    }

    #[test]
    fn too_long_interface_name() {
        assert_eq!(
            err("[switch]\ninterfaces = [\"eth0\", \"enp129s0f1np1v23\"]\n"),
            "configs/x.toml:2:23: interface name \"enp129s0f1np1v23\" is 16 bytes long; \
             at most 15 are allowed"
        );
        // Bytes, not characters: 8 two-byte characters.
        assert_eq!(
            err(&with_group(
                "name = \"g\"\nnext_hops = [{ interface = \"éééééééé\", ip = \"10.0.0.1\" }]\n"
            )),
            "configs/x.toml:5:28: interface name \"éééééééé\" is 16 bytes long; \
             at most 15 are allowed"
        );
        // Fifteen bytes is fine.
        let config = ok(&with_next_hop("ip = \"10.0.0.1\"").replace("eth1", "enp129s0f1np1v2"));
        assert_eq!(config.groups[0].next_hops[0].interface, "enp129s0f1np1v2");
    }

    #[test]
    fn invalid_interface_names() {
        assert_eq!(
            err("[switch]\ninterfaces = [\"\"]\n"),
            "configs/x.toml:2:15: interface name is empty"
        );
        for bad in [
            ".",
            "..",
            "eth0/1",
            "eth0:1",
            "eth 0",
            "eth\\t0",
            "eth\\u0000",
        ] {
            let shown = format!("{:?}", bad.replace("\\t", "\t").replace("\\u0000", "\0"));
            assert_eq!(
                err(&format!("[switch]\ninterfaces = [\"{bad}\"]\n")),
                format!(
                    "configs/x.toml:2:15: invalid interface name {shown}: it must not be \
                     \".\" or \"..\" or contain '/', ':', whitespace or NUL"
                )
            );
        }
    }

    #[test]
    fn no_groups() {
        assert_eq!(
            err(&with_groups(
                &[],
                "[[route]]\nprefix = \"10.1.0.0/16\"\ngroup = \"spines\"\n"
            )),
            "configs/x.toml:1:1: no [[group]] defined; at least one group is required"
        );
    }

    #[test]
    fn no_routes() {
        assert_eq!(
            err(&with_route("")),
            "configs/x.toml:1:1: no [[route]] defined; at least one route is required"
        );
    }

    /// `groups` groups "g0".. of `per_group` next hops each, one next hop a
    /// line, with interface `interface(group, index)` and a MAC unique over
    /// the file; a route to "g0". Group `g`'s `[[group]]` is on line
    /// `3 + g * (per_group + 4)`, its next hop `i` on line
    /// `6 + g * (per_group + 4) + i`, column 3.
    fn many(groups: usize, per_group: usize, interface: impl Fn(usize, usize) -> String) -> String {
        let mut text = String::from(SWITCH);
        for g in 0..groups {
            text += &format!("[[group]]\nname = \"g{g}\"\nnext_hops = [\n");
            for i in 0..per_group {
                let iface = interface(g, i);
                text += &format!(
                    "  {{ interface = \"{iface}\", mac = \"02:00:00:00:{g:02x}:{i:02x}\" }},\n"
                );
            }
            text += "]\n";
        }
        text + "[[route]]\nprefix = \"10.0.0.0/8\"\ngroup = \"g0\"\n"
    }

    #[test]
    fn limits_are_reachable_exactly() {
        let mut per_group = ok(&many(1, MAX_NEXTHOPS_PER_GROUP, |_, _| "eth1".into()));
        assert_eq!(per_group.groups.pop().map(|g| g.next_hops.len()), Some(64));

        let groups = ok(&many(MAX_GROUPS as usize, 1, |_, _| "eth1".into()));
        assert_eq!(groups.groups.len(), 64);

        // 16 groups of 64: exactly MAX_NEXTHOPS.
        let total = ok(&many(16, 64, |_, _| "eth1".into()));
        assert_eq!(
            total
                .groups
                .iter()
                .map(|g| g.next_hops.len())
                .sum::<usize>(),
            1024
        );

        // 4 groups of 64 distinct interfaces: exactly MAX_EGRESS_PORTS.
        let ports = ok(&many(4, 64, |g, i| format!("p{g}x{i}")));
        let mut distinct: Vec<_> = ports
            .groups
            .iter()
            .flat_map(|g| g.next_hops.iter().map(|n| n.interface.as_str()))
            .collect();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 256);
    }

    #[test]
    fn too_many_next_hops_in_a_group() {
        // Next hop 64 of group 0: line 6 + 64.
        assert_eq!(
            err(&many(1, MAX_NEXTHOPS_PER_GROUP + 1, |_, _| "eth1".into())),
            "configs/x.toml:70:3: group \"g0\" has too many next hops: \
             at most 64 are allowed per group"
        );
    }

    #[test]
    fn too_many_groups() {
        // Group 64's header: line 3 + 64 * 5.
        assert_eq!(
            err(&many(MAX_GROUPS as usize + 1, 1, |_, _| "eth1".into())),
            "configs/x.toml:323:1: too many groups: at most 64 are allowed"
        );
    }

    #[test]
    fn too_many_next_hops_in_total() {
        // Next hop 0 of group 16: line 6 + 16 * 68.
        assert_eq!(
            err(&many(17, 64, |_, _| "eth1".into())),
            "configs/x.toml:1094:3: too many next hops: at most 1024 are allowed across all groups"
        );
    }

    #[test]
    fn too_many_egress_interfaces() {
        // Groups 0-3 use 256 distinct interfaces; group 4 reuses one of
        // them except at next hop `new`, which introduces the 257th: line
        // 6 + 4 * 68 + new, at its interface value (column 17). Reusing an
        // interface before or after that is fine.
        for (new, line) in [(0, 278), (63, 341)] {
            let text = many(5, 64, |g, i| {
                if g == 4 && i != new {
                    "p0x0".into()
                } else {
                    format!("p{g}x{i}")
                }
            });
            assert_eq!(
                err(&text),
                format!(
                    "configs/x.toml:{line}:17: too many egress interfaces: \
                     at most 256 distinct next-hop interfaces are allowed"
                )
            );
        }
    }

    #[test]
    fn too_many_routes() {
        let mut text = with_route("");
        for i in 0..=MAX_ROUTES {
            let (a, b) = (i >> 8, i & 0xff);
            text += &format!("[[route]]\nprefix = \"10.{a}.{b}.0/24\"\ngroup = \"spines\"\n");
        }
        // Route 16384's header: line 6 + 16384 * 3.
        assert_eq!(
            err(&text),
            "configs/x.toml:49158:1: too many routes: at most 16384 are allowed"
        );
        let fits = text
            .lines()
            .take(5 + 3 * MAX_ROUTES as usize)
            .collect::<Vec<_>>();
        assert_eq!(ok(&fits.join("\n")).routes.len(), 16384);
    }

    #[test]
    fn columns_count_characters_and_lines_survive_crlf() {
        let text = with_route("[[route]]\nprefix = \"10.1.0.0/16\"\ngroup = \"spïnes\"\n")
            .replace('\n', "\r\n");
        assert_eq!(
            err(&text),
            "configs/x.toml:8:9: unknown group \"spïnes\" (defined groups: \"spines\")"
        );
        let text = "[switch]\r\ninterfaces = [\"ü\", \"ü\"]\r\n";
        assert_eq!(
            err(text),
            "configs/x.toml:2:20: duplicate interface \"ü\" in switch.interfaces \
             (first at line 2, column 15)"
        );
    }

    #[test]
    fn displays() {
        let mac = NextHopAddr::Mac([0x02, 0xAB, 0, 0x0f, 0x10, 0xff]);
        assert_eq!(mac.to_string(), "02:ab:00:0f:10:ff");
        assert_eq!(
            format_mac([0xde, 0xad, 0xbe, 0xef, 0, 1]),
            "de:ad:be:ef:00:01"
        );
        let ip = NextHopAddr::Ip(IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2)));
        assert_eq!(ip.to_string(), "fe80::2");
        let spec = NextHopSpec {
            interface: "eth3".into(),
            addr: ip,
            vlan: Some(100),
        };
        assert_eq!(spec.to_string(), "eth3 fe80::2 vlan 100");
        let spec = NextHopSpec {
            interface: "eth1".into(),
            addr: mac,
            vlan: None,
        };
        assert_eq!(spec.to_string(), "eth1 02:ab:00:0f:10:ff");
        let prefix = Prefix {
            addr: IpAddr::V4(Ipv4Addr::new(10, 1, 0, 0)),
            len: 16,
        };
        assert_eq!(prefix.to_string(), "10.1.0.0/16");
        let prefix = Prefix {
            addr: IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0)),
            len: 32,
        };
        assert_eq!(prefix.to_string(), "2001:db8::/32");
        assert_eq!(Mode::Ecmp.to_string(), "ecmp");
    }

    #[test]
    fn io_error_names_the_file() {
        let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/no-such-config.toml"));
        let e = match load(path) {
            Ok(config) => panic!("expected an error, got {config:?}"),
            Err(e) => e,
        };
        assert!(matches!(&e, ConfigError::Io { file, .. } if file == path));
        assert_eq!(
            e.to_string(),
            format!("{}: No such file or directory (os error 2)", path.display())
        );
    }

    /// The example configs.
    const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../configs");

    /// The example config `name`, loaded.
    fn example(name: &str) -> Config {
        load(&Path::new(EXAMPLES).join(name)).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Whether all next hops of `config`'s first group give a MAC
    /// (`by_mac`), or all give an IP (`!by_mac`).
    fn first_group_all_by(config: &Config, by_mac: bool) -> bool {
        config.groups[0]
            .next_hops
            .iter()
            .all(|n| matches!(n.addr, NextHopAddr::Mac(_)) == by_mac)
    }

    #[test]
    fn example_configs_are_valid() {
        let dir = Path::new(EXAMPLES);
        let mut checked = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .path();
            if path.extension().is_some_and(|ext| ext == "toml") {
                if let Err(e) = load(&path) {
                    panic!("{e}");
                }
                checked.push(path);
            }
        }
        assert!(!checked.is_empty(), "no *.toml in {}", dir.display());
    }

    #[test]
    fn example_configs_say_what_they_claim() {
        let leaf = example("two-tier-leaf.toml");
        assert_eq!(leaf.groups.len(), 1);
        assert_eq!(leaf.groups[0].hash_fields, HashFields::ALL);
        assert_eq!(leaf.groups[0].next_hops.len(), 4);
        assert!(first_group_all_by(&leaf, true));
        assert!(leaf.routes.iter().any(|r| r.prefix.addr.is_ipv4()));
        assert!(leaf.routes.iter().any(|r| r.prefix.addr.is_ipv6()));

        let five = example("five-tuple-only.toml");
        let classic = [
            HashFields::SRC_IP,
            HashFields::DST_IP,
            HashFields::IP_PROTOCOL,
            HashFields::L4_SRC_PORT,
            HashFields::L4_DST_PORT,
        ]
        .into_iter()
        .fold(HashFields(0), HashFields::union);
        assert_eq!(five.groups[0].hash_fields, classic);
        assert!(first_group_all_by(&five, false));
        assert_eq!(
            five.groups[0]
                .next_hops
                .iter()
                .filter(|n| n.vlan.is_some())
                .count(),
            1
        );
    }
}
