//! Whole configs: the exact structure a good one parses to, the defaults,
//! load's I/O error, and the example configs the repository ships.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;

use lb_common::limits::FLOWLET_TABLE_DEFAULT;
use lb_common::select::hash::HashFields;

use super::{FILE, ok, route_prefix};
use crate::config::{
    ArsProfile, Config, ConfigError, Events, FLOWLET_GAP_DEFAULT_US, FlowletChoice, Group,
    GroupTelemetry, Mode, NextHopAddr, NextHopSpec, Prefix, Route, Spray, Switch,
    TelemetrySettings, Warning, XdpModeSetting, load,
};

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
        overrides: Vec::new(),
        switch: Switch {
            hash_seed: 0x5eed_1234,
            interfaces: vec!["eth0".into(), "eth9".into()],
            xdp_mode: XdpModeSetting::Generic,
            flowlet_table_size: FLOWLET_TABLE_DEFAULT,
            dlb_mac: None,
        },
        ars_profile: ArsProfile::default(),
        events: Events::default(),
        telemetry: TelemetrySettings::default(),
        groups: vec![
            Group {
                name: "spines".into(),
                mode: Mode::Ecmp,
                hash_fields: HashFields::RDMA_BTH_DEST_QP.union(HashFields::DST_IP),
                flowlet_gap_us: FLOWLET_GAP_DEFAULT_US,
                spray: Spray::SelfContained,
                flowlet_choice: FlowletChoice::Weighted,
                telemetry: None,
                weights: Vec::new(),
                kernel_routes: None,
                sonic_routes: None,
                destinations: Vec::new(),
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
                flowlet_choice: FlowletChoice::Weighted,
                telemetry: None,
                weights: Vec::new(),
                kernel_routes: None,
                sonic_routes: None,
                destinations: Vec::new(),
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
                flowlet_choice: FlowletChoice::Weighted,
                telemetry: None,
                weights: Vec::new(),
                kernel_routes: None,
                sonic_routes: None,
                destinations: Vec::new(),
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
        warnings: vec![Warning {
            file: FILE.into(),
            line: 20,
            column: 8,
            reason: "group \"unused\" is used by no route".into(),
        }],
    };
    assert_eq!(ok(text), expected);
    assert_eq!(
        expected.warnings[0].to_string(),
        "configs/x.toml:20:8: warning: group \"unused\" is used by no route"
    );
}

#[test]
fn defaults() {
    let config = ok(&route_prefix("10.1.0.0/16"));
    assert_eq!(
        config.switch,
        Switch {
            hash_seed: 0,
            interfaces: vec!["eth0".into()],
            xdp_mode: XdpModeSetting::Auto,
            flowlet_table_size: FLOWLET_TABLE_DEFAULT,
            dlb_mac: None,
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

/// Valid and free of warnings: what an example shows is meant.
#[test]
fn example_configs_are_valid() {
    let dir = Path::new(EXAMPLES);
    let mut checked = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .path();
        if path.extension().is_some_and(|ext| ext == "toml") {
            match load(&path) {
                Ok(config) => assert_eq!(config.warnings, [], "{}", path.display()),
                Err(e) => panic!("{e}"),
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

/// The FRR example follows the main table's BGP routes beside a group of
/// its own, and reads each learned spine's exporter by template, at the
/// spine's management address.
#[test]
fn frr_example_follows_bgp_routes() {
    let frr = example("frr-leaf.toml");
    let kernel = frr.groups[0].kernel_routes.expect("follows the kernel");
    assert_eq!(kernel.to_string(), "table main protocol bgp");
    let template = crate::telemetry::template::TargetTemplate {
        url: "http://{switch}:9100/metrics".into(),
        device: "swp32".into(),
        switches: [("swp1", "192.0.2.11"), ("swp2", "192.0.2.12")]
            .map(|(port, host)| (port.to_owned(), host.to_owned()))
            .into(),
    };
    assert_eq!(
        frr.groups[0].telemetry,
        Some(GroupTelemetry::RemoteTemplate { template })
    );
    assert_eq!(frr.routes.len(), 1);
    assert_eq!(frr.groups[frr.routes[0].group].name, "storage");
}

/// The SONiC example follows APPL_DB's BGP routes and nothing else, and
/// reads each learned spine's COUNTERS_DB by template, at the spine's
/// management address.
#[test]
fn sonic_example_follows_appl_db_bgp_routes() {
    let sonic = example("sonic-leaf.toml");
    let routes = sonic.groups[0]
        .sonic_routes
        .as_ref()
        .expect("follows APPL_DB");
    assert_eq!(routes.to_string(), "APPL_DB ROUTE_TABLE protocol bgp");
    assert_eq!(sonic.groups.len(), 1);
    assert_eq!(sonic.routes, []);
    let template = crate::telemetry::template::TargetTemplate {
        url: "redis://{switch}:6379".into(),
        device: "Ethernet120".into(),
        switches: [("Ethernet248", "192.0.2.11"), ("Ethernet252", "192.0.2.12")]
            .map(|(port, host)| (port.to_owned(), host.to_owned()))
            .into(),
    };
    assert_eq!(
        sonic.groups[0].telemetry,
        Some(GroupTelemetry::CountersDbTemplate { template })
    );
}

/// The adaptive example says what the defaults are, and they are.
#[test]
fn adaptive_example_spells_out_the_defaults() {
    let adaptive = example("adaptive-leaf.toml");
    assert_eq!(adaptive.ars_profile, ArsProfile::default());
    assert_eq!(adaptive.telemetry, TelemetrySettings::default());
    let Some(GroupTelemetry::Remote { targets }) = &adaptive.groups[0].telemetry else {
        panic!("remote telemetry: {:?}", adaptive.groups[0].telemetry)
    };
    assert_eq!(targets.len(), 4);
    assert_eq!(targets[3].url, "http://10.0.7.1:9100/metrics");
}

/// A FIFO at the config path is refused at once instead of blocking the
/// daemon until somebody writes to it; so is a device that never ends.
#[test]
fn only_a_regular_file_is_read() {
    let dir = std::env::temp_dir().join(format!("fabriclb-config-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let fifo = dir.join("fifo.toml");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    let (tx, rx) = std::sync::mpsc::channel();
    let path = fifo.clone();
    std::thread::spawn(move || tx.send(load(&path).map(drop).map_err(|e| e.to_string())));
    let result = rx
        .recv_timeout(std::time::Duration::from_secs(5))
        .expect("loading a FIFO blocked");
    assert_eq!(
        result,
        Err(format!(
            "{}: not a regular file (a FIFO, a device or a directory); a config is read only \
             from a regular file",
            fifo.display()
        ))
    );
    let zero = load(Path::new("/dev/zero"))
        .map(drop)
        .map_err(|e| e.to_string());
    assert!(zero.is_err_and(|e| e.contains("not a regular file")));

    let big = dir.join("big.toml");
    let file = std::fs::File::create(&big).expect("big");
    file.set_len(crate::config::MAX_CONFIG_BYTES + 1)
        .expect("sparse");
    assert_eq!(
        load(&big).map(drop).map_err(|e| e.to_string()),
        Err(format!(
            "{}: 16777217 bytes; a config may be at most 16777216 bytes",
            big.display()
        ))
    );
    std::fs::remove_dir_all(&dir).expect("cleanup");
}
