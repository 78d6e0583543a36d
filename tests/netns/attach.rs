//! Where the program is attached: the interfaces a reload adds and
//! removes, and the XDP modes on a port without native XDP.

use fabriclb::testbed::Shape;

use crate::bed::Bed;

/// Changing `switch.interfaces` (and `xdp_mode`) live attaches and
/// detaches exactly the ports that changed, as `ip -d link` shows.
#[test]
fn a_reload_attaches_and_detaches_exactly_the_changed_interfaces() {
    let bed = Bed::up("i", 2);
    let config = |interfaces: &str| {
        bed.config("")
            .replace("interfaces = [\"h1\", \"h2\"]", interfaces)
    };
    let xdp = |links: &[(&str, &str)]| -> Vec<(String, String)> {
        links
            .iter()
            .map(|(l, m)| ((*l).to_owned(), (*m).to_owned()))
            .collect()
    };
    let daemon = bed
        .daemon(&config("interfaces = [\"h1\", \"h2\"]"), &["--no-watch"])
        .expect("fabriclb");
    assert_eq!(
        bed.xdp_links("leaf").expect("ip link"),
        xdp(&[("h1", "xdp"), ("h2", "xdp")])
    );
    for (interfaces, changes, attached) in [
        (
            "interfaces = [\"h2\"]",
            &["switch.interfaces: \"h1\" removed"][..],
            &[("h2", "xdp")][..],
        ),
        (
            "interfaces = [\"h1\"]",
            &[
                "switch.interfaces: \"h1\" added",
                "switch.interfaces: \"h2\" removed",
            ],
            &[("h1", "xdp")],
        ),
        (
            "interfaces = [\"h1\"]\nxdp_mode = \"generic\"",
            &["switch.xdp_mode auto -> generic"],
            &[("h1", "xdpgeneric")],
        ),
    ] {
        daemon
            .reconfigure(&config(interfaces))
            .expect("reconfigure");
        let log = daemon.wait_for_log("config reloaded").expect("reloaded");
        for change in changes {
            assert!(log.contains(&format!("config change: {change}")), "{log}");
        }
        assert_eq!(
            bed.xdp_links("leaf").expect("ip link"),
            xdp(attached),
            "{interfaces}"
        );
    }
    daemon.stop().expect("stop");
    assert_eq!(bed.xdp_links("leaf").expect("ip link"), xdp(&[]));
}

/// A bridge has no native XDP (nor does a dummy link, but this kernel has
/// no dummy driver): `auto` falls back to generic mode and says so,
/// `driver` refuses to start, `generic` attaches generic.
#[test]
fn xdp_mode_auto_falls_back_driver_refuses_generic_attaches() {
    let bed = Bed::shaped(
        "x",
        Shape {
            hosts: 1,
            spines: 1,
            ..Shape::default()
        },
    );
    bed.ip("leaf", &["link", "add", "br0", "type", "bridge"])
        .expect("bridge");
    bed.ip("leaf", &["link", "set", "br0", "up"]).expect("up");
    let config = |mode: &str| {
        bed.config("").replace(
            "interfaces = [\"h1\"]",
            &format!("interfaces = [\"br0\"]\nxdp_mode = \"{mode}\""),
        )
    };

    let auto = bed.daemon(&config("auto"), &[]).expect("auto starts");
    let log = auto.wait_for_log("attached").expect("attached");
    assert!(
        log.contains("driver mode refused") && log.contains("falling back to generic mode"),
        "{log}"
    );
    assert!(log.contains("mode=\"generic\""), "{log}");
    let links = bed.xdp_links("leaf").expect("ip link");
    assert_eq!(links, [("br0".to_owned(), "xdpgeneric".to_owned())]);
    auto.stop().expect("stop");

    let error = bed
        .daemon(&config("driver"), &[])
        .err()
        .expect("driver mode cannot start on a bridge")
        .to_string();
    assert!(
        error.contains("exited early") && error.contains("attaching to br0"),
        "{error}"
    );
    assert_eq!(bed.xdp_links("leaf").expect("ip link"), []);

    let generic = bed.daemon(&config("generic"), &[]).expect("generic starts");
    let log = generic.wait_for_log("attached").expect("attached");
    assert!(!log.contains("falling back"), "{log}");
    assert_eq!(
        bed.xdp_links("leaf").expect("ip link"),
        [("br0".to_owned(), "xdpgeneric".to_owned())]
    );
    generic.stop().expect("stop");
}

/// An ingress interface deleted and created again under the same name
/// lost the program with the old device: the next refresh attaches it
/// again and says so.
#[test]
fn a_re_created_ingress_interface_gets_the_program_again() {
    let bed = Bed::up("h", 1);
    let daemon = bed
        .daemon(&bed.config(""), &["--refresh-interval-ms", "100"])
        .expect("fabriclb");
    let h1 = vec![("h1".to_owned(), "xdp".to_owned())];
    assert_eq!(bed.xdp_links("leaf").expect("ip link"), h1);
    daemon.skip_log().expect("log");
    bed.ip("leaf", &["link", "del", "h1"]).expect("delete h1");
    let host = bed.testbed.ns("h1");
    bed.ip(
        "leaf",
        &[
            "link", "add", "h1", "type", "veth", "peer", "name", "eth0", "netns", &host,
        ],
    )
    .expect("create h1 again");
    bed.ip("leaf", &["link", "set", "h1", "up"]).expect("h1 up");
    daemon
        .wait_for_log("ingress interface appeared: program attached")
        .expect("the daemon attached again");
    assert_eq!(bed.xdp_links("leaf").expect("ip link"), h1);
}

/// One rule at start and at reload: an ingress interface that does not
/// exist is a warning and gets the program when it appears; one that
/// exists but refuses the program (driver mode on a bridge) fails the
/// start and is refused by a reload, which then changes nothing.
#[test]
fn missing_ingress_waits_and_refusing_ingress_fails_alike_at_start_and_reload() {
    let bed = Bed::up("2", 1);
    let config = |interfaces: &str| {
        bed.config("").replace(
            "interfaces = [\"h1\"]",
            &format!("interfaces = [{interfaces}]\nxdp_mode = \"driver\""),
        )
    };
    let attached = |names: &[&str]| -> Vec<(String, String)> {
        names
            .iter()
            .map(|n| ((*n).to_owned(), "xdp".to_owned()))
            .collect()
    };
    let missing = "ingress interface does not exist; attaching when it appears";

    let daemon = bed
        .daemon(
            &config("\"h1\", \"h8\""),
            &["--no-watch", "--refresh-interval-ms", "100"],
        )
        .expect("a missing ingress interface is no reason not to start");
    let log = daemon.log().expect("log");
    assert!(log.contains(missing) && log.contains("h8"), "{log}");
    assert_eq!(bed.xdp_links("leaf").expect("ip link"), attached(&["h1"]));

    daemon.skip_log().expect("log");
    bed.ip(
        "leaf",
        &[
            "link", "add", "h8", "type", "veth", "peer", "name", "h8peer",
        ],
    )
    .expect("h8 appears");
    daemon
        .wait_for_log("ingress interface appeared: program attached")
        .expect("attached when it appeared");
    assert_eq!(
        bed.xdp_links("leaf").expect("ip link"),
        attached(&["h1", "h8"])
    );

    daemon
        .reconfigure(&config("\"h1\", \"h8\", \"h7\""))
        .expect("reconfigure");
    let log = daemon.wait_for_log("config reloaded").expect("reloaded");
    assert!(log.contains(missing) && log.contains("h7"), "{log}");
    assert!(!log.contains("ERROR"), "{log}");

    bed.ip("leaf", &["link", "add", "br0", "type", "bridge"])
        .expect("bridge");
    let refusing = config("\"h1\", \"h8\", \"br0\"");
    daemon.reconfigure(&refusing).expect("reconfigure");
    let log = daemon
        .wait_for_log("new config refused, the running one stays")
        .expect("refused");
    assert!(log.contains("attaching to br0"), "{log}");
    assert!(!log.contains("config reloaded"), "{log}");
    assert_eq!(
        bed.xdp_links("leaf").expect("ip link"),
        attached(&["h1", "h8"])
    );
    daemon.stop().expect("stop");

    let error = bed
        .daemon(&refusing, &[])
        .err()
        .expect("the refused config does not start either")
        .to_string();
    assert!(error.contains("attaching to br0"), "{error}");
    assert_eq!(bed.xdp_links("leaf").expect("ip link"), []);
}
