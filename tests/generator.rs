//! The generator's RoCEv2 frames as two decoders see them: the project's
//! own parser and scapy (installed by `cargo xtask setup`), which shares no
//! code with it and checks the IPv4 checksum and the ICRC independently.

use std::io::Write;
use std::net::Ipv4Addr;
use std::process::Command;

use fabriclb::traffic::{Exchange, Generator, Pattern, Sender};
use lb_common::packet::{parse::parse, roce};

fn frames() -> Vec<Vec<u8>> {
    let exchange = Exchange {
        pattern: Pattern::AllToAll,
        qps_per_connection: 2,
        message_bytes: 9000,
        mtu: 4096,
        messages: 3,
        source_port_per_qp: false,
        small_messages: 0,
    };
    let ranks = (1..=3).map(|i| Ipv4Addr::new(198, 19, 100 + i, 1));
    let workload = exchange.for_rank(ranks.collect(), 0);
    let sender = Sender {
        ip: Ipv4Addr::new(198, 18, 101, 1),
        mac: [2, 0, 0, 0, 1, 1],
        gateway_mac: [2, 0, 0, 0, 0, 0xfe],
    };
    Generator::new(workload, sender).frames()
}

/// Classic pcap, Ethernet link type.
fn write_pcap(path: &std::path::Path, frames: &[Vec<u8>]) {
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    for word in [0u32, 0, 65_535, 1] {
        out.extend_from_slice(&word.to_le_bytes());
    }
    for (i, frame) in frames.iter().enumerate() {
        let len = frame.len() as u32;
        for word in [i as u32, 0, len, len] {
            out.extend_from_slice(&word.to_le_bytes());
        }
        out.extend_from_slice(frame);
    }
    std::fs::File::create(path)
        .and_then(|mut f| f.write_all(&out))
        .expect("write pcap");
}

#[test]
fn scapy_and_our_parser_agree_on_every_frame() {
    let frames = frames();
    // 2 peers x 3 messages x 3 packets (4096 + 4096 + 808 bytes).
    assert_eq!(frames.len(), 18);
    let pcap = std::env::temp_dir().join(format!("fabriclb-gen-{}.pcap", std::process::id()));
    write_pcap(&pcap, &frames);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/decode_roce.py");
    let output = Command::new("python3")
        .arg(script)
        .arg(&pcap)
        .output()
        .expect("python3");
    let _ = std::fs::remove_file(&pcap);
    assert!(
        output.status.success(),
        "scapy failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let decoded: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(decoded.len(), frames.len());

    for (frame, scapy) in frames.iter().zip(&decoded) {
        let ours = parse(&frame[..]).expect("our parser");
        let bth = ours.bth.expect("BTH");
        let reth = if roce::has_reth(bth.opcode) {
            roce::RETH_LEN
        } else {
            0
        };
        let udp_len = frame.len() - 14 - 20;
        let payload = udp_len - 8 - 12 - roce::ICRC_LEN;
        let dst = Ipv4Addr::from(<[u8; 4]>::try_from(&ours.flow.dst[..4]).expect("v4"));
        let expected = format!(
            "{{\"src\": \"198.18.101.1\", \"dst\": \"{dst}\", \"ttl\": 64, \"ip_checksum_ok\": true, \
             \"ip_len\": {}, \"udp_sport\": {}, \"udp_dport\": 4791, \"udp_len\": {udp_len}, \
             \"opcode\": {}, \"dqpn\": {}, \"psn\": {}, \"pkey\": 65535, \"icrc_ok\": true, \
             \"payload_len\": {payload}}}",
            udp_len + 20,
            ours.flow.src_port,
            bth.opcode,
            bth.dest_qp,
            bth.psn,
        );
        assert_eq!(scapy, &expected);
        // The RETH sits only on FIRST and ONLY.
        let data = payload - reth;
        assert!(
            data == 4096 || data == 808,
            "data {data}, opcode {:#x}",
            bth.opcode
        );
    }
}
