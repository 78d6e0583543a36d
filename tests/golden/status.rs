//! `fabriclb status` and `explain` as an operator runs them: the golden
//! switch programmed, a few packets run, its maps pinned into a
//! test-private bpffs the way the daemon pins them, and the binary reading
//! them from there with no daemon at all.

use std::path::Path;
use std::process::{Command, Output};

use fabriclb::dataplane::{Dataplane, pins::PinDir};
use fabriclb::testbed::bpffs::{Bpffs, pin_program_maps};
use lb_common::packet::craft::udp;
use lb_common::packet::parse::IPPROTO_UDP;

use crate::harness::Harness;
use crate::packets::{PEER_MAC, ipv4_to};
use crate::switch::{self, LB_MAC};

/// Pins the harness program's maps under `pins`.
fn pin(dp: &mut Dataplane, pins: &PinDir) {
    let info = dp.program().expect("program").info().expect("info");
    pin_program_maps(info.id(), pins).expect("pin the maps");
}

/// `fabriclb SUBCOMMAND --bpffs BPFFS --instance golden ARGS...`.
fn fabriclb(args: &[&str], bpffs: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fabriclb"))
        .arg(args[0])
        .arg("--bpffs")
        .arg(bpffs)
        .args(["--instance", "golden"])
        .args(&args[1..])
        .output()
        .expect("run fabriclb")
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "fabriclb failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("utf-8")
}

/// Three packets of one flow to `spines`, two of one flow to
/// `flowlet-sticky`, one with no route; returns the spines member's slot
/// and the frames' length.
fn traffic(h: &mut Harness) -> (usize, usize) {
    let spines = ipv4_to([10, 1, 0, 2], IPPROTO_UDP).frame(
        LB_MAC,
        PEER_MAC,
        &[],
        &udp(1000, 9000, &[0; 100]),
    );
    let mut slot = 0;
    for _ in 0..3 {
        let (_, out) = h.run(&spines);
        slot = h.slot_of("spines", &out);
    }
    let sticky = ipv4_to([10, 5, 0, 2], IPPROTO_UDP).frame(
        LB_MAC,
        PEER_MAC,
        &[],
        &udp(1000, 9000, &[0; 100]),
    );
    h.run(&sticky);
    h.run(&sticky);
    let nowhere = ipv4_to([10, 200, 0, 1], IPPROTO_UDP).frame(
        LB_MAC,
        PEER_MAC,
        &[],
        &udp(1000, 9000, &[0; 100]),
    );
    h.run(&nowhere);
    (slot, spines.len())
}

#[test]
fn status_reads_the_pinned_maps() {
    let bpffs = Bpffs::mount("golden-status").expect("bpffs");
    let mut h = Harness::new();
    let (slot, len) = traffic(&mut h);
    pin(&mut h.dp, &PinDir::new(bpffs.path(), "golden"));
    let config = bpffs.path().with_file_name(format!(
        "fabriclb-golden-status-{}.toml",
        std::process::id()
    ));
    std::fs::write(&config, switch::config()).expect("config");

    let text = stdout(&fabriclb(
        &["status", "--config", config.to_str().unwrap()],
        bpffs.path(),
    ));
    eprintln!("{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "verdicts: forwarded 5, not_ip 0, not_unicast 0, no_route 1, ttl_expired 0, \
         no_nexthop 0, unsupported 0, l4_truncated 0, l2_truncated 0, l3_malformed 0, local 0, other_host 0"
    );
    assert_eq!(lines[1], "flowlet table: 1 of 65536 entries");
    assert_eq!(lines[2], "ingress ports: lo (ifindex 1) 02:fa:b0:00:00:01");
    let at = |line: &str| {
        lines
            .iter()
            .position(|l| *l == line)
            .unwrap_or_else(|| panic!("no line {line:?}"))
    };
    let spines = at(
        "group spines (id 0): mode ecmp, gap 256us, spray self-contained, hash \
         src_ip,dst_ip,ip_protocol,l4_src_port,l4_dst_port,rdma_bth_dest_qp, seed 0x5eed1234, \
         generation 1, 4 members",
    );
    assert_eq!(
        lines[spines + 1],
        "  flowlets 0, new flowlets 0, moves 0, sprayed 0, pinned 0"
    );
    assert_eq!(
        lines[spines + 2],
        "  slot id   next hop                         usable quality         load buckets      packets          bytes    sprayed"
    );
    for s in 0..4 {
        let (packets, bytes) = if s == slot { (3, 3 * len) } else { (0, 0) };
        assert_eq!(
            lines[spines + 3 + s],
            format!(
                "  {s:<4} {s:<4} {:<32} yes       1024            0     128 {packets:>12} {bytes:>14}          0",
                format!("lo 02:00:00:00:0a:0{}", s + 1),
            ),
            "spines slot {s}"
        );
    }
    let sticky = at(
        "group flowlet-sticky (id 4): mode flowlet, gap 1000000us, spray self-contained, hash \
         src_ip,dst_ip,ip_protocol,l4_src_port,l4_dst_port,rdma_bth_dest_qp, seed 0x5eed1234, \
         generation 5, 4 members",
    );
    assert_eq!(
        lines[sticky + 1],
        "  flowlets 1, new flowlets 1, moves 0, sprayed 0, pinned 2"
    );
    let down = at(
        "group down (id 3): mode ecmp, gap 256us, spray self-contained, hash \
         src_ip,dst_ip,ip_protocol,l4_src_port,l4_dst_port,rdma_bth_dest_qp, seed 0x5eed1234, \
         generation 4, 1 members",
    );
    assert!(
        lines[down + 3].starts_with("  0    "),
        "{}",
        lines[down + 3]
    );
    assert!(
        lines[down + 3].contains(" lo 10.3.255.1 "),
        "{}",
        lines[down + 3]
    );
    assert!(lines[down + 3].contains(" no "), "{}", lines[down + 3]);

    let json: serde_json::Value = serde_json::from_str(&stdout(&fabriclb(
        &["status", "--json", "--config", config.to_str().unwrap()],
        bpffs.path(),
    )))
    .expect("JSON");
    assert_eq!(json["verdicts"][0]["reason"], "forwarded");
    assert_eq!(json["verdicts"][0]["packets"], 5);
    assert_eq!(json["flowlet_entries"], 1);
    assert_eq!(json["flowlet_capacity"], 65536);
    let spines = &json["groups"][0];
    assert_eq!(spines["name"], "spines");
    assert_eq!(spines["mode"], "ecmp");
    assert_eq!(spines["next_hops"][slot]["packets"], 3);
    assert_eq!(spines["next_hops"][slot]["bytes"], 3 * len);
    assert_eq!(
        spines["next_hops"][slot]["name"],
        format!("lo 02:00:00:00:0a:0{}", slot + 1)
    );
    assert_eq!(spines["next_hops"][slot]["buckets"], 128);
    let sticky = &json["groups"][4];
    assert_eq!(sticky["name"], "flowlet-sticky");
    assert_eq!(
        (sticky["flowlets"].clone(), sticky["pinned"].clone()),
        (1.into(), 2.into())
    );
    assert_eq!(json["notes"], serde_json::json!([]));

    // A config that is not what is loaded names nothing it does not match.
    let changed = switch::config().replacen(
        "name = \"spines\"\n",
        "name = \"spines\"\nmode = \"flowlet\"\n",
        1,
    );
    std::fs::write(&config, changed).expect("config");
    let text = stdout(&fabriclb(
        &["status", "--config", config.to_str().unwrap()],
        bpffs.path(),
    ));
    assert!(
        text.contains(
            "note: group \"spines\" of the config is not what the maps hold at id 0: \
             the config differs from what is loaded; shown by id\n"
        ),
        "{text}"
    );
    assert!(text.contains("\ngroup id 0: mode ecmp,"), "{text}");
    assert!(
        text.contains("\ngroup five-tuple (id 1): mode ecmp,"),
        "{text}"
    );
    let _ = std::fs::remove_file(&config);

    // Without a config, everything goes by id and next hops by what the
    // maps hold.
    let text = stdout(&fabriclb(&["status"], bpffs.path()));
    assert!(text.contains("\ngroup id 2: mode ecmp,"), "{text}");
    assert!(text.contains(" lo 02:00:00:00:0c:01 vlan 100 "), "{text}");
}

#[test]
fn status_and_explain_say_when_nothing_is_pinned() {
    let bpffs = Bpffs::mount("golden-unpinned").expect("bpffs");
    for args in [
        &["status"][..],
        &["explain", "udp", "10.0.0.1:1", "->", "10.1.0.2:2"],
    ] {
        let out = fabriclb(args, bpffs.path());
        assert!(!out.status.success());
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!(
                "fabriclb: no fabriclb instance is pinned at {}/fabriclb/golden (FL_ROUTES_V4: \
                 `BPF_OBJ_GET` failed: No such file or directory (os error 2)); is the daemon \
                 running with the same --bpffs and --instance?\n",
                bpffs.path().display()
            ),
            "{args:?}"
        );
    }
}

#[test]
fn explain_reads_the_pinned_maps() {
    let bpffs = Bpffs::mount("golden-explain").expect("bpffs");
    let mut h = Harness::new();
    let (slot, _) = traffic(&mut h);
    pin(&mut h.dp, &PinDir::new(bpffs.path(), "golden"));
    let config = bpffs.path().with_file_name(format!(
        "fabriclb-golden-explain-{}.toml",
        std::process::id()
    ));
    std::fs::write(&config, switch::config()).expect("config");
    let text = stdout(&fabriclb(
        &[
            "explain",
            "--config",
            config.to_str().unwrap(),
            "--ingress",
            "lo",
            "udp 10.0.0.1:1000 -> 10.1.0.2:9000",
        ],
        bpffs.path(),
    ));
    eprintln!("{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "verdict: forwarded (XDP_REDIRECT): routed, rewritten, sent to the next hop"
    );
    assert_eq!(
        lines[1],
        "packet: udp 10.0.0.1:1000 -> 10.1.0.2:9000, ttl 64, 58 bytes"
    );
    assert_eq!(lines[2], "route: 10.1.0.0/16 -> group spines (id 0)");
    assert!(
        lines[3].starts_with("group: spines (id 0): mode ecmp,"),
        "{}",
        lines[3]
    );
    assert_eq!(
        lines[4],
        "hash input: 0a000001 0a010002 11 03e8 2328 000000"
    );
    assert!(lines[5].starts_with("hash: 0x"), "{}", lines[5]);
    // The same flow as the packets run before it, so the same member.
    assert_eq!(
        lines[6],
        format!(
            "next hop: next hop {slot} (lo 02:00:00:00:0a:0{}): out lo (ifindex 1), \
             02:fa:b0:00:00:01 -> 02:00:00:00:0a:0{}, untagged, usable",
            slot + 1,
            slot + 1
        )
    );

    // The flow run twice to flowlet-sticky: its live state on CPU 0 or 1,
    // where the test ran it.
    let text = stdout(&fabriclb(
        &[
            "explain",
            "--config",
            config.to_str().unwrap(),
            "udp 10.0.0.1:1000 -> 10.5.0.2:9000",
        ],
        bpffs.path(),
    ));
    let _ = std::fs::remove_file(&config);
    eprintln!("{text}");
    let lines: Vec<&str> = text.lines().collect();
    let state = lines
        .iter()
        .find(|l| l.starts_with("  state: "))
        .expect("a state line");
    assert!(state.starts_with("  state: slot 0, last seen "), "{state}");
    assert!(
        state.ends_with(" ms ago (gap 1000.000 ms), own load 284 bytes, generation 5"),
        "{state}"
    );
    for line in [
        "note: the destination MAC was not checked against the ingress port's; give --ingress",
        "  step: inside its flowlet: stays on slot 0 (next hop 10 (lo 02:00:00:00:0e:01))",
        "    slot 0 next hop 10 (lo 02:00:00:00:0e:01): usable, load 284 bytes, quality 1024",
        "    slot 1 next hop 11 (lo 02:00:00:00:0e:02): usable, load 0 bytes, quality 1024",
        // Slot 1 would cost (0 + 284 + 4096) / 1024, not below 7/8 of
        // slot 0's (284 + 4096) / 1024: the flow stays.
        "  a new flowlet now would take slot 0 (next hop 10 (lo 02:00:00:00:0e:01))",
    ] {
        assert!(lines.contains(&line), "no line {line:?} in\n{text}");
    }
}

/// A classic pcap file (little-endian, microseconds, Ethernet) holding
/// `frames`, as `tcpdump -w` writes one.
fn pcap(frames: &[&[u8]]) -> Vec<u8> {
    let mut file: Vec<u8> = [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65535, 1]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
    for frame in frames {
        let len = frame.len() as u32;
        file.extend(
            [1_700_000_000u32, 0, len, len]
                .iter()
                .flat_map(|w| w.to_le_bytes()),
        );
        file.extend_from_slice(frame);
    }
    file
}

#[test]
fn explain_reads_each_frame_of_a_capture() {
    let bpffs = Bpffs::mount("golden-pcap").expect("bpffs");
    let mut h = Harness::new();
    pin(&mut h.dp, &PinDir::new(bpffs.path(), "golden"));
    let body = udp(1000, 9000, &[0; 100]);
    let tagged = ipv4_to([10, 2, 0, 2], IPPROTO_UDP).frame(LB_MAC, PEER_MAC, &[], &body);
    let nowhere = ipv4_to([10, 200, 0, 1], IPPROTO_UDP).frame(LB_MAC, PEER_MAC, &[], &body);
    let file = bpffs
        .path()
        .with_file_name(format!("fabriclb-golden-{}.pcap", std::process::id()));
    std::fs::write(&file, pcap(&[&tagged, &nowhere, &tagged[..20]])).expect("pcap");
    let text = stdout(&fabriclb(
        &[
            "explain",
            "--ingress",
            "lo",
            "--pcap",
            file.to_str().unwrap(),
        ],
        bpffs.path(),
    ));
    let _ = std::fs::remove_file(&file);
    eprintln!("{text}");
    let frames: Vec<&str> = text.split("\n\n").collect();
    assert_eq!(frames.len(), 3, "{text}");
    assert!(
        frames[0].starts_with("frame 1:\nverdict: forwarded (XDP_REDIRECT)"),
        "{text}"
    );
    assert!(
        frames[0].ends_with(
            "next hop: next hop 8: out lo (ifindex 1), 02:fa:b0:00:00:01 -> 02:00:00:00:0c:01, \
             vlan 100, usable"
        ),
        "{text}"
    );
    assert_eq!(
        frames[1],
        "frame 2:\nverdict: no_route (XDP_PASS): no configured prefix covers the destination\n\
         packet: udp 10.0.0.1:1000 -> 10.200.0.1:9000, ttl 64, 142 bytes\n\
         route: none"
    );
    assert_eq!(
        frames[2],
        "frame 3:\nverdict: l3_malformed (XDP_DROP): IP header cut short or inconsistent\n\
         packet: 20 bytes, the parser stopped\n"
    );
}
