//! Forwarding cost of the leaf's hop, by difference: the live-frames
//! generator on h1 (BPF_PROG_TEST_RUN, millions of packets per second from
//! one core) into the leaf, which (a) drops in XDP, (b) forwards with
//! fabriclb or (c) forwards with the kernel's multipath route, every
//! spine's port dropping in XDP what reaches it (`testbed::run_hop`). A
//! veth runs what it receives on the sending CPU, so each leg's time per
//! packet is the generator's plus the hop's, and the hop costs
//! 1/rate(b or c) - 1/rate(a), all on one core. Legs interleaved, medians;
//! every run's counts checked: fabriclb forwarded every frame that reached it, and all
//! sent frames arrived where the leg ends (a run where some did not runs
//! again, at most [`RETRIES`] times, and the report counts it).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result, ensure};
use fabriclb::config::Mode;
use fabriclb::testbed::{self, Hop, HopRun, Shape, Testbed};

use super::{Bar, Budget, paired_bars, spread};

/// RDMA payload per packet: small, so per-packet work rather than copying
/// decides the rate.
const PAYLOAD: u32 = 256;
const QPS: u32 = 16;

/// `results.json`'s `forwarding`. The top-level `fabriclb_*` figures are
/// the ECMP hop's; `modes` has each mode's.
#[derive(serde::Serialize)]
pub struct Forwarding {
    pub method: &'static str,
    /// ns per packet fabriclb's hop adds, in an ECMP group; `None` (null)
    /// where a hop's figure is lost in the floor's noise (see [`section`]).
    pub fabriclb_ns: Option<f64>,
    /// ns per packet the kernel's hop adds.
    pub kernel_ns: Option<f64>,
    /// `fabriclb_ns / kernel_ns`.
    pub ratio: Option<f64>,
    /// What the generator offers alone, Mpps, on one core.
    pub mpps: f64,
    /// Packets per second one core forwards at the hop's cost alone
    /// (1e3 / ns), Mpps.
    pub fabriclb_mpps_per_core: Option<f64>,
    pub kernel_mpps_per_core: Option<f64>,
    /// Generator and hop together on one core, Mpps.
    pub fabriclb_end_to_end_mpps: f64,
    pub kernel_end_to_end_mpps: f64,
    /// fabriclb's hop in each mode.
    pub modes: Vec<ModeHop>,
    pub frame_bytes: usize,
    pub packets_per_run: u32,
    pub runs: usize,
    /// Runs run again because frames went missing past the hop.
    pub retried_runs: usize,
}

/// fabriclb's hop with the spine group in one mode.
#[derive(serde::Serialize)]
pub struct ModeHop {
    pub mode: &'static str,
    pub ns: Option<f64>,
    pub mpps_per_core: Option<f64>,
    pub end_to_end_mpps: f64,
    /// `ns / kernel_ns`.
    pub ratio: Option<f64>,
}

const METHOD: &str = "live-frames generator (BPF_PROG_TEST_RUN) into the namespace leaf, spines dropping in XDP; the hop's ns/packet by difference against the leaf dropping in XDP; medians of interleaved runs, one core";

/// The legs in run order: the floor first, the kernel last.
const LEGS: [(&str, Hop); 5] = [
    ("leaf drops in XDP (the generator alone)", Hop::Drop),
    ("fabriclb on the leaf, ECMP", Hop::Fabriclb(Mode::Ecmp)),
    (
        "fabriclb on the leaf, flowlet",
        Hop::Fabriclb(Mode::Flowlet),
    ),
    (
        "fabriclb on the leaf, per-packet (sprayed)",
        Hop::Fabriclb(Mode::PerPacket),
    ),
    ("kernel multipath on the leaf", Hop::Kernel),
];
const KERNEL: usize = LEGS.len() - 1;

/// Runs the legs on testbed `name`, appends the section to `report`.
pub fn section(name: &str, budget: &Budget, report: &mut String) -> Result<Forwarding> {
    let bed = Testbed::up(
        name,
        Shape {
            hosts: 2,
            spines: 4,
            ..Shape::default()
        },
    )?;
    let workdir = std::env::temp_dir().join(format!("{name}-work"));
    std::fs::create_dir_all(&workdir)?;
    let result = measure(&bed, &workdir, budget);
    let _ = std::fs::remove_dir_all(&workdir);
    let (mut pps, frame_bytes, retried) = result?;
    drop(bed);

    let medians: Vec<f64> = pps.iter_mut().map(|p| spread(p).1).collect();
    let ns = |i: usize| 1e9 / medians[i];
    // What leg `i`'s hop adds to the generator alone: a difference of two
    // medians, which says nothing (and would give an infinite or negative
    // Mpps) unless it stands above the floor's own spread.
    let (floor_lo, _, floor_hi) = spread(&mut pps[0]);
    let noise_ns = (1e9 / floor_lo - 1e9 / floor_hi) / 2.0;
    let hop_ns = |i: usize| Some(ns(i) - ns(0)).filter(|&d| d > noise_ns.max(0.0));
    let kernel_ns = hop_ns(KERNEL);
    let per_core = |ns: Option<f64>| ns.map(|ns| 1e3 / ns);
    let ratio = |ns: Option<f64>| Some(ns? / kernel_ns?);
    let modes: Vec<ModeHop> = LEGS
        .iter()
        .enumerate()
        .filter_map(|(i, (_, hop))| match hop {
            Hop::Fabriclb(mode) => Some(ModeHop {
                mode: mode.name(),
                ns: hop_ns(i),
                mpps_per_core: per_core(hop_ns(i)),
                end_to_end_mpps: medians[i] / 1e6,
                ratio: ratio(hop_ns(i)),
            }),
            Hop::Drop | Hop::Kernel => None,
        })
        .collect();
    let ecmp = &modes[0];
    let forwarding = Forwarding {
        method: METHOD,
        fabriclb_ns: ecmp.ns,
        kernel_ns,
        ratio: ecmp.ratio,
        mpps: medians[0] / 1e6,
        fabriclb_mpps_per_core: ecmp.mpps_per_core,
        kernel_mpps_per_core: per_core(kernel_ns),
        fabriclb_end_to_end_mpps: ecmp.end_to_end_mpps,
        kernel_end_to_end_mpps: medians[KERNEL] / 1e6,
        modes,
        frame_bytes,
        packets_per_run: packets(budget),
        runs: budget.runs,
        retried_runs: retried,
    };

    let _ = writeln!(
        report,
        "\n## Forwarding cost of the leaf's hop (live frames from 1 sender, 4 spines dropping in XDP, {QPS} QPs, {} RoCEv2 WRITE ONLY frames of {frame_bytes} B per run, {} interleaved runs)\n",
        packets(budget),
        budget.runs
    );
    report.push_str(
        "| leaf | Mpps min / median / max | ns per packet, end to end (median) | the hop's ns per packet |\n|---|---|---|---|\n",
    );
    for (i, ((label, hop), runs)) in LEGS.iter().zip(&mut pps).enumerate() {
        let (lo, mid, hi) = spread(runs);
        let hop_cell = match hop {
            Hop::Drop => "(floor)".to_owned(),
            Hop::Fabriclb(_) | Hop::Kernel => figure(hop_ns(i), 0),
        };
        let _ = writeln!(
            report,
            "| {label} | {:.3} / {:.3} / {:.3} | {:.0} | {hop_cell} |",
            lo / 1e6,
            mid / 1e6,
            hi / 1e6,
            1e9 / mid,
        );
    }
    let f = &forwarding;
    report.push_str(
        "\n| hop | ns per packet | Mpps per core (the hop alone) | / kernel |\n|---|---|---|---|\n",
    );
    for m in &f.modes {
        let _ = writeln!(
            report,
            "| fabriclb, {} | {} | {} | {} |",
            m.mode,
            figure(m.ns, 0),
            figure(m.mpps_per_core, 2),
            figure(m.ratio, 3)
        );
    }
    let _ = writeln!(
        report,
        "| kernel multipath | {} | {} | 1 |\n\n\
         fabriclb (ECMP) / kernel, ns per packet: **{}**. The generator offers {:.2} Mpps alone on one core. \
         A 400GbE port carrying 4 KB frames takes about 12 Mpps, 84 ns per packet. \
         Runs run again because frames went missing past the hop: {}. \
         A hop within the floor's own spread ({noise_ns:.1} ns) is n/a: no figure.",
        figure(f.kernel_ns, 0),
        figure(f.kernel_mpps_per_core, 2),
        figure(f.ratio, 3),
        f.mpps,
        f.retried_runs,
    );
    Ok(forwarding)
}

/// `value` with `decimals`, or `n/a` when there is no figure.
fn figure(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "n/a".into(), |v| format!("{v:.decimals$}"))
}

/// Frames per run: about a second of the generator alone.
fn packets(budget: &Budget) -> u32 {
    if budget.testbed { 3_000_000 } else { 500_000 }
}

/// How often a run whose frames went missing on the way (h1's port or past
/// the hop, counted by the links) is run again.
/// A veth drops a frame when its peer's ring is full, which a busy
/// neighbour on the core can cause in any leg, the generator's alone too.
/// A fabriclb hop that forwarded fewer frames than reached it fails at
/// once.
const RETRIES: usize = 2;

/// Each leg's packets per second by run, after checking its counts; the
/// frame size; how many runs were run again.
fn measure(
    bed: &Testbed,
    workdir: &Path,
    budget: &Budget,
) -> Result<(Vec<Vec<f64>>, usize, usize)> {
    let fabriclb: &Path = env!("CARGO_BIN_EXE_fabriclb").as_ref();
    let mut pps = vec![Vec::new(); LEGS.len()];
    let mut frame_bytes = 0;
    let mut retried = 0;
    for _ in 0..budget.runs {
        for (i, (label, hop)) in LEGS.iter().enumerate() {
            let run = HopRun {
                packets: packets(budget),
                hop: *hop,
                qps: QPS,
                payload: PAYLOAD,
            };
            let mut attempt = 0;
            let result = loop {
                let result = testbed::run_hop(bed, fabriclb, workdir, &run).context(*label)?;
                if let Some(leaf) = &result.leaf {
                    // What h1's port dropped never reached the hop: a
                    // loss like one past it, run again below.
                    let reached = result.reached();
                    ensure!(
                        reached.contains(&leaf.forwarded),
                        "{label}: fabriclb forwarded {} of the {reached:?} frames that reached \
                         it ({} sent)",
                        leaf.forwarded,
                        result.sent
                    );
                }
                if result.arrived() == result.sent {
                    break result;
                }
                ensure!(
                    attempt < RETRIES,
                    "{label}: {} of {} packets arrived in {} runs in a row; a rate with loss is no rate",
                    result.arrived(),
                    result.sent,
                    attempt + 1
                );
                eprintln!(
                    "{label}: {} of {} packets arrived; running it again",
                    result.arrived(),
                    result.sent
                );
                attempt += 1;
                retried += 1;
            };
            frame_bytes = result.frame_bytes;
            pps[i].push(result.pps());
        }
    }
    Ok((pps, frame_bytes, retried))
}

/// Bars of ns per packet, fabriclb against the kernel: each mode's hop
/// alone, and the ECMP hop end to end with the generator.
pub fn chart(f: &Forwarding) -> String {
    let end_to_end = |mpps: f64| 1e3 / mpps;
    let mut rows: Vec<(String, f64, f64)> = f
        .modes
        .iter()
        .filter_map(|m| Some((format!("{}, the hop alone", m.mode), m.ns?, f.kernel_ns?)))
        .collect();
    rows.push((
        "ecmp, with the generator".to_owned(),
        end_to_end(f.fabriclb_end_to_end_mpps),
        end_to_end(f.kernel_end_to_end_mpps),
    ));
    let max = rows.iter().map(|r| r.2.max(r.1)).fold(1.0, f64::max);
    let rows: Vec<_> = rows
        .into_iter()
        .map(|(label, fabriclb, kernel)| {
            (
                label,
                [
                    Bar {
                        fraction: fabriclb.max(0.0) / max,
                        fill: "#2f6fbb",
                        text: format!("{fabriclb:.0} fabriclb ({:.3}x)", fabriclb / kernel),
                    },
                    Bar {
                        fraction: kernel.max(0.0) / max,
                        fill: "#9aa5b1",
                        text: format!("{kernel:.0} kernel multipath"),
                    },
                ],
            )
        })
        .collect();
    paired_bars(
        "The leaf's forwarding, ns/packet (live frames, median, one core)",
        &rows,
    )
}
