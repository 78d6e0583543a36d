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
mod tests;
