//! The switch every golden test programs: its seed, its own MAC and its
//! groups and routes, written out as the daemon's TOML so that it goes
//! through the daemon's own parser.

use std::fmt::Write;

use fabriclb::testbed::FIVE_TUPLE;

/// Frames arrive addressed to this MAC and leave from it.
pub const LB_MAC: [u8; 6] = [0x02, 0xfa, 0xb0, 0, 0, 0x01];
pub const SEED: u32 = 0x5eed_1234;

/// Each group's next hops have MACs of their own (`02:00:00:00:<mac>:01`
/// and up), so an output frame tells which one it left for. All of them
/// leave through `lo`: test runs transmit nothing.
pub fn config() -> String {
    let groups = [
        Group::new("spines", 0x0a, 4)
            .route("10.1.0.0/16")
            .route("2001:db8:1::/48"),
        Group::new("five-tuple", 0x0b, 4)
            .set(FIVE_TUPLE)
            .route("10.4.0.0/16"),
        Group::new("tagged", 0x0c, 1).vlan(100).route("10.2.0.0/16"),
        Group::new("down", 0x0d, 1).route("10.3.0.0/16"),
        Group::new("flowlet-sticky", 0x0e, 4)
            .set(r#"mode = "flowlet""#)
            .set("flowlet_gap_us = 1000000")
            .route("10.5.0.0/16"),
        Group::new("flowlet", 0x0f, 4)
            .set(r#"mode = "flowlet""#)
            .set("flowlet_gap_us = 2000")
            .route("10.6.0.0/16"),
        Group::new("per-packet", 0x10, 4)
            .set(r#"mode = "per-packet""#)
            .set("flowlet_gap_us = 1000000")
            .route("10.7.0.0/16"),
        Group::new("spray-all", 0x11, 4)
            .set(r#"mode = "per-packet""#)
            .set(r#"spray = "all""#)
            .set("flowlet_gap_us = 1000000")
            .route("10.8.0.0/16"),
    ];
    let mut toml = format!("[switch]\nhash_seed = {SEED:#x}\ninterfaces = [\"lo\"]\n");
    for group in &groups {
        group.write(&mut toml);
    }
    toml
}

struct Group {
    name: &'static str,
    mac: u8,
    next_hops: u8,
    vlan: Option<u16>,
    settings: Vec<&'static str>,
    prefixes: Vec<&'static str>,
}

impl Group {
    fn new(name: &'static str, mac: u8, next_hops: u8) -> Self {
        Self {
            name,
            mac,
            next_hops,
            vlan: None,
            settings: Vec::new(),
            prefixes: Vec::new(),
        }
    }

    /// One TOML line of the group's own settings.
    fn set(mut self, line: &'static str) -> Self {
        self.settings.push(line);
        self
    }

    fn vlan(mut self, vlan: u16) -> Self {
        self.vlan = Some(vlan);
        self
    }

    fn route(mut self, prefix: &'static str) -> Self {
        self.prefixes.push(prefix);
        self
    }

    /// Appends the group and its routes; TOML keeps each array of tables
    /// in order however `[[group]]` and `[[route]]` interleave.
    fn write(&self, toml: &mut String) {
        let name = self.name;
        writeln!(toml, "\n[[group]]\nname = \"{name}\"").unwrap();
        for line in &self.settings {
            writeln!(toml, "{line}").unwrap();
        }
        let vlan = self
            .vlan
            .map(|v| format!(", vlan = {v}"))
            .unwrap_or_default();
        writeln!(toml, "next_hops = [").unwrap();
        for i in 1..=self.next_hops {
            let mac = format!("02:00:00:00:{:02x}:{i:02x}", self.mac);
            writeln!(toml, "  {{ interface = \"lo\", mac = \"{mac}\"{vlan} }},").unwrap();
        }
        writeln!(toml, "]").unwrap();
        for prefix in &self.prefixes {
            writeln!(
                toml,
                "\n[[route]]\nprefix = \"{prefix}\"\ngroup = \"{name}\""
            )
            .unwrap();
        }
    }
}
