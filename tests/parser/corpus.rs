//! Frames on which the parsers once disagreed, kept as literal bytes: each
//! must now agree, with the verdict written beside it.

use lb_common::{packet::parse::parse, verdict::Reason};

/// (what it is, the frame in hex, our verdict: `None` when parsed).
const CORPUS: &[(&str, &str, Option<Reason>)] = &[
    (
        "ipv6: six hop-by-hop headers, then a first fragment header: the \
     seventh extension header was read and made the packet a fragment",
        "020000000001020000000002 86dd 6000000000 4c 0000 \
     00000000000000000000000000000000 00000000000000000000000000000000 \
     0000000000000000 0000000000000000 0000000000000000 \
     0000000000000000 0000000000000000 2c00000000000000 \
     0600000100 00002a \
     0000000000000001000000005010ffff00000000",
        Some(Reason::Unsupported),
    ),
    // Found by the first run against the parser of issue 14, which forwarded
    // them all on ports read from headers that do not hold them.
    (
        "tcp data offset 0",
        "020000000001020000000002 0800 45000028 12340000 00060000 00000000 00000000 \
     00000000 00000001 00000000 0010ffff 00000000",
        Some(Reason::L4Truncated),
    ),
    (
        "tcp data offset 6 over 23 bytes",
        "020000000001020000000002 0800 4500002b 12340000 00060000 00000000 00000000 \
     00000000 00000001 00000000 6010ffff 00000000 010101",
        Some(Reason::L4Truncated),
    ),
    (
        "ipv6 tcp data offset 6 over 23 bytes",
        "020000000001020000000002 86dd 60000000 00170600 \
     00000000000000000000000000000000 00000000000000000000000000000000 \
     00000000 00000001 00000000 6010ffff 00000000 010101",
        Some(Reason::L4Truncated),
    ),
    (
        "udp length 0",
        "020000000001020000000002 0800 4500001c 12340000 00110000 00000000 00000000 \
     00000000 00000000",
        Some(Reason::L4Truncated),
    ),
    (
        "udp length 9 over 8 bytes",
        "020000000001020000000002 0800 4500001c 12340000 00110000 00000000 00000000 \
     00000000 00090000",
        Some(Reason::L4Truncated),
    ),
    (
        "rocev2 udp length 21 over 20 bytes",
        "020000000001020000000002 0800 45000028 12340000 00110000 00000000 00000000 \
     000012b7 00150000 00000000 00000000 00000000",
        Some(Reason::L4Truncated),
    ),
    (
        "rocev2 udp length 17: the bth past it",
        "020000000001020000000002 0800 45000028 12340000 00110000 00000000 00000000 \
     000012b7 00110000 00000000 00000000 00000000",
        Some(Reason::L4Truncated),
    ),
    (
        "ipv6 payload length 1, a fragment header read from the padding",
        "020000000001020000000002 86dd 60000000 00012c00 \
     00000000000000000000000000000000 00000000000000000000000000000000 \
     06000001 0000002a",
        Some(Reason::L3Malformed),
    ),
    (
        "ipv6 hop-by-hop past the payload, a fragment header in the padding",
        "020000000001020000000002 86dd 60000000 00100000 \
     00000000000000000000000000000000 00000000000000000000000000000000 \
     00000000 00000000 00000000 00000000 2c000000 00000000 06000001 0000002a",
        Some(Reason::L3Malformed),
    ),
];

fn bytes(hex: &str) -> Vec<u8> {
    let hex: String = hex.split_whitespace().collect();
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect()
}

#[test]
fn the_corpus_agrees() {
    for (what, hex, reason) in CORPUS {
        let frame = bytes(hex);
        assert_eq!(parse(&frame[..]).err(), *reason, "{what}");
        crate::compare(&frame).unwrap_or_else(|why| panic!("{what}: {why}"));
    }
    eprintln!("{} corpus frames agree", CORPUS.len());
}
