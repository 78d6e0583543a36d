//! The data plane's parser (`lb_common::packet::parse`) against a
//! reference built on etherparse (`reference.rs`, which says where the two
//! may legitimately differ and what the data plane does there), on
//! generated frames (`frames.rs`) and on every prefix of each: the same
//! verdict reason, and for a frame both parse, the same fields (offsets,
//! tags, TTL, fragment, addresses, protocol, ports, BTH). A frame both
//! forward as TCP or UDP also goes through etherparse's whole-packet
//! slicer, which must find the same addresses and ports.
//!
//! `cargo xtask test` runs a fixed budget from a fixed seed;
//! `PARSER_CAMPAIGN_SECONDS=900 cargo test -p lb-userspace --test parser --
//! --ignored campaign` runs random seeds for that long and reports every
//! disagreement it finds. What it found is kept in `corpus.rs`.

mod corpus;
mod frames;
mod reference;

use std::fmt::Write;
use std::time::{Duration, Instant};

use etherparse::{NetSlice, SlicedPacket, TransportSlice, err};
use lb_common::packet::parse::{IPPROTO_TCP, IPPROTO_UDP, Parsed, parse};
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

/// Generated frames per `cargo xtask test` run; each is compared at every
/// length from 0 to its own.
const CASES: u32 = 20_000;
const SEED: [u8; 32] = *b"fabriclb parser differential 015";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Compares the parsers on `frame`; the error says how they differ.
pub fn compare(frame: &[u8]) -> Result<(), String> {
    let ours = parse(frame);
    let theirs = reference::reference(frame);
    if ours != theirs {
        return Err(format!(
            "frame {}:\n  ours      {ours:?}\n  reference {theirs:?}",
            hex(frame)
        ));
    }
    match ours {
        Ok(parsed) => whole_packet_agrees(frame, &parsed)
            .map_err(|why| format!("frame {}: {why}", hex(frame))),
        Err(_) => Ok(()),
    }
}

/// etherparse's own slicer on a frame we forward as TCP or UDP. Its one
/// rule that differs from ours there: a hop-by-hop header after the first
/// is refused.
fn whole_packet_agrees(frame: &[u8], ours: &Parsed) -> Result<(), String> {
    if ours.fragment || ![IPPROTO_TCP, IPPROTO_UDP].contains(&ours.flow.protocol) {
        return Ok(());
    }
    let sliced = match SlicedPacket::from_ethernet(frame) {
        Err(err::packet::SliceError::Ipv6Exts(err::ipv6_exts::HeaderError::HopByHopNotAtStart)) => {
            return Ok(());
        }
        Err(e) => return Err(format!("etherparse's slicer refuses it: {e}")),
        Ok(sliced) => sliced,
    };
    let (src, dst) = match &sliced.net {
        Some(NetSlice::Ipv4(ip)) => {
            let mut src = [0; 16];
            let mut dst = [0; 16];
            src[..4].copy_from_slice(&ip.header().source());
            dst[..4].copy_from_slice(&ip.header().destination());
            (src, dst)
        }
        Some(NetSlice::Ipv6(ip)) => (ip.header().source(), ip.header().destination()),
        other => return Err(format!("etherparse's slicer finds {other:?}")),
    };
    let ports = match &sliced.transport {
        Some(TransportSlice::Tcp(t)) => (t.source_port(), t.destination_port()),
        Some(TransportSlice::Udp(u)) => (u.source_port(), u.destination_port()),
        other => return Err(format!("etherparse's slicer finds transport {other:?}")),
    };
    let flow = &ours.flow;
    if (src, dst, ports) != (flow.src, flow.dst, (flow.src_port, flow.dst_port)) {
        return Err(format!(
            "etherparse's slicer reads {src:?} {dst:?} {ports:?}, ours {flow:?}"
        ));
    }
    Ok(())
}

/// [`compare`] on `frame` cut at every length; returns how many frames.
fn compare_every_prefix(frame: &[u8]) -> Result<u64, String> {
    for len in 0..=frame.len() {
        compare(&frame[..len])?;
    }
    Ok(frame.len() as u64 + 1)
}

fn config(cases: u32) -> Config {
    Config {
        cases,
        // Findings go to corpus.rs by hand, as literal frames.
        failure_persistence: None,
        ..Config::default()
    }
}

/// Runs `runner` over generated frames; the shrunk disagreement on failure.
fn run(runner: &mut TestRunner) -> Result<u64, String> {
    let frames = std::cell::Cell::new(0u64);
    let result = runner.run(&frames::frame(), |frame| {
        let compared = compare_every_prefix(&frame).map_err(TestCaseError::fail)?;
        frames.set(frames.get() + compared);
        Ok(())
    });
    match result {
        Ok(()) => Ok(frames.get()),
        Err(TestError::Fail(why, _)) => Err(why.to_string()),
        Err(e) => Err(e.to_string()),
    }
}

#[test]
fn the_parser_agrees_with_etherparse_on_generated_frames() {
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &SEED);
    let mut runner = TestRunner::new_with_rng(config(CASES), rng);
    let frames = run(&mut runner).unwrap_or_else(|why| panic!("parsers disagree: {why}"));
    eprintln!("{CASES} generated frames, {frames} frames and prefixes compared");
}

/// Random seeds for `PARSER_CAMPAIGN_SECONDS` (default 900); every
/// disagreement is reported (shrunk), and the run goes on with a new seed.
#[test]
#[ignore = "a long campaign; run by hand"]
fn campaign() {
    let seconds = std::env::var("PARSER_CAMPAIGN_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(900);
    let start = Instant::now();
    let (mut cases, mut frames) = (0u64, 0u64);
    let mut findings = Vec::new();
    while start.elapsed() < Duration::from_secs(seconds) {
        const BATCH: u32 = 5000;
        match run(&mut TestRunner::new(config(BATCH))) {
            Ok(compared) => frames += compared,
            Err(why) => {
                eprintln!("disagreement: {why}");
                findings.push(why);
            }
        }
        cases += u64::from(BATCH);
        eprintln!(
            "campaign: {cases} cases, {frames} frames and prefixes compared, {} findings, {:?}",
            findings.len(),
            start.elapsed()
        );
    }
    assert!(
        findings.is_empty(),
        "{} disagreements: {findings:#?}",
        findings.len()
    );
}
