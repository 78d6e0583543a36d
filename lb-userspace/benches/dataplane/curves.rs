//! Cost curves: ns/packet above the empty program as tables grow: routes
//! installed, flows in the flowlet table (hit and miss), next hops per
//! group. Each point loads the benchmark object afresh, sized for it, and
//! times `PROGRAM_VARY`, which changes the packet before every run so a
//! timed run visits the routes or flows the point installed instead of one.

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use anyhow::{Context, Result};
use aya::maps::Array;
use fabriclb::{
    config,
    dataplane::{Dataplane, tables},
};
use lb_common::{
    abi::{
        FLOWLETS, ROUTE4_POOL, ROUTES_V4, ROUTES_V6,
        bench::{BASELINE_IFINDEX, BENCH_VARY, BenchVary, PROGRAM_EMPTY, PROGRAM_VARY},
    },
    limits::{FLOWLET_TABLE_DEFAULT, MAX_LOCAL_ROUTES, ROUTE4_POOL_BLOCKS},
    packet::craft::{Ipv4, Ipv6, bth, udp},
    packet::parse::{IPPROTO_UDP, ROCEV2_UDP_PORT},
    route::table::BLOCK_ENTRIES,
    verdict::{XDP_DROP, XDP_REDIRECT},
};
use serde::Serialize;

use super::{
    BENCH_OBJECT, Budget, LB_MAC, PEER_MAC, group_toml, pad, spread, take_frames_to_lb_mac, time,
};

/// One point of a curve.
#[derive(Serialize)]
pub struct Point {
    /// What grows: `routes`, `flows` or `next_hops`.
    pub curve: &'static str,
    /// Which line of the curve: family, hit or miss, mode.
    pub series: &'static str,
    pub x: u32,
    /// Above the empty program, min / median / max of the rounds.
    pub ns: f64,
    pub ns_min: f64,
    pub ns_max: f64,
    /// Share of the timed packets that started a flowlet, in flowlet and
    /// per-packet groups: tells a hit from a miss.
    pub new_flowlets: Option<f64>,
}

/// What one point installs and sends.
struct Setup {
    /// The group's mode keys and its number of next hops.
    keys: &'static str,
    next_hops: usize,
    /// Routes installed to the group: `/24`s from 20.0.0.0 or `/64`s from
    /// 2001:db8::, besides the config's.
    routes: Option<(Family, u32)>,
    flowlet_table: u32,
    frame: Vec<u8>,
    vary: BenchVary,
    /// Runs of the program before timing: fills the flowlet table.
    warm_up: u32,
}

#[derive(Clone, Copy)]
enum Family {
    V4,
    V6,
}

const ROUTE_COUNTS: [u32; 3] = [1, 1_000, 100_000];
const FLOW_COUNTS: [u32; 3] = [1_000, 100_000, 1_000_000];
const NEXT_HOP_COUNTS: [usize; 3] = [2, 8, 64];
/// Where the bench frames keep their IPv4 source and destination, and the
/// IPv6 destination's second word (Ethernet, no tags).
const V4_SRC: u32 = 14 + 12;
const V4_DST: u32 = 14 + 16;
const V6_DST_WORD: u32 = 14 + 24 + 4;
/// Every group's own route in the configs here.
const GROUP_PREFIX: &str = "10.0.0.0/8";

fn udp_v4(dst: [u8; 4]) -> Vec<u8> {
    Ipv4 {
        dst,
        ..Ipv4::new(IPPROTO_UDP)
    }
    .frame(LB_MAC, PEER_MAC, &[], &udp(1000, 2000, &pad()))
}

fn roce_v4(opcode: u8) -> Vec<u8> {
    Ipv4::new(IPPROTO_UDP).frame(
        LB_MAC,
        PEER_MAC,
        &[],
        &udp(0xc000, ROCEV2_UDP_PORT, &bth(opcode, 77, 1, &pad())),
    )
}

/// A new source address for every packet: a new flow each time.
fn new_flows(modulus: u32) -> BenchVary {
    BenchVary {
        offset: V4_SRC,
        base: u32::from(Ipv4Addr::new(10, 200, 0, 0)),
        stride: 1,
        modulus,
        next: 0,
    }
}

fn ecmp_keys() -> &'static str {
    "hash_fields = [\"src_ip\", \"dst_ip\", \"ip_protocol\", \"l4_src_port\", \"l4_dst_port\"]"
}

fn points() -> Vec<(&'static str, &'static str, u32, Setup)> {
    let mut points = Vec::new();
    for n in ROUTE_COUNTS {
        let routes = |family, frame, offset, base, stride| Setup {
            keys: ecmp_keys(),
            next_hops: 16,
            routes: Some((family, n)),
            flowlet_table: FLOWLET_TABLE_DEFAULT,
            frame,
            vary: BenchVary {
                offset,
                base,
                stride,
                modulus: n,
                next: 0,
            },
            warm_up: 1,
        };
        let v4 = udp_v4([20, 0, 0, 1]);
        let v6 = Ipv6::new(IPPROTO_UDP).frame(LB_MAC, PEER_MAC, &[], &udp(1000, 2000, &pad()));
        let first_v4 = u32::from(Ipv4Addr::new(20, 0, 0, 1));
        points.push((
            "routes",
            "IPv4 UDP, ECMP",
            n,
            routes(Family::V4, v4, V4_DST, first_v4, 256),
        ));
        points.push((
            "routes",
            "IPv6 UDP, ECMP",
            n,
            routes(Family::V6, v6, V6_DST_WORD, 0, 1),
        ));
    }
    for n in FLOW_COUNTS {
        // `hit`: the longest gap a config allows, so a flow revisited
        // within it stays on its flowlet and the lookup is timed, not a
        // new choice. `miss`: a new flow every packet, and the shortest
        // gap, so each finds its entry idle and chooses a path.
        let flowlet = |modulus, keys| Setup {
            keys,
            next_hops: 16,
            routes: None,
            flowlet_table: n,
            frame: roce_v4(0x07),
            vary: new_flows(modulus),
            warm_up: n,
        };
        points.push((
            "flows",
            "flowlet, hit",
            n,
            flowlet(n, "mode = \"flowlet\"\nflowlet_gap_us = 1000000"),
        ));
        points.push((
            "flows",
            "flowlet, miss",
            n,
            flowlet(0, "mode = \"flowlet\"\nflowlet_gap_us = 1"),
        ));
    }
    for n in NEXT_HOP_COUNTS {
        for (series, keys, opcode) in [
            ("ECMP", ecmp_keys(), None),
            ("flowlet", "mode = \"flowlet\"", Some(0x07)),
            ("per-packet, sprayed", "mode = \"per-packet\"", Some(0x0a)),
            ("per-packet, pinned", "mode = \"per-packet\"", Some(0x07)),
        ] {
            let setup = Setup {
                keys,
                next_hops: n,
                routes: None,
                flowlet_table: FLOWLET_TABLE_DEFAULT,
                frame: opcode.map_or_else(|| udp_v4([10, 1, 0, 2]), roce_v4),
                vary: new_flows(0),
                warm_up: 1,
            };
            points.push(("next_hops", series, n as u32, setup));
        }
    }
    points
}

pub fn section(budget: &Budget, report: &mut String) -> Result<Vec<Point>> {
    let mut curves = Vec::new();
    for (curve, series, x, setup) in points() {
        let point = measure(budget, &setup)
            .with_context(|| format!("cost curve {curve}, {series}, {x}"))?;
        curves.push(Point {
            curve,
            series,
            x,
            ns: point.0.1,
            ns_min: point.0.0,
            ns_max: point.0.2,
            new_flowlets: point.1,
        });
    }
    write_table(&curves, budget, report);
    Ok(curves)
}

/// (min, median, max) ns above the empty program, and the share of new
/// flowlets when the group has any.
fn measure(budget: &Budget, setup: &Setup) -> Result<((f64, f64, f64), Option<f64>)> {
    let mut text = String::from("[switch]\nhash_seed = 0x5eed\ninterfaces = [\"lo\"]\n");
    group_toml(
        &mut text,
        "g",
        setup.keys,
        0x10,
        setup.next_hops,
        &[GROUP_PREFIX],
    );
    let config = config::parse(&text, "curve.toml".as_ref())?;
    let mut tables = tables::Tables::build(&config, None, |spec| {
        tables::static_nexthop(spec, BASELINE_IFINDEX, LB_MAC)
    })?;
    let group = tables.groups[0].id;
    if let Some((family, n)) = setup.routes {
        for i in 0..n {
            let (addr, len) = match family {
                Family::V4 => (IpAddr::V4(Ipv4Addr::from(0x1400_0000 + (i << 8))), 24),
                Family::V6 => {
                    let mut octets = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0).octets();
                    octets[4..8].copy_from_slice(&i.to_be_bytes());
                    (IpAddr::V6(Ipv6Addr::from(octets)), 64)
                }
            };
            tables.routes.push((config::Prefix { addr, len }, group));
        }
    }
    let routes = setup.routes.map_or(0, |(_, n)| n) + MAX_LOCAL_ROUTES + 1;
    // A /24 takes at most one block of the IPv4 table.
    let pool = ROUTE4_POOL_BLOCKS.max(routes) * BLOCK_ENTRIES;
    let mut dp = Dataplane::load_sized(
        BENCH_OBJECT,
        &[
            (FLOWLETS, setup.flowlet_table),
            (ROUTES_V4, routes),
            (ROUTES_V6, routes),
            (ROUTE4_POOL, pool),
        ],
    )?;
    tables.write(&mut dp, None)?;
    dp.add_port(BASELINE_IFINDEX)?;
    take_frames_to_lb_mac(&mut dp)?;
    dp.load_program(PROGRAM_EMPTY)?;
    dp.load_program(PROGRAM_VARY)?;
    let map = dp.other_map(BENCH_VARY).context("no vary map")?;
    Array::<_, BenchVary>::try_from(map)?.set(0, setup.vary, 0)?;
    time(
        dp.named(PROGRAM_VARY)?,
        &setup.frame,
        setup.warm_up,
        XDP_REDIRECT,
    )?;
    let before = dp.group_stats(group)?.new_flowlets;
    let mut above = Vec::new();
    for _ in 0..budget.runs {
        let empty = time(
            dp.named(PROGRAM_EMPTY)?,
            &setup.frame,
            budget.repeat,
            XDP_DROP,
        )?;
        let varied = time(
            dp.named(PROGRAM_VARY)?,
            &setup.frame,
            budget.repeat,
            XDP_REDIRECT,
        )?;
        above.push(varied - empty);
    }
    let started = dp.group_stats(group)?.new_flowlets - before;
    let timed = f64::from(budget.repeat) * budget.runs as f64;
    let new_flowlets = (!setup.keys.starts_with("hash_fields")).then(|| started as f64 / timed);
    Ok((spread(&mut above), new_flowlets))
}

fn write_table(points: &[Point], budget: &Budget, report: &mut String) {
    let _ = writeln!(
        report,
        "## Cost curves (ns/packet above the empty program, {} repeats per run, {} runs, min / median / max)\n",
        budget.repeat, budget.runs
    );
    report.push_str(
        "Each run changes the packet before every repeat: the destination walks the installed routes (`/24`s or `/64`s), or the source address makes a flow per packet (`miss`, with a 1 us flowlet gap so each finds its flowlet table entry idle and chooses a path; and the `next_hops` curve) or walks as many flows as the table has entries (`hit`, with a 1 s gap so a flow found stays on its flowlet; flows whose hashes meet share an entry). New flowlets tell a hit from a miss.\n\n\
         | curve | series | x | ns | new flowlets, % of packets |\n|---|---|---|---|---|\n",
    );
    for p in points {
        let share = p
            .new_flowlets
            .map_or_else(|| "-".to_owned(), |s| format!("{:.1}", 100.0 * s));
        let _ = writeln!(
            report,
            "| {} | {} | {} | {:.0} / {:.0} / {:.0} | {share} |",
            p.curve, p.series, p.x, p.ns_min, p.ns, p.ns_max
        );
    }
    report.push('\n');
}

/// A hand-written SVG: one panel per curve, ns (median) against x on an
/// even spacing of its few values, one line per series.
pub fn chart(points: &[Point]) -> String {
    const COLOURS: [&str; 4] = ["#2f6fbb", "#c0504d", "#9bbb59", "#8064a2"];
    let (panel, height, top, bottom) = (300.0, 300.0, 40.0, 250.0);
    let curves = distinct(points.iter().map(|p| p.curve));
    let width = panel * curves.len() as f64 + 20.0;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"11\">\n\
         <text x=\"10\" y=\"18\" font-size=\"14\">Cost curves: ns/packet above the empty program (BPF_PROG_TEST_RUN, median)</text>\n"
    );
    for (c, curve) in curves.iter().enumerate() {
        let mine: Vec<&Point> = points.iter().filter(|p| p.curve == *curve).collect();
        let mut xs: Vec<u32> = mine.iter().map(|p| p.x).collect();
        xs.sort_unstable();
        xs.dedup();
        let max = mine.iter().map(|p| p.ns).fold(1.0, f64::max) * 1.1;
        let left = 20.0 + panel * c as f64 + 40.0;
        let room = panel - 70.0;
        let at_x = |x: u32| {
            let i = xs.iter().position(|&v| v == x).unwrap_or(0);
            left + room * i as f64 / (xs.len().max(2) - 1) as f64
        };
        let at_y = |ns: f64| bottom - (bottom - top - 60.0) * ns.max(0.0) / max;
        let _ = writeln!(
            svg,
            "<text x=\"{left}\" y=\"{}\" font-size=\"12\">{curve}</text>\
             <line x1=\"{left}\" y1=\"{bottom}\" x2=\"{}\" y2=\"{bottom}\" stroke=\"black\"/>\
             <line x1=\"{left}\" y1=\"{}\" x2=\"{left}\" y2=\"{bottom}\" stroke=\"black\"/>\
             <text x=\"{}\" y=\"{}\" text-anchor=\"end\">{max:.0}</text>",
            top + 8.0,
            left + room,
            at_y(max),
            left - 3.0,
            at_y(max) + 4.0,
        );
        for &x in &xs {
            let _ = writeln!(
                svg,
                "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{x}</text>",
                at_x(x),
                bottom + 14.0
            );
        }
        let series = distinct(mine.iter().map(|p| p.series));
        for (s, name) in series.iter().enumerate() {
            let colour = COLOURS[s % COLOURS.len()];
            let line: Vec<String> = mine
                .iter()
                .filter(|p| p.series == *name)
                .map(|p| format!("{:.1},{:.1}", at_x(p.x), at_y(p.ns)))
                .collect();
            let _ = writeln!(
                svg,
                "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"/>\
                 <text x=\"{left}\" y=\"{}\" fill=\"{colour}\">{name}</text>",
                line.join(" "),
                top + 22.0 + 12.0 * s as f64,
            );
        }
    }
    svg.push_str("</svg>\n");
    svg
}

/// `items` without repeats, in first-seen order.
fn distinct<'a>(items: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut seen = Vec::new();
    for item in items {
        if !seen.contains(&item) {
            seen.push(item);
        }
    }
    seen
}
