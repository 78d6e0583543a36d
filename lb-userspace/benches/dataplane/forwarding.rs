//! Forwarding cost of the leaf's hop, by difference: a generator on h1
//! into the leaf, which (a) drops in XDP, (b) forwards with fabriclb or
//! (c) forwards with the kernel's multipath route, every spine's port
//! dropping in XDP what reaches it (`testbed::run_hop`). A veth runs what
//! it receives on the sending CPU, so each leg's time per packet is the
//! generator's plus the hop's, and the hop costs 1/rate(b or c) -
//! 1/rate(a), all on one core.
//!
//! Two generators, legs interleaved, medians:
//! - live frames (BPF_PROG_TEST_RUN, millions of packets per second) for
//!   (a) and (b): fabriclb's cost where the generator is not the bound;
//! - the AF_PACKET TX ring for (a), (b) and (c): live frames do not reach
//!   the kernel's stack, so the kernel's cost comes from the generator that
//!   does, and fabriclb's with it too, for a ratio under one generator.
//!
//! Every run's counts are checked: all sent frames arrived where the leg
//! ends, and fabriclb forwarded every one.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result, ensure};
use fabriclb::testbed::{self, Hop, HopRun, HopSource, Shape, Testbed};

use super::{Bar, Budget, paired_bars, spread};

/// RDMA payload per packet: small, so per-packet work rather than copying
/// decides the rate.
const PAYLOAD: u32 = 256;
const QPS: u32 = 16;

/// `results.json`'s `forwarding`.
#[derive(serde::Serialize)]
pub struct Forwarding {
    pub method: &'static str,
    /// ns per packet fabriclb's hop adds (live frames).
    pub fabriclb_ns: f64,
    /// ns per packet the kernel's hop adds (TX ring).
    pub kernel_ns: f64,
    /// `fabriclb_ns / kernel_ns`.
    pub ratio: f64,
    /// What the live-frames generator offers alone, Mpps, on one core.
    pub mpps: f64,
    /// Packets per second one core forwards at the hop's cost alone
    /// (1e9 / ns), Mpps.
    pub fabriclb_mpps_per_core: f64,
    pub kernel_mpps_per_core: f64,
    /// Live frames through fabriclb, end to end on one core, Mpps.
    pub fabriclb_end_to_end_mpps: f64,
    pub frame_bytes: usize,
    pub runs: usize,
    /// Everything under the TX-ring generator alone.
    pub tx_ring: TxRingFigures,
}

#[derive(serde::Serialize)]
pub struct TxRingFigures {
    /// The generator alone, Mpps.
    pub mpps: f64,
    pub fabriclb_ns: f64,
    pub kernel_ns: f64,
    pub ratio: f64,
}

const METHOD: &str = "difference of ns/packet against the same generator into a leaf dropping in XDP, medians of interleaved runs, one core; fabriclb_ns from live frames (BPF_PROG_TEST_RUN), kernel_ns from the AF_PACKET TX ring (live frames do not reach the kernel stack); tx_ring has both under the TX ring";

/// The legs in run order: label, generator, hop.
fn legs(budget: &Budget) -> [(&'static str, HopSource, Hop); 5] {
    let (live, ring) = if budget.testbed {
        (3_000_000, 200_000)
    } else {
        (500_000, 40_000)
    };
    let live = HopSource::Live { packets: live };
    let ring = HopSource::TxRing { packets: ring };
    [
        ("live frames, leaf drops", live, Hop::Drop),
        ("live frames, fabriclb", live, Hop::Fabriclb),
        ("TX ring, leaf drops", ring, Hop::Drop),
        ("TX ring, fabriclb", ring, Hop::Fabriclb),
        ("TX ring, kernel multipath", ring, Hop::Kernel),
    ]
}

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
    let (legs, mut pps, frame_bytes) = result?;
    drop(bed);

    let medians: Vec<f64> = pps.iter_mut().map(|p| spread(p).1).collect();
    let ns = |i: usize| 1e9 / medians[i];
    let tx_ring = TxRingFigures {
        mpps: medians[2] / 1e6,
        fabriclb_ns: ns(3) - ns(2),
        kernel_ns: ns(4) - ns(2),
        ratio: (ns(3) - ns(2)) / (ns(4) - ns(2)),
    };
    let fabriclb_ns = ns(1) - ns(0);
    let forwarding = Forwarding {
        method: METHOD,
        fabriclb_ns,
        kernel_ns: tx_ring.kernel_ns,
        ratio: fabriclb_ns / tx_ring.kernel_ns,
        mpps: medians[0] / 1e6,
        fabriclb_mpps_per_core: 1e3 / fabriclb_ns,
        kernel_mpps_per_core: 1e3 / tx_ring.kernel_ns,
        fabriclb_end_to_end_mpps: medians[1] / 1e6,
        frame_bytes,
        runs: budget.runs,
        tx_ring,
    };

    let _ = writeln!(
        report,
        "\n## Forwarding cost of the leaf's hop (1 sender, 4 spines dropping in XDP, {QPS} QPs, RoCEv2 WRITE ONLY frames of {frame_bytes} B, {} interleaved runs)\n",
        budget.runs
    );
    report.push_str(
        "| generator, leaf | Mpps min / median / max | ns per packet, end to end (median) | the hop's ns per packet |\n|---|---|---|---|\n",
    );
    for (i, ((label, _, hop), runs)) in legs.iter().zip(&mut pps).enumerate() {
        let (lo, mid, hi) = spread(runs);
        let floor = if i < 2 { ns(0) } else { ns(2) };
        let hop_ns = match hop {
            Hop::Drop => "(floor)".to_owned(),
            Hop::Fabriclb | Hop::Kernel => format!("{:.0}", 1e9 / mid - floor),
        };
        let _ = writeln!(
            report,
            "| {label} | {:.3} / {:.3} / {:.3} | {:.0} | {hop_ns} |",
            lo / 1e6,
            mid / 1e6,
            hi / 1e6,
            1e9 / mid,
        );
    }
    let f = &forwarding;
    let _ = writeln!(
        report,
        "\n| hop | ns per packet | Mpps per core (hop alone) |\n|---|---|---|\n\
         | fabriclb (live frames) | {:.0} | {:.2} |\n\
         | kernel multipath (TX ring) | {:.0} | {:.2} |\n\n\
         fabriclb / kernel, ns per packet: **{:.3}** (under the TX ring alone: {:.0} / {:.0} ns, **{:.3}**). \
         The live-frames generator offers {:.2} Mpps alone, {:.2} Mpps through fabriclb, on one core.",
        f.fabriclb_ns,
        f.fabriclb_mpps_per_core,
        f.kernel_ns,
        f.kernel_mpps_per_core,
        f.ratio,
        f.tx_ring.fabriclb_ns,
        f.tx_ring.kernel_ns,
        f.tx_ring.ratio,
        f.mpps,
        f.fabriclb_end_to_end_mpps,
    );
    Ok(forwarding)
}

type Legs = [(&'static str, HopSource, Hop); 5];

/// Each leg's packets per second by run, after checking its counts.
fn measure(bed: &Testbed, workdir: &Path, budget: &Budget) -> Result<(Legs, Vec<Vec<f64>>, usize)> {
    let fabriclb: &Path = env!("CARGO_BIN_EXE_fabriclb").as_ref();
    let legs = legs(budget);
    let mut pps = vec![Vec::new(); legs.len()];
    let mut frame_bytes = 0;
    for _ in 0..budget.runs {
        for (i, (label, source, hop)) in legs.iter().enumerate() {
            let run = HopRun {
                source: *source,
                hop: *hop,
                qps: QPS,
                payload: PAYLOAD,
            };
            let result = testbed::run_hop(bed, fabriclb, workdir, &run).context(*label)?;
            ensure!(
                result.arrived() == result.sent,
                "{label}: {} of {} packets arrived; a rate with loss is no rate",
                result.arrived(),
                result.sent
            );
            if let Some(leaf) = &result.leaf {
                ensure!(
                    leaf.forwarded == result.sent,
                    "{label}: fabriclb forwarded {} of {}",
                    leaf.forwarded,
                    result.sent
                );
            }
            frame_bytes = result.frame_bytes;
            pps[i].push(result.pps());
        }
    }
    Ok((legs, pps, frame_bytes))
}

/// Bars of the hop's ns per packet, fabriclb against the kernel: under the
/// TX ring, and fabriclb's from live frames against the kernel's.
pub fn chart(f: &Forwarding) -> String {
    let max = f
        .kernel_ns
        .max(f.tx_ring.fabriclb_ns)
        .max(f.fabriclb_ns)
        .max(1.0);
    let bars = |fabriclb: f64, kernel: f64| {
        [
            Bar {
                fraction: fabriclb.max(0.0) / max,
                fill: "#2f6fbb",
                text: format!("{fabriclb:.0} fabriclb"),
            },
            Bar {
                fraction: kernel.max(0.0) / max,
                fill: "#9aa5b1",
                text: format!("{kernel:.0} kernel ({:.3}x)", fabriclb / kernel),
            },
        ]
    };
    paired_bars(
        "The leaf's hop, ns/packet by difference (median, one core)",
        &[
            (
                "fabriclb live, kernel TX ring".to_owned(),
                bars(f.fabriclb_ns, f.kernel_ns),
            ),
            (
                "both under the TX ring".to_owned(),
                bars(f.tx_ring.fabriclb_ns, f.tx_ring.kernel_ns),
            ),
        ],
    )
}
