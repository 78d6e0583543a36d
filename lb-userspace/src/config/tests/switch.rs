//! The `[switch]` table, and the interface names it shares with next hops.

use super::{
    NEXT_HOPS, err, ok, route_prefix, with_group, with_next_hop, with_switch, with_switch_key,
};
use crate::config::XdpModeSetting;

#[test]
fn xdp_modes() {
    for (name, mode) in [
        ("auto", XdpModeSetting::Auto),
        ("driver", XdpModeSetting::Driver),
        ("generic", XdpModeSetting::Generic),
    ] {
        let text = with_switch_key(
            &with_group(&format!("name = \"g\"\n{NEXT_HOPS}")),
            &format!("xdp_mode = \"{name}\""),
        );
        assert_eq!(ok(&text).switch.xdp_mode, mode);
        assert_eq!(mode.to_string(), name);
    }
    let text = with_switch("[switch]\ninterfaces = [\"eth0\"]\nxdp_mode = \"native\"\n");
    assert_eq!(
        err(&text),
        "configs/x.toml:3:12: unknown xdp_mode \"native\" \
         (valid modes: \"auto\", \"driver\", \"generic\")"
    );
}

#[test]
fn flowlet_table_size() {
    let text = |size: &str| {
        with_switch_key(
            &route_prefix("10.1.0.0/16"),
            &format!("flowlet_table_size = {size}"),
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
fn empty_interfaces() {
    assert_eq!(
        err(&with_switch("[switch]\ninterfaces = []\n")),
        "configs/x.toml:2:14: switch.interfaces is empty; \
         list at least one interface to attach to"
    );
}

#[test]
fn duplicate_switch_interface() {
    assert_eq!(
        err(&with_switch(
            "[switch]\ninterfaces = [\"eth0\", \"eth1\", \"eth0\"]\n"
        )),
        "configs/x.toml:2:31: duplicate interface \"eth0\" in switch.interfaces \
         (first at line 2, column 15)"
    );
}

#[test]
fn too_long_interface_name() {
    assert_eq!(
        err(&with_switch(
            "[switch]\ninterfaces = [\"eth0\", \"enp129s0f1np1v23\"]\n"
        )),
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
        err(&with_switch("[switch]\ninterfaces = [\"\"]\n")),
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
            err(&with_switch(&format!(
                "[switch]\ninterfaces = [\"{bad}\"]\n"
            ))),
            format!(
                "configs/x.toml:2:15: invalid interface name {shown}: it must not be \
                 \".\" or \"..\" or contain '/', ':', whitespace or NUL"
            )
        );
    }
}

#[test]
fn dlb_mac_is_a_unicast_mac_next_hops_may_share() {
    let text = |mac: &str| {
        with_switch_key(
            &route_prefix("10.1.0.0/16"),
            &format!("dlb_mac = \"{mac}\""),
        )
    };
    assert_eq!(
        ok(&text("00:CC:cc:cc:cc:cc")).switch.dlb_mac,
        Some([0, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc])
    );
    assert_eq!(ok(&route_prefix("10.1.0.0/16")).switch.dlb_mac, None);
    assert_eq!(
        err(&text("01:00:5e:00:00:01")),
        "configs/x.toml:3:11: MAC address 01:00:5e:00:00:01 is multicast; switch.dlb_mac needs \
         a unicast MAC"
    );
    assert_eq!(
        err(&text("00:cc:cc:cc:cc")),
        "configs/x.toml:3:11: invalid MAC address \"00:cc:cc:cc:cc\": expected 6 hex octets \
         separated by ':', e.g. \"02:00:00:00:01:02\""
    );
    let shared = with_group(
        "name = \"g\"\nnext_hops = [\n  { interface = \"eth1\", mac = \"00:cc:cc:cc:cc:cc\" },\n  \
         { interface = \"eth2\", mac = \"00:cc:cc:cc:cc:cc\" },\n]\n",
    );
    assert_eq!(ok(&shared).groups[0].next_hops.len(), 2);
}
