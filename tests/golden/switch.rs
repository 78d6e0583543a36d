//! The switch every golden test programs: its seed, its own MAC and its
//! groups and routes, written out as the daemon's TOML so that it goes
//! through the daemon's own parser. Next hops are literal MACs here, and
//! tests name a next hop by its group and slot in this list: what an
//! output frame must carry is read from this file, never back from the
//! daemon's tables.

use std::fmt::Write;

use fabriclb::testbed::FIVE_TUPLE;

/// Frames arrive addressed to this MAC and leave from it.
pub const LB_MAC: [u8; 6] = [0x02, 0xfa, 0xb0, 0, 0, 0x01];
pub const SEED: u32 = 0x5eed_1234;

#[derive(Clone, Copy)]
pub struct Group {
    pub name: &'static str,
    /// Each group's next hops have MACs of their own, so an output frame
    /// tells which one it left for. All of them leave through `lo`: test
    /// runs transmit nothing.
    pub macs: &'static [&'static str],
    /// Next hops given by an IP nobody resolves: never usable.
    pub unresolved: &'static [&'static str],
    pub vlan: Option<u16>,
    /// Whether `rdma_bth_dest_qp` is among the group's hash fields; the
    /// other five always are.
    pub hashes_qp: bool,
    /// TOML lines of the group's own settings.
    pub settings: &'static [&'static str],
    pub flowlet_gap_us: Option<u32>,
    pub routes: &'static [&'static str],
}

impl Group {
    const fn new(name: &'static str, macs: &'static [&'static str]) -> Self {
        Self {
            name,
            macs,
            unresolved: &[],
            vlan: None,
            hashes_qp: true,
            settings: &[],
            flowlet_gap_us: None,
            routes: &[],
        }
    }

    /// The MAC of the next hop in `slot`.
    pub fn mac(&self, slot: usize) -> [u8; 6] {
        let mut mac = [0; 6];
        for (byte, text) in mac.iter_mut().zip(self.macs[slot].split(':')) {
            *byte = u8::from_str_radix(text, 16).expect("hex MAC");
        }
        mac
    }

    /// The slot of the next hop with `mac`, if it is in this group.
    pub fn slot_of(&self, mac: &[u8]) -> Option<usize> {
        (0..self.macs.len()).find(|&slot| self.mac(slot) == mac)
    }
}

// Least-cost, not the default weighted draw: these groups' tests expect
// the placement a choice by load makes (the first idle member); explain's
// golden test follows the weighted draws.
const FLOWLET: &str = "mode = \"flowlet\"\nflowlet_choice = \"least-cost\"";
const PER_PACKET: &str = "mode = \"per-packet\"\nflowlet_choice = \"least-cost\"";
/// Far past anything a test does inside one flowlet.
pub const GAP_ONE_SECOND_US: u32 = 1_000_000;
/// The gap a test waits out: long enough that a busy machine's scheduling
/// between two test runs never looks like one, short enough to sleep past.
pub const SHORT_GAP_MS: u32 = 200;

pub const GROUPS: [Group; 8] = [
    Group {
        routes: &["10.1.0.0/16", "2001:db8:1::/48"],
        ..Group::new(
            "spines",
            &[
                "02:00:00:00:0a:01",
                "02:00:00:00:0a:02",
                "02:00:00:00:0a:03",
                "02:00:00:00:0a:04",
            ],
        )
    },
    Group {
        hashes_qp: false,
        settings: &[FIVE_TUPLE],
        routes: &["10.4.0.0/16"],
        ..Group::new(
            "five-tuple",
            &[
                "02:00:00:00:0b:01",
                "02:00:00:00:0b:02",
                "02:00:00:00:0b:03",
                "02:00:00:00:0b:04",
            ],
        )
    },
    Group {
        vlan: Some(100),
        routes: &["10.2.0.0/16"],
        ..Group::new("tagged", &["02:00:00:00:0c:01"])
    },
    Group {
        unresolved: &["10.3.255.1"],
        routes: &["10.3.0.0/16"],
        ..Group::new("down", &[])
    },
    Group {
        settings: &[FLOWLET],
        flowlet_gap_us: Some(GAP_ONE_SECOND_US),
        routes: &["10.5.0.0/16"],
        ..Group::new(
            "flowlet-sticky",
            &[
                "02:00:00:00:0e:01",
                "02:00:00:00:0e:02",
                "02:00:00:00:0e:03",
                "02:00:00:00:0e:04",
            ],
        )
    },
    Group {
        settings: &[FLOWLET],
        flowlet_gap_us: Some(SHORT_GAP_MS * 1000),
        routes: &["10.6.0.0/16"],
        ..Group::new(
            "flowlet",
            &[
                "02:00:00:00:0f:01",
                "02:00:00:00:0f:02",
                "02:00:00:00:0f:03",
                "02:00:00:00:0f:04",
            ],
        )
    },
    Group {
        settings: &[PER_PACKET],
        flowlet_gap_us: Some(GAP_ONE_SECOND_US),
        routes: &["10.7.0.0/16"],
        ..Group::new(
            "per-packet",
            &[
                "02:00:00:00:10:01",
                "02:00:00:00:10:02",
                "02:00:00:00:10:03",
                "02:00:00:00:10:04",
            ],
        )
    },
    Group {
        settings: &[PER_PACKET, r#"spray = "all""#],
        flowlet_gap_us: Some(GAP_ONE_SECOND_US),
        routes: &["10.8.0.0/16"],
        ..Group::new(
            "spray-all",
            &[
                "02:00:00:00:11:01",
                "02:00:00:00:11:02",
                "02:00:00:00:11:03",
                "02:00:00:00:11:04",
            ],
        )
    },
];

pub fn group(name: &str) -> &'static Group {
    GROUPS
        .iter()
        .find(|g| g.name == name)
        .expect("golden group")
}

pub fn config() -> String {
    config_with(&[])
}

/// The switch config with the groups in `changed` in their place, as a
/// live change of those groups' settings.
pub fn config_with(changed: &[Group]) -> String {
    let mut toml = format!("[switch]\nhash_seed = {SEED:#x}\ninterfaces = [\"lo\"]\n");
    for group in &GROUPS {
        let group = changed
            .iter()
            .find(|c| c.name == group.name)
            .unwrap_or(group);
        write_group(group, &mut toml);
    }
    toml
}

/// Appends the group and its routes; TOML keeps each array of tables in
/// order however `[[group]]` and `[[route]]` interleave.
fn write_group(group: &Group, toml: &mut String) {
    let name = group.name;
    writeln!(toml, "\n[[group]]\nname = \"{name}\"").unwrap();
    for line in group.settings {
        writeln!(toml, "{line}").unwrap();
    }
    if let Some(gap) = group.flowlet_gap_us {
        writeln!(toml, "flowlet_gap_us = {gap}").unwrap();
    }
    let vlan = group
        .vlan
        .map(|v| format!(", vlan = {v}"))
        .unwrap_or_default();
    writeln!(toml, "next_hops = [").unwrap();
    let addresses = (group.macs.iter().map(|mac| ("mac", mac)))
        .chain(group.unresolved.iter().map(|ip| ("ip", ip)));
    for (kind, address) in addresses {
        writeln!(
            toml,
            "  {{ interface = \"lo\", {kind} = \"{address}\"{vlan} }},"
        )
        .unwrap();
    }
    writeln!(toml, "]").unwrap();
    for prefix in group.routes {
        writeln!(
            toml,
            "\n[[route]]\nprefix = \"{prefix}\"\ngroup = \"{name}\""
        )
        .unwrap();
    }
}
