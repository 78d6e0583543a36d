//! The `[[group]]` tables: names, modes, hash fields, flowlet gap, spray.

use super::{NEXT_HOPS, err, ok, warnings, with_group, with_group_key, with_groups};
use crate::config::{Mode, Spray};

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
fn empty_next_hops() {
    assert_eq!(
        err(&with_group("name = \"g\"\nnext_hops = []\n")),
        "configs/x.toml:5:13: group \"g\" has no next hops"
    );
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

/// Keys a mode ignores are warned about where they are, not refused: a
/// reload may switch the mode live and keep them. Where they act, nothing.
#[test]
fn keys_with_no_effect_in_the_mode_are_warned_about() {
    let keys = "flowlet_gap_us = 50\nspray = \"all\"\ntelemetry = \"linux\"";
    let group = |mode: &str| warnings(&with_group_key(&format!("mode = \"{mode}\"\n{keys}")));
    assert_eq!(
        group("ecmp"),
        [
            "configs/x.toml:7:9: warning: group \"g\": spray has no effect while the mode is ecmp",
            "configs/x.toml:8:13: warning: group \"g\": telemetry has no effect \
             while the mode is ecmp",
        ]
    );
    assert_eq!(
        group("flowlet"),
        ["configs/x.toml:7:9: warning: group \"g\": spray has no effect while the mode is flowlet"]
    );
    assert!(group("per-packet").is_empty());
    // Ecmp by default, too.
    assert_eq!(
        warnings(&with_group_key("spray = \"self-contained\"")),
        ["configs/x.toml:5:9: warning: group \"g\": spray has no effect while the mode is ecmp"]
    );
}
