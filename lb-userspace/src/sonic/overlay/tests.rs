//! Rows in SONiC's formats over a config file. Each fixture says which
//! SONiC source it follows.

use std::path::Path;

use lb_common::select::hash::HashFields;

use super::*;

const FILE: &str = r#"
[switch]
hash_seed = 7
interfaces = ["h1"]

[[group]]
name = "spines"
hash_fields = ["src_ip", "dst_ip"]
next_hops = [
  { interface = "eth4", ip = "10.0.4.1" },
  { interface = "eth5", ip = "10.0.5.1" },
]

[[group]]
name = "storage"
mode = "flowlet"
flowlet_gap_us = 100
next_hops = [{ interface = "eth6", ip = "10.0.6.1" }]

[[route]]
prefix = "10.1.0.0/16"
group = "spines"

[[route]]
prefix = "10.2.0.0/16"
group = "storage"
"#;

fn base() -> Config {
    crate::config::parse(FILE, Path::new("leaf.toml")).expect("valid")
}

/// Rows from `(key, [(field, value)])`; keys with `:` go to APPL_DB.
fn rows(keys: &[(&str, &[(&str, &str)])]) -> Rows {
    let mut rows = Rows::default();
    for (key, fields) in keys {
        let row = Ok(fields
            .iter()
            .map(|(f, v)| (f.to_string(), v.to_string()))
            .collect());
        let db = match key.contains(':') {
            true => &mut rows.appl,
            false => &mut rows.config,
        };
        db.insert(key.to_string(), row);
    }
    rows
}

fn said(refusals: &[Refusal]) -> Vec<String> {
    refusals.iter().map(ToString::to_string).collect()
}

/// `SWITCH_HASH|GLOBAL` as `redis-cli -n 4 HGETALL` shows it in SONiC's
/// generic hash design (`doc/hash/hash-design.md`, "Data sample", RDMA
/// fields from its RoCE extension): ConfigDBConnector's `@` list.
#[test]
fn switch_hash_sets_every_groups_fields_and_says_what_it_cannot_hash() {
    let sample = "DST_MAC,SRC_MAC,ETHERTYPE,IP_PROTOCOL,DST_IP,SRC_IP,L4_DST_PORT,L4_SRC_PORT,\
                  INNER_DST_MAC,INNER_SRC_MAC,INNER_ETHERTYPE,INNER_IP_PROTOCOL,INNER_DST_IP,\
                  INNER_SRC_IP,INNER_L4_DST_PORT,INNER_L4_SRC_PORT,IPV6_FLOW_LABEL,\
                  RDMA_BTH_OPCODE,RDMA_BTH_DEST_QP";
    let overlay = Overlay::from_rows(&rows(&[(
        "SWITCH_HASH|GLOBAL",
        &[
            ("ecmp_hash@", sample),
            ("lag_hash@", "SRC_IP,DST_IP"),
            ("ecmp_hash_algorithm", "CRC"),
        ],
    )]));
    assert_eq!(overlay.hash_fields, Some(HashFields::ALL));
    assert_eq!(
        said(&overlay.refusals),
        [
            "\"SWITCH_HASH|GLOBAL\" field \"ecmp_hash@\": fabriclb does not hash on DST_MAC, \
             SRC_MAC, ETHERTYPE, INNER_DST_MAC, INNER_SRC_MAC, INNER_ETHERTYPE, \
             INNER_IP_PROTOCOL, INNER_DST_IP, INNER_SRC_IP, INNER_L4_DST_PORT, \
             INNER_L4_SRC_PORT, IPV6_FLOW_LABEL, RDMA_BTH_OPCODE; hashing on the rest"
        ]
    );
    let (config, refusals) = overlay.apply(&base());
    assert!(refusals.is_empty());
    assert!(
        config
            .groups
            .iter()
            .all(|g| g.hash_fields == HashFields::ALL)
    );

    // The five-tuple alone, written by hand without the `@`.
    let five = Overlay::from_rows(&rows(&[(
        "SWITCH_HASH|GLOBAL",
        &[(
            "ecmp_hash",
            "SRC_IP,DST_IP,IP_PROTOCOL,L4_SRC_PORT,L4_DST_PORT",
        )],
    )]));
    let (config, _) = five.apply(&base());
    let want = HashFields::ALL.0 & !HashFields::RDMA_BTH_DEST_QP.0;
    assert!(config.groups.iter().all(|g| g.hash_fields.0 == want));
    assert!(five.refusals.is_empty());
}

#[test]
fn a_bad_hash_list_is_refused_and_the_files_fields_stay() {
    for (list, reason) in [
        (
            "SRC_IP,src_port",
            "\"src_port\" is no SONiC hash field (sonic-hash.yang); the list is ignored",
        ),
        (
            "DST_MAC,SRC_MAC",
            "fabriclb does not hash on DST_MAC, SRC_MAC; hashing on the rest",
        ),
    ] {
        let overlay = Overlay::from_rows(&rows(&[("SWITCH_HASH|GLOBAL", &[("ecmp_hash@", list)])]));
        assert_eq!(overlay.hash_fields, None, "{list}");
        assert_eq!(
            said(&overlay.refusals)[0],
            format!("\"SWITCH_HASH|GLOBAL\" field \"ecmp_hash@\": {reason}")
        );
        let (config, _) = overlay.apply(&base());
        assert_eq!(config.groups, base().groups);
    }
}

/// `SWITCH_TABLE:switch` in APPL_DB as swss's `switch.json` template
/// writes it (sonic-buildimage `dockers/docker-orchagent/switch.json.j2`;
/// `switchorch.cpp` maps `ecmp_hash_seed` to the SAI ECMP seed).
#[test]
fn the_seed_comes_from_appl_db() {
    let overlay = Overlay::from_rows(&rows(&[(
        "SWITCH_TABLE:switch",
        &[
            ("ecmp_hash_seed", "10"),
            ("lag_hash_seed", "10"),
            ("fdb_aging_time", "600"),
        ],
    )]));
    let (config, _) = overlay.apply(&base());
    assert_eq!(config.switch.hash_seed, 10);
    assert!(overlay.refusals.is_empty());

    let bad = Overlay::from_rows(&rows(&[(
        "SWITCH_TABLE:switch",
        &[("ecmp_hash_seed", "-1")],
    )]));
    assert_eq!(bad.apply(&base()).0.switch.hash_seed, 7);
    assert_eq!(
        said(&bad.refusals),
        [
            "\"SWITCH_TABLE:switch\" field \"ecmp_hash_seed\": \"-1\" is not a number in \
          0..=4294967295 (a 32-bit seed)"
        ]
    );
}

/// The ARS tables of `sonic-ars.yang` (sonic-buildimage
/// `src/sonic-yang-models/yang-models/sonic-ars.yang`): one profile, an
/// object, the interfaces that use it.
const PROFILE: (&str, &[(&str, &str)]) = (
    "ARS_PROFILE|default",
    &[
        ("algorithm", "ewma"),
        ("ars_nhg_path_selector_mode", "interface"),
        ("default_ars_object", "fast"),
        ("max_flows", "8192"),
        ("sampling_interval", "5000"),
        ("past_load_min_value", "0"),
        ("past_load_max_value", "400"),
        ("past_load_weight", "2"),
        ("future_load_min_value", "1000"),
        ("future_load_max_value", "9000"),
        ("ipv4_enable", "true"),
    ],
);
const OBJECT: (&str, &[(&str, &str)]) = (
    "ARS_OBJECT|fast",
    &[
        ("assign_mode", "per_packet_quality"),
        ("flowlet_idle_time", "128"),
        ("max_flows", "512"),
        ("primary_path_threshold", "16"),
    ],
);

#[test]
fn ars_interfaces_give_a_group_its_objects_mode_and_idle_time() {
    let overlay = Overlay::from_rows(&rows(&[
        PROFILE,
        OBJECT,
        ("ARS_INTERFACE|eth4", &[("scaling_factor", "1")]),
        ("ARS_INTERFACE|eth5", &[("ars_obj_name", "fast")]),
    ]));
    assert_eq!(said(&overlay.refusals), Vec::<String>::new());
    let (config, refusals) = overlay.apply(&base());
    assert!(refusals.is_empty());
    let spines = &config.groups[0];
    assert_eq!((spines.mode, spines.flowlet_gap_us), (Mode::PerPacket, 128));
    // No ARS interface: the file's.
    assert_eq!(config.groups[1], base().groups[1]);
    let profile = config.ars_profile;
    assert_eq!(profile.sampling_interval_us, 5000);
    assert_eq!(
        profile.quality.past_load,
        Scale {
            min: 0,
            max: 400 * BYTES_PER_SEC_PER_MBIT,
            weight: 2
        }
    );
    assert_eq!(
        profile.quality.future_load,
        Scale {
            min: 1000,
            max: 9000,
            weight: 1
        }
    );

    // An object with neither field: SONiC's defaults, flowlets after 256 us.
    let bare = Overlay::from_rows(&rows(&[
        PROFILE,
        ("ARS_OBJECT|fast", &[("max_flows", "512")]),
        ("ARS_INTERFACE|eth4", &[]),
        ("ARS_INTERFACE|eth5", &[]),
    ]));
    let spines = &bare.apply(&base()).0.groups[0];
    assert_eq!((spines.mode, spines.flowlet_gap_us), (Mode::Flowlet, 256));
}

#[test]
fn without_a_profile_there_is_no_ars() {
    let overlay = Overlay::from_rows(&rows(&[
        OBJECT,
        ("ARS_INTERFACE|eth4", &[("ars_obj_name", "fast")]),
        ("ARS_INTERFACE|eth5", &[("ars_obj_name", "fast")]),
    ]));
    assert_eq!(overlay.ars, None);
    assert_eq!(overlay.apply(&base()).0, base());
}

#[test]
fn nexthop_and_global_modes() {
    let mut profile: Vec<(&str, &str)> = PROFILE.1.to_vec();
    profile[1].1 = "nexthop";
    let overlay = Overlay::from_rows(&rows(&[
        ("ARS_PROFILE|default", &profile),
        OBJECT,
        ("ARS_NEXTHOP|default|10.0.6.1", &[("role", "primary_path")]),
        ("ARS_NEXTHOP|Vrf-red|10.0.4.1", &[]),
    ]));
    assert_eq!(
        said(&overlay.refusals),
        [
            "\"ARS_NEXTHOP|Vrf-red|10.0.4.1\": VRF \"Vrf-red\": fabriclb forwards in the default VRF only"
        ]
    );
    let (config, _) = overlay.apply(&base());
    assert_eq!(config.groups[0], base().groups[0]);
    assert_eq!(
        (config.groups[1].mode, config.groups[1].flowlet_gap_us),
        (Mode::PerPacket, 128)
    );

    profile[1].1 = "global";
    let overlay = Overlay::from_rows(&rows(&[("ARS_PROFILE|default", &profile), OBJECT]));
    let (config, _) = overlay.apply(&base());
    assert!(config.groups.iter().all(|g| g.mode == Mode::PerPacket));
}

#[test]
fn a_group_split_between_objects_keeps_the_files_settings() {
    let overlay = Overlay::from_rows(&rows(&[PROFILE, OBJECT, ("ARS_INTERFACE|eth5", &[])]));
    let (config, refusals) = overlay.apply(&base());
    assert_eq!(config.groups[0], base().groups[0]);
    assert_eq!(
        said(&refusals),
        [
            "\"ARS_INTERFACE|eth5\": group \"spines\" is split between ARS objects \
          (ARS_INTERFACE|eth4 -> none, ARS_INTERFACE|eth5 -> \"fast\"); ARS applies to a whole \
          next-hop group, so it keeps the file's mode and flowlet gap"
        ]
    );
}

#[test]
fn invalid_fields_are_refused_with_key_field_and_reason_and_the_rest_applies() {
    let mut rows = rows(&[
        (
            "ARS_PROFILE|default",
            &[
                ("sampling_interval", "16"),
                ("algorithm", "wrr"),
                ("flavour", "x"),
            ],
        ),
        (
            "ARS_OBJECT|fast",
            &[("assign_mode", "per_packet"), ("flowlet_idle_time", "64")],
        ),
        ("ARS_OBJECT|slow", &[("flowlet_idle_time", "5000")]),
        ("ARS_INTERFACE|eth4", &[("ars_obj_name", "fast")]),
        ("ARS_INTERFACE|eth5", &[("ars_obj_name", "fast")]),
        ("ARS_INTERFACE|eth6", &[("ars_obj_name", "nowhere")]),
    ]);
    rows.config.insert(
        "ARS_INTERFACE|eth7".into(),
        Err("not a hash; SONiC keeps every row as one".into()),
    );
    let overlay = Overlay::from_rows(&rows);
    assert_eq!(
        said(&overlay.refusals),
        [
            "\"ARS_INTERFACE|eth6\" field \"ars_obj_name\": no ARS_OBJECT|nowhere",
            "\"ARS_INTERFACE|eth7\": not a hash; SONiC keeps every row as one",
            "\"ARS_OBJECT|fast\" field \"assign_mode\": \"per_packet\" is not one of \
             per_flowlet_quality, per_packet_quality",
            "\"ARS_OBJECT|slow\" field \"flowlet_idle_time\": \"5000\" is not a number in \
             2..=2047 (microseconds)",
            "\"ARS_PROFILE|default\" field \"algorithm\": \"wrr\" is not one of ewma",
            "\"ARS_PROFILE|default\" field \"flavour\": unknown field, ignored",
            "\"ARS_PROFILE|default\" field \"sampling_interval\": \"16\" is not a number in \
             1000..=1000000 (microseconds fabriclb polls telemetry at)",
        ]
    );
    let (config, refusals) = overlay.apply(&base());
    assert!(refusals.is_empty());
    // The invalid mode is the file's; the valid idle time applies.
    assert_eq!(
        (config.groups[0].mode, config.groups[0].flowlet_gap_us),
        (Mode::Ecmp, 64)
    );
    assert_eq!(config.groups[1], base().groups[1]);
    assert_eq!(config.ars_profile, base().ars_profile);
}

#[test]
fn a_profile_that_cannot_work_is_refused_whole() {
    let overlay = Overlay::from_rows(&rows(&[(
        "ARS_PROFILE|default",
        &[("future_load_weight", "0"), ("sampling_interval", "2000")],
    )]));
    let (config, refusals) = overlay.apply(&base());
    assert_eq!(config.ars_profile, base().ars_profile);
    assert_eq!(
        said(&refusals),
        [
            "\"ARS_PROFILE|default\": weighs nothing: every load weight is 0, so every path \
          would always look idle; the profile is not applied"
        ]
    );
    let overlay = Overlay::from_rows(&rows(&[(
        "ARS_PROFILE|default",
        &[
            ("future_load_min_value", "9000"),
            ("future_load_max_value", "1000"),
        ],
    )]));
    assert_eq!(
        said(&overlay.apply(&base()).1),
        [
            "\"ARS_PROFILE|default\": future_load_max_value must be above future_load_min_value \
          (1000 <= 9000); the profile is not applied"
        ]
    );
}

/// A group that follows the kernel's routes lists no next hops in the
/// file: SWITCH_HASH reaches it, no ARS object does.
#[test]
fn a_group_following_the_kernel_takes_the_hash_and_no_ars_object() {
    let text = FILE.replace(
        "next_hops = [{ interface = \"eth6\", ip = \"10.0.6.1\" }]",
        "kernel_routes = { table = 254 }",
    );
    let text = text.replace(
        "[[route]]\nprefix = \"10.2.0.0/16\"\ngroup = \"storage\"\n",
        "",
    );
    let base = crate::config::parse(&text, Path::new("leaf.toml")).expect("valid");
    assert!(base.groups[1].next_hops.is_empty());
    let mut profile: Vec<(&str, &str)> = PROFILE.1.to_vec();
    profile[1].1 = "global";
    let overlay = Overlay::from_rows(&rows(&[
        ("ARS_PROFILE|default", &profile),
        OBJECT,
        ("SWITCH_HASH|GLOBAL", &[("ecmp_hash@", "SRC_IP,DST_IP")]),
    ]));
    let (config, refusals) = overlay.apply(&base);
    assert!(refusals.is_empty(), "{refusals:?}");
    let storage = &config.groups[1];
    assert_eq!(
        storage.hash_fields,
        HashFields::SRC_IP.union(HashFields::DST_IP)
    );
    assert_eq!(
        (storage.mode, storage.flowlet_gap_us),
        (base.groups[1].mode, base.groups[1].flowlet_gap_us)
    );
    assert_eq!(config.groups[0].mode, Mode::PerPacket);
}
