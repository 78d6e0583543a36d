//! `cargo xtask bench`: the XDP program measured through BPF_PROG_TEST_RUN.
//!
//! - Program cost (`cost.rs`): ns per packet for each packet kind above an
//!   empty program, fabriclb against a baseline program in the benchmark's
//!   object that parses the same headers and redirects to a fixed port,
//!   measured interleaved in the same run and reported as a ratio
//!   (machines are noisy; absolute figures drift); and what each stage of
//!   the path adds. All run behind the same restore wrapper, so every
//!   repeat sees the original packet, and the verdict of what was timed is
//!   checked.
//! - Cost curves (`curves.rs`): the same against routes installed, flows
//!   in the flowlet table, next hops per group.
//! - Balance: max/mean load (MMR) over 16 next hops, per-flow ECMP on the
//!   five-tuple and with the BTH destination QP and 16 QPs per connection,
//!   every packet through the real program; next to the theory figures of
//!   `shared/reference.md`.
//! - Forwarding cost (`forwarding.rs`): what the leaf's hop adds per packet
//!   in the namespace testbed, by difference against a leaf that drops in
//!   XDP; fabriclb from the live-frames generator (millions of packets per
//!   second), the kernel's multipath route from the AF_PACKET TX ring, both
//!   under the TX ring too; as a ratio.
//! - Adaptive routing: the testbed scenarios `slow-spine` and
//!   `slow-spine-lossless` through every balancing mode (`adaptive.rs`).
//! - Telemetry cost (`telemetry.rs`): CPU per leaf and per spine and
//!   reads per spine, at 2, 4 and 8 leaves, for the `remote` and
//!   `counters-db` sources.
//!
//! Writes the tables to `target/bench/dataplane.md`, the figures to
//! `results.json`, the charts to `program-cost.svg`, `cost-curves.svg`,
//! `forwarding.svg` and `adaptive.svg` there. Needs root.
//! `FABRICLB_BENCH_QUICK=1` times fewer and shorter runs and leaves out the
//! adaptive section, to check the bench works rather than to report.

#[path = "dataplane/adaptive.rs"]
mod adaptive;
#[path = "dataplane/cost.rs"]
mod cost;
#[path = "dataplane/curves.rs"]
mod curves;
#[path = "dataplane/forwarding.rs"]
mod forwarding;
#[path = "dataplane/telemetry.rs"]
mod telemetry;

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use aya::programs::{TestRun, TestRunOptions, Xdp};
use fabriclb::{
    config,
    dataplane::{Dataplane, tables},
    testbed,
};
use lb_common::{
    abi::bench::{BASELINE_IFINDEX, BENCH_RESTORE_LEN},
    limits::FLOWLET_TABLE_DEFAULT,
    packet::craft::{Ipv4, Ipv6, bth, tcp, udp},
    packet::parse::{IPPROTO_TCP, IPPROTO_UDP, ROCEV2_UDP_PORT},
    verdict::XDP_REDIRECT,
};

/// lb-ebpf's benchmark object: the forwarding program with its maps, as
/// production has them, and the entry points timed against each other.
static BENCH_OBJECT: &[u8] = aya::include_bytes_aligned!(env!("FABRICLB_BPF_BENCH_OBJECT"));

const LB_MAC: [u8; 6] = [0x02, 0xfa, 0xb0, 0, 0, 0x01];

/// What the daemon writes for a port it attaches to, for the port test
/// runs come in on (the loopback, ifindex 1): frames to [`LB_MAC`] are for
/// the box.
fn take_frames_to_lb_mac(dp: &mut Dataplane) -> Result<()> {
    dp.set_port_macs(lb_common::abi::PortMacs {
        ifindex: 1,
        own: LB_MAC,
        dlb: [0; 6],
    })?;
    Ok(())
}
const PEER_MAC: [u8; 6] = [0x02, 0, 0, 0xaa, 0, 0x01];
const BALANCE_TRIALS: usize = 20;
const SPINES: usize = 16;

/// How long the timed sections run.
pub struct Budget {
    /// BPF_PROG_TEST_RUN repeats per timed run.
    pub repeat: u32,
    /// Interleaved runs per figure.
    pub runs: usize,
    /// Whether the adaptive section runs (and the forwarding section's runs
    /// are long).
    pub testbed: bool,
}

impl Budget {
    fn from_env() -> Self {
        if std::env::var_os("FABRICLB_BENCH_QUICK").is_some_and(|v| v != "0") {
            Self {
                repeat: 100_000,
                runs: 3,
                testbed: false,
            }
        } else {
            Self {
                repeat: 1_000_000,
                runs: 7,
                testbed: true,
            }
        }
    }
}

/// Appends group `name` of `next_hops` next hops on `lo` (MACs
/// `02:00:00:00:{base}:{i}`) with its `keys` and `prefixes` routed to it.
fn group_toml(
    text: &mut String,
    name: &str,
    keys: &str,
    base: u8,
    next_hops: usize,
    prefixes: &[&str],
) {
    let _ = write!(
        text,
        "\n[[group]]\nname = \"{name}\"\n{keys}\nnext_hops = [\n"
    );
    for i in 0..next_hops {
        let _ = writeln!(
            text,
            "  {{ interface = \"lo\", mac = \"02:00:00:00:{base:02x}:{i:02x}\" }},"
        );
    }
    text.push_str("]\n");
    for prefix in prefixes {
        let _ = write!(
            text,
            "\n[[route]]\nprefix = \"{prefix}\"\ngroup = \"{name}\"\n"
        );
    }
}

fn bench_config() -> String {
    let mut text = String::from("[switch]\nhash_seed = 0x5eed\ninterfaces = [\"lo\"]\n");
    let groups: [(&str, &str, u8, &[&str]); 4] = [
        (
            "qp",
            "hash_fields = [\"src_ip\", \"dst_ip\", \"ip_protocol\", \"l4_src_port\", \"l4_dst_port\", \"rdma_bth_dest_qp\"]",
            0x10,
            &["10.1.0.0/16", "2001:db8::/32"],
        ),
        (
            "five-tuple",
            "hash_fields = [\"src_ip\", \"dst_ip\", \"ip_protocol\", \"l4_src_port\", \"l4_dst_port\"]",
            0x20,
            &["10.4.0.0/16"],
        ),
        ("flowlet", "mode = \"flowlet\"", 0x30, &["10.5.0.0/16"]),
        (
            "per-packet",
            "mode = \"per-packet\"",
            0x40,
            &["10.6.0.0/16"],
        ),
    ];
    for (name, keys, base, prefixes) in groups {
        group_toml(&mut text, name, keys, base, SPINES, prefixes);
    }
    text
}

fn main() -> Result<()> {
    // One watcher removes every testbed of the run on Ctrl-C: the adaptive
    // section's are named under this one, and namespaces are matched by
    // prefix. (Two watchers would race for the signal.)
    let bed_name = format!("flb{}", std::process::id() % 100_000);
    testbed::tear_down_on_signal(&bed_name)?;
    let config = config::parse(&bench_config(), "bench.toml".as_ref())?;
    let tables = tables::Tables::build(&config, None, |spec| {
        tables::static_nexthop(spec, 1, LB_MAC)
    })?;
    let mut dp = Dataplane::load_object(BENCH_OBJECT, FLOWLET_TABLE_DEFAULT)
        .context("loading the XDP program (needs root)")?;
    tables.write(&mut dp, None)?;
    dp.add_port(BASELINE_IFINDEX)?;
    take_frames_to_lb_mac(&mut dp)?;

    let budget = Budget::from_env();
    let mut report = String::from("# fabriclb data-plane benchmark\n\n");
    if !budget.testbed {
        report.push_str("**Quick run** (`FABRICLB_BENCH_QUICK`): short runs, no adaptive section; not figures to report.\n\n");
    }
    let costs = cost::section(&mut dp, &budget, &mut report)?;
    let curves = curves::section(&budget, &mut report)?;
    balance(&mut dp, &tables, &mut report)?;
    drop(dp);
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    std::fs::create_dir_all(&dir)?;
    let forwarding = forwarding::section(&bed_name, &budget, &mut report)?;
    let results = serde_json::json!({ "cost": costs, "curves": curves, "forwarding": forwarding });
    std::fs::write(
        dir.join("results.json"),
        serde_json::to_string_pretty(&results)?,
    )?;
    std::fs::write(dir.join("program-cost.svg"), chart(&costs))?;
    std::fs::write(dir.join("cost-curves.svg"), curves::chart(&curves))?;
    std::fs::write(dir.join("forwarding.svg"), forwarding::chart(&forwarding))?;
    if budget.testbed {
        let scenarios = adaptive::section(&bed_name, &mut report)?;
        std::fs::write(dir.join("adaptive.svg"), adaptive::chart(&scenarios))?;
        telemetry::section(&bed_name, &mut report)?;
    }
    print!("{report}");
    std::fs::write(dir.join("dataplane.md"), &report)?;
    println!(
        "\nwritten to {0}/: dataplane.md, results.json, program-cost.svg, cost-curves.svg, forwarding.svg{1}",
        dir.display(),
        if budget.testbed { ", adaptive.svg" } else { "" }
    );
    Ok(())
}

/// Pads a payload so the frame is at least what the restore wrapper saves.
fn pad() -> Vec<u8> {
    vec![0xab; BENCH_RESTORE_LEN]
}

/// Each timed packet: what it is, the mode of the group its route leads
/// to, the frame.
fn packet_kinds() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let v4 = |ip: Ipv4, l4: Vec<u8>| ip.frame(LB_MAC, PEER_MAC, &[], &l4);
    let v6 = |l4: Vec<u8>, proto| Ipv6::new(proto).frame(LB_MAC, PEER_MAC, &[], &l4);
    vec![
        (
            "IPv4 UDP",
            "ECMP",
            v4(Ipv4::new(IPPROTO_UDP), udp(1000, 2000, &pad())),
        ),
        (
            "IPv4 TCP",
            "ECMP",
            v4(Ipv4::new(IPPROTO_TCP), [tcp(1000, 443), pad()].concat()),
        ),
        (
            "IPv4 options UDP",
            "ECMP",
            v4(
                Ipv4 {
                    options: vec![1; 8],
                    ..Ipv4::new(IPPROTO_UDP)
                },
                udp(1, 2, &pad()),
            ),
        ),
        (
            "IPv4 RoCEv2 WRITE ONLY",
            "ECMP",
            v4(
                Ipv4::new(IPPROTO_UDP),
                udp(0xc000, ROCEV2_UDP_PORT, &bth(0x0a, 77, 1, &pad())),
            ),
        ),
        (
            "IPv4 RoCEv2 WRITE MIDDLE",
            "flowlet",
            v4(
                Ipv4 {
                    dst: [10, 5, 0, 2],
                    ..Ipv4::new(IPPROTO_UDP)
                },
                udp(0xc000, ROCEV2_UDP_PORT, &bth(0x07, 77, 1, &pad())),
            ),
        ),
        (
            "IPv4 RoCEv2 WRITE ONLY",
            "per-packet (sprayed)",
            v4(
                Ipv4 {
                    dst: [10, 6, 0, 2],
                    ..Ipv4::new(IPPROTO_UDP)
                },
                udp(0xc000, ROCEV2_UDP_PORT, &bth(0x0a, 77, 1, &pad())),
            ),
        ),
        (
            "IPv4 RoCEv2 WRITE MIDDLE",
            "per-packet (pinned)",
            v4(
                Ipv4 {
                    dst: [10, 6, 0, 2],
                    ..Ipv4::new(IPPROTO_UDP)
                },
                udp(0xc000, ROCEV2_UDP_PORT, &bth(0x07, 77, 1, &pad())),
            ),
        ),
        ("IPv6 UDP", "ECMP", v6(udp(1000, 2000, &pad()), IPPROTO_UDP)),
        (
            "IPv6 RoCEv2 WRITE ONLY",
            "ECMP",
            v6(
                udp(0xc000, ROCEV2_UDP_PORT, &bth(0x0a, 77, 1, &pad())),
                IPPROTO_UDP,
            ),
        ),
    ]
}

/// Whether packets of `mode`, a [`packet_kinds`] mode, keep to a flowlet
/// and so read the flowlet clock.
fn keeps_to_a_flowlet(mode: &str) -> bool {
    matches!(mode, "flowlet" | "per-packet (pinned)")
}

/// ns per packet of a run of `repeat`, after checking its verdict and
/// that the packet came back as it went in.
fn time(program: &Xdp, frame: &[u8], repeat: u32, verdict: u32) -> Result<f64> {
    let mut out = vec![0u8; frame.len()];
    let result = program.test_run(TestRunOptions {
        data_in: Some(frame),
        data_out: Some(&mut out),
        repeat,
        ..Default::default()
    })?;
    ensure!(
        result.return_value == verdict,
        "timed a verdict of {}, not {verdict}",
        result.return_value
    );
    ensure!(
        out == frame,
        "the restore wrapper did not restore the packet"
    );
    Ok(duration_ns(result.duration))
}

fn duration_ns(d: Duration) -> f64 {
    d.as_nanos() as f64
}

fn spread(samples: &mut [f64]) -> (f64, f64, f64) {
    samples.sort_by(f64::total_cmp);
    (
        samples[0],
        samples[samples.len() / 2],
        samples[samples.len() - 1],
    )
}

/// xorshift64*: reproducible flow sets without another dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// How a connection's QPs are numbered.
#[derive(Clone, Copy)]
enum QpNumbers {
    /// `base..base + n`, as a NIC hands them out to one job.
    Consecutive,
    /// Independent random 24-bit numbers: the theory's assumption.
    Random,
}

/// MMR of one trial: `flows` RoCEv2 connections (random hosts in 10.x/16,
/// random source port), each split into `qps` equal QPs.
fn trial(
    dp: &mut Dataplane,
    rng: &mut Rng,
    dst_net: u8,
    flows: usize,
    (qps, numbers): (u32, QpNumbers),
    macs: &[[u8; 6]],
) -> Result<f64> {
    let mut load = vec![0u64; macs.len()];
    for _ in 0..flows {
        let r = rng.next();
        // One RoCEv2 connection: fixed hosts and source port.
        let ip = Ipv4 {
            src: [10, 1, (r >> 8) as u8, r as u8],
            dst: [10, dst_net, (r >> 16) as u8, (r >> 24) as u8],
            ..Ipv4::new(IPPROTO_UDP)
        };
        let sport = (r >> 32) as u16 | 0xc000;
        let qp_base = (r >> 40) as u32 & 0x00ff_fff0;
        for q in 0..qps {
            let qp = match numbers {
                QpNumbers::Consecutive => qp_base + q,
                QpNumbers::Random => rng.next() as u32 & 0x00ff_ffff,
            };
            let frame = ip.frame(
                LB_MAC,
                PEER_MAC,
                &[],
                &udp(sport, ROCEV2_UDP_PORT, &bth(0x0a, qp, 0, &[0; 16])),
            );
            let mut out = vec![0u8; frame.len()];
            let result = dp.program()?.test_run(TestRunOptions {
                data_in: Some(&frame),
                data_out: Some(&mut out),
                ..Default::default()
            })?;
            ensure!(
                result.return_value == XDP_REDIRECT,
                "balance packet not forwarded"
            );
            let hop = macs
                .iter()
                .position(|m| *m == out[..6])
                .context("unknown next hop")?;
            load[hop] += 1;
        }
    }
    let mean = load.iter().sum::<u64>() as f64 / load.len() as f64;
    Ok(*load.iter().max().unwrap_or(&0) as f64 / mean)
}

fn balance(dp: &mut Dataplane, tables: &tables::Tables, report: &mut String) -> Result<()> {
    let macs = |group: usize| -> Vec<[u8; 6]> {
        tables.groups[group]
            .members
            .iter()
            .map(|&id| tables.nexthops[id as usize].dst_mac)
            .collect()
    };
    let (qp_macs, five_macs) = (macs(0), macs(1));
    let _ = writeln!(
        report,
        "## Balance over {SPINES} next hops (MMR = busiest / mean, {BALANCE_TRIALS} trials, min/median/max)\n"
    );
    report.push_str(
        "| flows | ECMP five-tuple | theory (static) | + dest QP, 16 random QPs/conn | + dest QP, 16 consecutive QPs/conn | theory (qp16) |\n|---|---|---|---|---|---|\n",
    );
    // shared/reference.md, Monte Carlo over 10,000 trials.
    for (flows, static_ref, qp16_ref) in [
        (1000, 1.230, 1.056),
        (128, 1.669, 1.159),
        (16, 3.078, 1.462),
    ] {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ flows as u64);
        let (mut five, mut random, mut consecutive) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..BALANCE_TRIALS {
            five.push(trial(
                dp,
                &mut rng,
                4,
                flows,
                (1, QpNumbers::Consecutive),
                &five_macs,
            )?);
            random.push(trial(
                dp,
                &mut rng,
                1,
                flows,
                (16, QpNumbers::Random),
                &qp_macs,
            )?);
            consecutive.push(trial(
                dp,
                &mut rng,
                1,
                flows,
                (16, QpNumbers::Consecutive),
                &qp_macs,
            )?);
        }
        let fmt = |s: (f64, f64, f64)| format!("{:.3} / {:.3} / {:.3}", s.0, s.1, s.2);
        let _ = writeln!(
            report,
            "| {flows} | {} | {static_ref:.3} | {} | {} | {qp16_ref:.3} |",
            fmt(spread(&mut five)),
            fmt(spread(&mut random)),
            fmt(spread(&mut consecutive)),
        );
    }
    Ok(())
}

/// Bars of median ns/packet above the empty program, baseline against
/// fabriclb, per packet kind.
fn chart(costs: &[cost::CostRow]) -> String {
    let max = costs
        .iter()
        .map(|c| c.ns.max(c.baseline_ns))
        .fold(1.0, f64::max);
    let rows: Vec<_> = costs
        .iter()
        .map(|c| {
            (
                format!("{}, {}", c.kind, c.mode),
                [
                    Bar {
                        fraction: c.baseline_ns.max(0.0) / max,
                        fill: "#9aa5b1",
                        text: format!("{:.0} baseline", c.baseline_ns),
                    },
                    Bar {
                        fraction: c.ns.max(0.0) / max,
                        fill: "#2f6fbb",
                        text: format!("{:.0} fabriclb ({:.2}x)", c.ns, c.ratio),
                    },
                ],
            )
        })
        .collect();
    paired_bars(
        "Program cost above the empty program, ns/packet (BPF_PROG_TEST_RUN, median)",
        &rows,
    )
}

/// One bar of a [`paired_bars`] row.
struct Bar {
    /// Length as a share of the room for bars (the longest is 1).
    fraction: f64,
    fill: &'static str,
    /// What follows the bar.
    text: String,
}

/// A hand-written SVG: `title`, then per row its label and two bars.
fn paired_bars(title: &str, rows: &[(String, [Bar; 2])]) -> String {
    let (width, row, left) = (760.0, 44.0, 190.0);
    let room = width - left - 80.0;
    let height = 40.0 + row * rows.len() as f64 + 30.0;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <text x=\"10\" y=\"20\" font-size=\"14\">{title}</text>\n"
    );
    for (i, (label, bars)) in rows.iter().enumerate() {
        let y = 40.0 + row * i as f64;
        let _ = writeln!(svg, "<text x=\"10\" y=\"{}\">{label}</text>", y + 20.0);
        for (bar, top) in bars.iter().zip([y, y + 18.0]) {
            let length = bar.fraction * room;
            let _ = writeln!(
                svg,
                "<rect x=\"{left}\" y=\"{top}\" width=\"{length:.1}\" height=\"16\" fill=\"{}\"/>\
                 <text x=\"{:.1}\" y=\"{}\">{}</text>",
                bar.fill,
                left + length + 4.0,
                top + 12.0,
                bar.text,
            );
        }
    }
    svg.push_str("</svg>\n");
    svg
}
