//! The benchmark object's programs, which `cargo xtask bench` times: each
//! cut of the forwarding path stops right after the stage its name gives
//! and counts nothing, the baseline forwards all it parses to one port,
//! the empty one does nothing, the varying one makes a
//! new flow per run; every one hands the packet back as it came.

use aya::{
    maps::Array,
    programs::{TestRun, TestRunOptions},
};
use fabriclb::{
    config,
    dataplane::{Dataplane, tables},
};
use lb_common::{
    abi::bench::{
        ABLATIONS, BASELINE_IFINDEX, BENCH_RESTORE_LEN, BENCH_VARY, BenchVary, PROGRAM_BASELINE,
        PROGRAM_BENCH, PROGRAM_CLOCK, PROGRAM_EMPTY, PROGRAM_VARY,
    },
    limits::FLOWLET_TABLE_DEFAULT,
    packet::craft::{Ipv4, bth, ethernet, udp},
    packet::parse::{IPPROTO_UDP, ROCEV2_UDP_PORT},
    verdict::{Reason, XDP_DROP, XDP_PASS, XDP_REDIRECT},
};

use crate::harness::take_frames_to_lb_mac;
use crate::packets::{PEER_MAC, ipv4_to};
use crate::switch::{self, LB_MAC};

/// What the bench programs return for a packet they refuse to time.
const XDP_ABORTED: u32 = 0;

static BENCH_OBJECT: &[u8] = aya::include_bytes_aligned!(env!("FABRICLB_BPF_BENCH_OBJECT"));

/// The bench object programmed with the golden switch, and its group ids.
fn bench() -> (Dataplane, tables::Tables) {
    let config = config::parse(&switch::config(), "golden.toml".as_ref()).expect("config");
    let tables = tables::Tables::build(&config, None, |spec| {
        tables::static_nexthop(spec, 1, LB_MAC)
    })
    .expect("tables");
    let mut dp = Dataplane::load_object(BENCH_OBJECT, FLOWLET_TABLE_DEFAULT)
        .expect("load the bench object (needs root)");
    tables.write(&mut dp, None).expect("program maps");
    take_frames_to_lb_mac(&mut dp, [0; 6]);
    for name in [
        PROGRAM_BENCH,
        PROGRAM_BASELINE,
        PROGRAM_EMPTY,
        PROGRAM_CLOCK,
        PROGRAM_VARY,
    ] {
        dp.load_program(name).expect(name);
    }
    for (name, _) in ABLATIONS {
        dp.load_program(name).expect(name);
    }
    (dp, tables)
}

/// Runs `program` `repeat` times on `frame`; checks the frame came back
/// unchanged, returns the verdict.
fn run(dp: &mut Dataplane, program: &'static str, frame: &[u8], repeat: u32) -> u32 {
    let mut out = vec![0u8; frame.len()];
    let result = dp
        .named(program)
        .expect(program)
        .test_run(TestRunOptions {
            data_in: Some(frame),
            data_out: Some(&mut out),
            repeat,
            ..Default::default()
        })
        .expect("test run");
    assert_eq!(out, frame, "{program} changed the packet");
    result.return_value
}

/// Padded to what the restore wrapper saves.
fn frame(ip: Ipv4) -> Vec<u8> {
    ip.frame(
        LB_MAC,
        PEER_MAC,
        &[],
        &udp(1000, 2000, &[0xab; BENCH_RESTORE_LEN]),
    )
}

#[test]
fn bench_cuts_stop_after_their_stage_and_count_nothing() {
    let (mut dp, _) = bench();
    let forwarded = frame(ipv4_to([10, 1, 0, 2], IPPROTO_UDP));
    let arp = ethernet(LB_MAC, PEER_MAC, &[], 0x0806, &[0; BENCH_RESTORE_LEN]);
    let ttl_1 = frame(Ipv4 {
        ttl: 1,
        ..ipv4_to([10, 1, 0, 2], IPPROTO_UDP)
    });
    // The group `down` has no next hop: its buckets hold none.
    let down = frame(ipv4_to([10, 3, 0, 2], IPPROTO_UDP));
    // (frame, the first stage that refuses it: an index into ABLATIONS).
    let cases = [(&arp, 0), (&ttl_1, 1), (&down, 3), (&forwarded, 6)];
    let counted = dp.verdict_counts().expect("verdicts");
    for (frame, refused_at) in cases {
        for (stage, (program, name)) in ABLATIONS.iter().enumerate() {
            let expected = if stage < refused_at {
                XDP_REDIRECT
            } else {
                XDP_PASS
            };
            assert_eq!(
                run(&mut dp, program, frame, 3),
                expected,
                "{program} on a frame refused at stage {refused_at} ({name})"
            );
        }
        assert_eq!(run(&mut dp, PROGRAM_EMPTY, frame, 3), XDP_DROP);
        assert_eq!(run(&mut dp, PROGRAM_CLOCK, frame, 3), XDP_DROP);
    }
    // The baseline forwards whatever parses, to its one port.
    assert_eq!(run(&mut dp, PROGRAM_BASELINE, &forwarded, 3), XDP_REDIRECT);
    assert_eq!(run(&mut dp, PROGRAM_BASELINE, &down, 3), XDP_REDIRECT);
    assert_eq!(run(&mut dp, PROGRAM_BASELINE, &arp, 3), XDP_PASS);
    assert_eq!(dp.verdict_counts().expect("verdicts"), counted);

    // A port missing from the devmap: refused at `redirect`, after `select`.
    assert_eq!(
        BASELINE_IFINDEX, 1,
        "the baseline's port is the golden next hops'"
    );
    dp.remove_port(1).expect("remove port");
    assert_eq!(
        run(&mut dp, "fabriclb_until_select", &forwarded, 1),
        XDP_REDIRECT
    );
    assert_eq!(
        run(&mut dp, "fabriclb_until_redirect", &forwarded, 1),
        XDP_PASS
    );
    assert_eq!(run(&mut dp, PROGRAM_BASELINE, &forwarded, 1), XDP_PASS);
    dp.add_port(1).expect("add port");

    // The whole path counts: 5 forwarded.
    assert_eq!(run(&mut dp, PROGRAM_BENCH, &forwarded, 5), XDP_REDIRECT);
    let after = dp.verdict_counts().expect("verdicts");
    assert_eq!(
        after[Reason::Forwarded as usize],
        counted[Reason::Forwarded as usize] + 5
    );
    assert_eq!(
        after[Reason::NoNextHop as usize],
        counted[Reason::NoNextHop as usize]
    );
}

#[test]
fn bench_vary_makes_the_flows_it_is_told_to() {
    let (mut dp, tables) = bench();
    let group = tables
        .groups
        .iter()
        .find(|g| g.name == "flowlet-sticky")
        .expect("flowlet group")
        .id;
    // WRITE MIDDLE into the flowlet group (1 s gap: a flow seen stays).
    let middle = ipv4_to([10, 5, 0, 2], IPPROTO_UDP).frame(
        LB_MAC,
        PEER_MAC,
        &[],
        &udp(
            0xc000,
            ROCEV2_UDP_PORT,
            &bth(0x07, 77, 1, &[0xab; BENCH_RESTORE_LEN]),
        ),
    );
    let set = |dp: &mut Dataplane, vary: BenchVary| {
        let map = dp.other_map(BENCH_VARY).expect("vary map");
        Array::<_, BenchVary>::try_from(map)
            .expect("vary map type")
            .set(0, vary, 0)
            .expect("set vary");
    };
    let new_flowlets = |dp: &Dataplane| dp.group_stats(group).expect("stats").new_flowlets;
    let source = BenchVary {
        offset: 14 + 12,
        base: 0x0ac8_0000,
        stride: 1,
        modulus: 0,
        next: 0,
    };
    let before = new_flowlets(&dp);
    set(&mut dp, source);
    assert_eq!(run(&mut dp, PROGRAM_VARY, &middle, 50), XDP_REDIRECT);
    assert_eq!(new_flowlets(&dp) - before, 50, "a new flow every run");

    let before = new_flowlets(&dp);
    // Sources the first run did not use.
    set(
        &mut dp,
        BenchVary {
            base: 0x0ac9_0000,
            modulus: 5,
            next: 1000,
            ..source
        },
    );
    assert_eq!(run(&mut dp, PROGRAM_VARY, &middle, 50), XDP_REDIRECT);
    assert_eq!(
        new_flowlets(&dp) - before,
        5,
        "five flows, each seen ten times"
    );

    // Past what the wrapper restores: refused, the packet untouched.
    set(
        &mut dp,
        BenchVary {
            offset: BENCH_RESTORE_LEN as u32 - 3,
            ..source
        },
    );
    assert_eq!(run(&mut dp, PROGRAM_VARY, &middle, 1), XDP_ABORTED);
}
