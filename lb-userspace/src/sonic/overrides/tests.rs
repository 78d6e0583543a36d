//! Controller rows over a config file: what is taken, what is refused
//! with its key, field and why, and that the file's overrides stay.

use std::path::Path;

use super::*;
use crate::sonic::Rows;

const FILE: &str = r#"
[switch]
interfaces = ["h1", "h2"]

[[group]]
name = "spines"
next_hops = [
  { interface = "s1", ip = "10.0.1.2" },
  { interface = "s2", ip = "10.0.2.2" },
]

[[route]]
prefix = "198.19.0.0/16"
group = "spines"

[[override]]
name = "from-file"
dst = "198.19.9.0/24"
next_hop = { interface = "s1", ip = "10.0.1.2" }
"#;

fn config() -> Config {
    crate::config::parse(FILE, Path::new("leaf.toml")).expect("valid")
}

fn rows(entries: &[(&str, &[(&str, &str)])]) -> Rows {
    let keys: Vec<String> = entries
        .iter()
        .map(|(name, _)| format!("{OVERRIDE_TABLE}{name}"))
        .collect();
    let keyed: Vec<(&str, &[(&str, &str)])> = keys
        .iter()
        .zip(entries)
        .map(|(key, (_, fields))| (key.as_str(), *fields))
        .collect();
    Rows::appl_of(&keyed)
}

fn said(refusals: &[Refusal]) -> Vec<String> {
    refusals.iter().map(ToString::to_string).collect()
}

const PIN: &[(&str, &str)] = &[
    ("dst", "198.19.1.0/24"),
    ("src", "10.1.0.0/16"),
    ("ingress", "h1"),
    ("dest_qp", "0x42"),
    ("nexthop", "10.0.2.2"),
    ("ifname", "s2"),
];

#[test]
fn a_row_becomes_the_override_the_file_would_write() {
    let read = OverrideRows::from_rows(&rows(&[("job-42", PIN)]));
    assert_eq!(read.refusals, []);
    let mut config = config();
    assert_eq!(said(&read.apply(&mut config)), Vec::<String>::new());
    let file = crate::config::parse(
        &format!(
            "{FILE}\n[[override]]\nname = \"job-42\"\ndst = \"198.19.1.0/24\"\n\
             src = \"10.1.0.0/16\"\ningress = \"h1\"\ndest_qp = 0x42\n\
             next_hop = {{ interface = \"s2\", ip = \"10.0.2.2\" }}\n"
        ),
        Path::new("leaf.toml"),
    )
    .expect("valid");
    assert_eq!(
        config.overrides, file.overrides,
        "the file's first, then the rows"
    );
}

#[test]
fn bad_rows_are_refused_with_key_field_and_why_and_the_rest_applies() {
    let with = |field: &'static str, value: &'static str| -> Vec<(&'static str, &'static str)> {
        let mut fields: Vec<(&str, &str)> =
            PIN.iter().filter(|(f, _)| *f != field).copied().collect();
        if !value.is_empty() {
            fields.push((field, value));
        }
        fields
    };
    let (a, b, c, d, e, f, g) = (
        with("dst", "198.19.1.1/24"),
        with("dst", ""),
        with("src", "2001:db8::/32"),
        with("dest_qp", "16777216"),
        with("nexthop", "bogus"),
        with("vlan", "4095"),
        with("dst_qp", "7"),
    );
    let read = OverrideRows::from_rows(&rows(&[
        ("a", &a),
        ("b", &b),
        ("c", &c),
        ("d", &d),
        ("e", &e),
        ("f", &f),
        ("g", &g),
        ("good", PIN),
    ]));
    assert_eq!(
        said(&read.refusals),
        [
            "\"FABRICLB_OVERRIDE_TABLE:a\" field \"dst\": prefix \"198.19.1.1/24\" has host bits \
             set; did you mean \"198.19.1.0/24\"?",
            "\"FABRICLB_OVERRIDE_TABLE:b\" field \"dst\": missing",
            "\"FABRICLB_OVERRIDE_TABLE:c\" field \"src\": override \"c\": src 2001:db8::/32 is \
             not of dst 198.19.1.0/24's family",
            "\"FABRICLB_OVERRIDE_TABLE:d\" field \"dest_qp\": \"16777216\" is not a RoCEv2 queue \
             pair number (1..=0xffffff)",
            "\"FABRICLB_OVERRIDE_TABLE:e\" field \"nexthop\": \"bogus\" is neither an IP nor a \
             MAC address",
            "\"FABRICLB_OVERRIDE_TABLE:f\" field \"vlan\": \"4095\" is not a VLAN id (1..=4094)",
            "\"FABRICLB_OVERRIDE_TABLE:g\" field \"dst_qp\": not a field of an override (they \
             are dst, src, ingress, dest_qp, nexthop, ifname, vlan)",
        ]
    );
    assert_eq!(read.entries.len(), 1, "the good row stays");
    assert_eq!(read.entries[0].1.name, "good");
}

#[test]
fn rows_the_config_cannot_take_are_refused_and_the_file_keeps_its_own() {
    let foreign = [
        ("ingress", "h9"),
        ("dst", "198.19.1.0/24"),
        ("nexthop", "10.0.1.2"),
        ("ifname", "s1"),
    ];
    let elsewhere = [
        ("dst", "198.19.1.0/24"),
        ("nexthop", "10.0.9.2"),
        ("ifname", "s9"),
    ];
    let unrouted = [
        ("dst", "10.9.0.0/16"),
        ("nexthop", "10.0.1.2"),
        ("ifname", "s1"),
    ];
    let read = OverrideRows::from_rows(&rows(&[
        ("from-file", PIN),
        ("foreign", &foreign),
        ("elsewhere", &elsewhere),
        ("unrouted", &unrouted),
    ]));
    let mut config = config();
    let refusals = read.apply(&mut config);
    assert_eq!(
        said(&refusals),
        [
            "\"FABRICLB_OVERRIDE_TABLE:elsewhere\": override \"elsewhere\": next hop \"s9 \
             10.0.9.2\" is not one of group \"spines\", whose route carries 198.19.1.0/24",
            "\"FABRICLB_OVERRIDE_TABLE:foreign\": override \"foreign\": ingress \"h9\" is not \
             one of switch.interfaces",
            "\"FABRICLB_OVERRIDE_TABLE:from-file\": override \"from-file\" is the config \
             file's; a row may not replace it",
            "\"FABRICLB_OVERRIDE_TABLE:unrouted\": override \"unrouted\": no route carries \
             10.9.0.0/16",
        ]
    );
    assert_eq!(
        config.overrides,
        self::config().overrides,
        "only the file's"
    );
}

#[test]
fn a_group_takes_at_most_its_bound_the_file_counting_first() {
    let names: Vec<String> = (0..MAX_OVERRIDES_PER_GROUP)
        .map(|i| format!("r{i:02}"))
        .collect();
    let entries: Vec<(&str, &[(&str, &str)])> = names.iter().map(|n| (n.as_str(), PIN)).collect();
    let mut config = config();
    let refusals = OverrideRows::from_rows(&rows(&entries)).apply(&mut config);
    assert_eq!(config.overrides.len(), MAX_OVERRIDES_PER_GROUP as usize);
    assert_eq!(
        said(&refusals),
        [format!(
            "\"FABRICLB_OVERRIDE_TABLE:r15\": override \"r15\": group \"spines\" has \
             {MAX_OVERRIDES_PER_GROUP} overrides already, the most a group may have"
        )]
    );
}
