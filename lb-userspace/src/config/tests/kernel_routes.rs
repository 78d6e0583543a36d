//! `kernel_routes` and `sonic_routes`: groups that follow the kernel's
//! routing table or SONiC's APPL_DB routes.

use super::{NEXT_HOPS, SWITCH, err, ok, warnings, with_group_key, with_groups};
use crate::config::{GroupTelemetry, KernelRoutes, RT_TABLE_MAIN};
use crate::telemetry::template::TargetTemplate;

/// `SWITCH`, then a group "uplinks" on lines 3-5 whose line 5 is `keys`,
/// then `rest` from line 6.
fn followed(keys: &str, rest: &str) -> String {
    format!("{SWITCH}[[group]]\nname = \"uplinks\"\n{keys}\n{rest}")
}

const BGP: &str = "kernel_routes = { table = \"main\", protocol = \"bgp\" }";

#[test]
fn a_group_follows_a_table_and_a_protocol_by_name_or_number() {
    let config = ok(&followed(BGP, "mode = \"flowlet\"\n"));
    let group = &config.groups[0];
    assert_eq!(
        group.kernel_routes,
        Some(KernelRoutes {
            table: RT_TABLE_MAIN,
            protocol: Some(186)
        })
    );
    assert!(group.next_hops.is_empty());
    assert!(config.routes.is_empty(), "no [[route]] needed");
    assert_eq!(warnings(&followed(BGP, "")), Vec::<String>::new());
    let numbers = ok(&followed(
        "kernel_routes = { table = 100, protocol = 200 }",
        "",
    ));
    let routes = numbers.groups[0].kernel_routes.expect("kernel_routes");
    assert_eq!((routes.table, routes.protocol), (100, Some(200)));
    assert_eq!(routes.to_string(), "table 100 protocol 200");
    let main = ok(&followed("kernel_routes = { protocol = \"static\" }", ""));
    let routes = main.groups[0].kernel_routes.expect("kernel_routes");
    assert_eq!(routes.to_string(), "table main protocol static");
    let any = ok(&followed("kernel_routes = { table = \"default\" }", ""));
    assert_eq!(any.groups[0].kernel_routes.map(|k| k.protocol), Some(None));
}

#[test]
fn kernel_routes_refuse_unknown_names_and_numbers_out_of_range() {
    assert_eq!(
        err(&followed("kernel_routes = { protocol = \"bgp4\" }", "")),
        "configs/x.toml:5:30: unknown route protocol \"bgp4\" (names: \"unspec\", \
         \"redirect\", \"kernel\", \"boot\", \"static\", \"gated\", \"ra\", \"mrt\", \"zebra\", \
         \"bird\", \"dnrouted\", \"xorp\", \"ntk\", \"dhcp\", \"mrouted\", \"keepalived\", \
         \"babel\", \"openr\", \"bgp\", \"isis\", \"ospf\", \"rip\", \"eigrp\"; or a number)"
    );
    assert_eq!(
        err(&followed("kernel_routes = { table = 0 }", "")),
        "configs/x.toml:5:27: routing table 0 is out of range 1..=4294967295"
    );
    assert_eq!(
        err(&followed("kernel_routes = { protocol = 256 }", "")),
        "configs/x.toml:5:30: route protocol 256 is out of range 0..=255"
    );
    assert_eq!(
        err(&followed("kernel_routes = { table = \"mains\" }", "")),
        "configs/x.toml:5:27: unknown routing table \"mains\" (names: \"default\", \"main\", \
         \"local\"; or a number)"
    );
    assert_eq!(
        err(&followed("kernel_routes = {}", "")),
        "configs/x.toml:5:17: group \"uplinks\" kernel_routes names neither a table nor a \
         protocol; e.g. kernel_routes = { table = \"main\", protocol = \"bgp\" }"
    );
}

#[test]
fn a_group_has_next_hops_or_kernel_routes() {
    assert_eq!(
        err(&followed(BGP, NEXT_HOPS)),
        "configs/x.toml:6:13: group \"uplinks\" follows the kernel's routes (kernel_routes), \
         whose next hops it learns: next_hops cannot be set too"
    );
    assert_eq!(
        err(&followed("mode = \"ecmp\"", "")),
        "configs/x.toml:3:1: group \"uplinks\" has no next_hops; list them, or set \
         kernel_routes (or sonic_routes) to follow the kernel's routes (or SONiC's)"
    );
}

/// A learning group reads its learned next hops' own egress queues
/// (`linux`), their SONiC ports (`counters-db`, a port per interface), or
/// the next switches' queues (`remote`, a target per next hop made from
/// the group's templates).
#[test]
fn kernel_groups_take_telemetry_by_template() {
    let linux = ok(&followed(
        BGP,
        "mode = \"flowlet\"\ntelemetry = \"linux\"\n",
    ));
    assert_eq!(linux.groups[0].telemetry, Some(GroupTelemetry::Linux));
    let templates = "telemetry_url = \"http://{ip}:9100/metrics\"\n\
                     telemetry_device = \"to-{interface}\"\n";
    let remote = ok(&followed(
        BGP,
        &format!("mode = \"flowlet\"\ntelemetry = \"remote\"\n{templates}"),
    ));
    let template = TargetTemplate {
        url: "http://{ip}:9100/metrics".into(),
        device: "to-{interface}".into(),
        switches: Default::default(),
    };
    assert_eq!(
        remote.groups[0].telemetry,
        Some(GroupTelemetry::RemoteTemplate { template })
    );
    assert_eq!(
        err(&followed(
            BGP,
            "mode = \"flowlet\"\ntelemetry = \"remote\"\n"
        )),
        "configs/x.toml:7:13: group \"uplinks\" follows the kernel's routes: its next hops \
         are learned, so telemetry = \"remote\" needs telemetry_url and telemetry_device at \
         the group, templates in which {ip} and {interface} stand for each next hop's address \
         and port, e.g. telemetry_url = \"http://{ip}:9100/metrics\", telemetry_device = \
         \"eth1\""
    );
    assert_eq!(
        err(&followed(
            BGP,
            "telemetry = \"remote\"\ntelemetry_url = \"http://{host}:9100/\"\n\
             telemetry_device = \"eth1\"\n"
        )),
        "configs/x.toml:7:17: telemetry_url \"http://{host}:9100/\": only {ip} (the next \
         hop's address), {interface} (the port toward it) and {switch} (the address \
         switch_addresses gives the port) may be written in braces"
    );
    assert_eq!(
        err(&followed(
            BGP,
            &format!("telemetry = \"linux\"\n{templates}")
        )),
        "configs/x.toml:7:17: telemetry_url does not apply to group \"uplinks\"'s \
         telemetry = \"linux\""
    );
    // A group that lists its next hops sets them on each.
    assert_eq!(
        err(&with_group_key(&format!(
            "telemetry = \"remote\"\n{templates}"
        ))),
        "configs/x.toml:6:17: telemetry_url at the group is a template for next hops the \
         group learns (kernel_routes, sonic_routes); group \"g\" lists its next hops: set \
         telemetry_url on each"
    );
}

/// `{switch}` takes the management address `switch_addresses` gives the
/// port, so a spine is scraped beside the queues it reports, not through
/// them; every address must make a URL, and the table is refused where
/// nothing reads it.
#[test]
fn switch_addresses_take_scrapes_off_the_links() {
    let group = |url: &str, switches: &str| {
        followed(
            BGP,
            &format!(
                "mode = \"flowlet\"\ntelemetry = \"remote\"\ntelemetry_url = \"{url}\"\n\
                 telemetry_device = \"{{interface}}\"\nswitch_addresses = {{ {switches} }}\n"
            ),
        )
    };
    let url = "http://{switch}:9100/metrics";
    let config = ok(&group(url, "s1 = \"192.0.2.11\", s2 = \"[2001:db8::12]\""));
    let Some(GroupTelemetry::RemoteTemplate { template }) = &config.groups[0].telemetry else {
        panic!("a template: {:?}", config.groups[0].telemetry)
    };
    assert_eq!(
        template.switches,
        [("s1", "192.0.2.11"), ("s2", "[2001:db8::12]")]
            .map(|(port, host)| (port.to_owned(), host.to_owned()))
            .into()
    );
    assert_eq!(
        err(&group("http://{ip}:9100/metrics", "s1 = \"192.0.2.11\"")),
        "configs/x.toml:10:20: switch_addresses is read only through {switch} in \
         telemetry_url, which has none: write e.g. telemetry_url = \
         \"http://{switch}:9100/metrics\""
    );
    assert_eq!(
        err(&group(url, "s1 = \"192.0.2.11/24\"")),
        "configs/x.toml:10:27: switch_addresses: \"192.0.2.11/24\" (port \"s1\") is no \
         address or host name, e.g. \"192.0.2.11\" or \"[2001:db8::11]\""
    );
    assert_eq!(
        err(&group(url, "\"a/b\" = \"192.0.2.11\"")),
        "configs/x.toml:10:30: invalid interface name \"a/b\": it must not be \".\" or \
         \"..\" or contain '/', ':', whitespace or NUL"
    );
    assert_eq!(
        err(&with_group_key(
            "telemetry = \"remote\"\nswitch_addresses = { s1 = \"192.0.2.11\" }\n"
        )),
        "configs/x.toml:6:20: switch_addresses at the group is a template for next hops \
         the group learns (kernel_routes, sonic_routes); group \"g\" lists its next hops: \
         write each one's telemetry_url or counters_db with its switch's address"
    );
}

/// `counters-db` reads a learned next hop's switch through the group's
/// `counters_db` template, its port there through `sonic_port`: a SONiC
/// spine's COUNTERS_DB over the management network, as `remote` reads
/// its exporter. Without the template the group reads this switch's own.
#[test]
fn counters_db_templates_read_each_learned_switch() {
    let group = |keys: &str| {
        followed(
            BGP,
            &format!("mode = \"flowlet\"\ntelemetry = \"counters-db\"\n{keys}"),
        )
    };
    let templates = "counters_db = \"redis://{switch}:6379\"\nsonic_port = \"Ethernet{interface}\"\n\
                     switch_addresses = { s1 = \"192.0.2.11\" }\n";
    let config = ok(&group(templates));
    let Some(GroupTelemetry::CountersDbTemplate { template }) = &config.groups[0].telemetry else {
        panic!("a template: {:?}", config.groups[0].telemetry)
    };
    assert_eq!(
        (template.url.as_str(), template.device.as_str()),
        ("redis://{switch}:6379", "Ethernet{interface}")
    );
    assert_eq!(template.switches.len(), 1);
    let own = ok(&group(""));
    assert_eq!(
        own.groups[0].telemetry,
        Some(GroupTelemetry::CountersDb {
            ports: Vec::new(),
            switches: Vec::new()
        })
    );
    assert_eq!(
        err(&group("counters_db = \"redis://192.0.2.11:6379\"\n")),
        "configs/x.toml:8:15: counters_db \"redis://192.0.2.11:6379\" at group \"uplinks\" \
         would read one switch for every learned next hop: write {switch} or {ip} for each \
         one's own, e.g. \"redis://{switch}:6379\", or [telemetry] counters_db to read this \
         switch's"
    );
    assert_eq!(
        err(&group("counters_db = \"redis://{switch}:0\"\n")),
        "configs/x.toml:8:15: counters_db \"redis://{switch}:0\" with {ip} = 192.0.2.1: \
         `redis://192.0.2.1:0`: port `0` is not a number in 1..=65535"
    );
    assert_eq!(
        err(&group("sonic_port = \"Ethernet0\"\n")),
        "configs/x.toml:8:14: sonic_port makes a learned next hop's counters-db path with \
         the group's counters_db template, which group \"uplinks\" has none of: write e.g. \
         counters_db = \"redis://{switch}:6379\""
    );
    assert_eq!(
        err(&group(
            "counters_db = \"redis://{ip}:6379\"\nswitch_addresses = { s1 = \"192.0.2.11\" }\n"
        )),
        "configs/x.toml:9:20: switch_addresses is read only through {switch} in counters_db, \
         which has none: write e.g. counters_db = \"redis://{switch}:6379\""
    );
    assert_eq!(
        err(&followed(
            BGP,
            "telemetry = \"remote\"\ncounters_db = \"redis://{switch}:6379\"\n"
        )),
        "configs/x.toml:7:15: counters_db does not apply to group \"uplinks\"'s telemetry = \
         \"remote\""
    );
    assert_eq!(
        err(&group("telemetry_url = \"http://{switch}:9100/metrics\"\n")),
        "configs/x.toml:8:17: telemetry_url does not apply to group \"uplinks\"'s \
         telemetry = \"counters-db\""
    );
}

#[test]
fn two_groups_cannot_follow_the_same_routes() {
    let second = "[[group]]\nname = \"more\"\nkernel_routes = { table = 254 }\n";
    assert_eq!(
        err(&followed(BGP, second)),
        "configs/x.toml:8:17: group \"more\" follows the kernel's routes (table main) that \
         group \"uplinks\" follows too (the kernel's routes (table main protocol bgp), at line \
         5, column 17); a route can feed one group only"
    );
    let other = "[[group]]\nname = \"more\"\nkernel_routes = { protocol = \"ospf\" }\n";
    assert_eq!(ok(&followed(BGP, other)).groups.len(), 2);
}

#[test]
fn a_route_cannot_point_at_a_kernel_group_nor_a_group_take_its_learned_names() {
    let route = "[[route]]\nprefix = \"10.0.0.0/8\"\ngroup = \"uplinks\"\n";
    assert_eq!(
        err(&followed(BGP, route)),
        "configs/x.toml:8:9: group \"uplinks\" follows the kernel's routes (table main \
         protocol bgp); a [[route]] cannot point at it"
    );
    let mut text = with_groups(
        &[("uplinks#2", "eth1", "10.0.0.1")],
        "[[route]]\nprefix = \"10.0.0.0/8\"\ngroup = \"uplinks#2\"\n",
    );
    text += &format!("[[group]]\nname = \"uplinks\"\n{BGP}\n");
    assert_eq!(
        err(&text),
        "configs/x.toml:4:8: group name \"uplinks#2\" is taken: group \"uplinks\" learns \
         its routes and names the groups it learns uplinks#1, uplinks#2, ..."
    );
    // Without a kernel group of that name, the name means what it always did.
    let plain = with_groups(
        &[("uplinks#2", "eth1", "10.0.0.1")],
        "[[route]]\nprefix = \"10.0.0.0/8\"\ngroup = \"uplinks#2\"\n",
    );
    assert_eq!(ok(&plain).groups[0].name, "uplinks#2");
}

#[test]
fn without_a_kernel_group_a_route_is_still_required() {
    let text = with_groups(&[("g", "eth1", "10.0.0.1")], "");
    assert_eq!(
        err(&text),
        "configs/x.toml:1:1: no [[route]] defined; at least one route is required"
    );
}

const SONIC: &str = "sonic_routes = { protocol = \"bgp\" }";

#[test]
fn a_group_follows_sonic_routes_alone() {
    let bgp = ok(&followed(SONIC, ""));
    assert_eq!(
        bgp.groups[0]
            .sonic_routes
            .as_ref()
            .and_then(|s| s.protocol.as_deref()),
        Some("bgp")
    );
    assert_eq!(bgp.groups[0].kernel_routes, None);
    let any = ok(&followed("sonic_routes = {}", ""));
    assert_eq!(
        any.groups[0]
            .sonic_routes
            .as_ref()
            .map(|s| s.protocol.clone()),
        Some(None)
    );
    assert_eq!(
        err(&followed(SONIC, BGP)),
        "configs/x.toml:5:16: group \"uplinks\" follows the kernel's routes (kernel_routes): \
         it cannot follow SONiC's (sonic_routes) too"
    );
    assert_eq!(
        err(&followed(SONIC, NEXT_HOPS)),
        "configs/x.toml:6:13: group \"uplinks\" follows SONiC's routes (sonic_routes), \
         whose next hops it learns: next_hops cannot be set too"
    );
    assert_eq!(
        err(&followed("sonic_routes = { protocol = \"b g p\" }", "")),
        "configs/x.toml:5:29: group \"uplinks\" sonic_routes protocol \"b g p\" is not a \
         protocol name as APPL_DB's ROUTE_TABLE rows carry it (e.g. \"bgp\")"
    );
    let second = "[[group]]\nname = \"more\"\nsonic_routes = {}\n";
    assert_eq!(
        err(&followed(SONIC, second)),
        "configs/x.toml:8:16: group \"more\" follows SONiC's routes (APPL_DB ROUTE_TABLE) \
         that group \"uplinks\" follows too (SONiC's routes (APPL_DB ROUTE_TABLE protocol \
         bgp), at line 5, column 16); a route can feed one group only"
    );
    // The kernel's and APPL_DB's are different routes.
    let kernel = format!("[[group]]\nname = \"more\"\n{BGP}\n");
    assert_eq!(ok(&followed(SONIC, &kernel)).groups.len(), 2);
}
