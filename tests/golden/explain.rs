//! `explain` against the data plane: random packets, each explained from
//! the maps as they are and then run through BPF_PROG_TEST_RUN on the same
//! CPU, must get the same verdict (from the verdict counters) and leave for
//! the next hop explain names (the output frame's MAC and VLAN tag). The
//! run changes the state the next packet is explained from (flowlets,
//! loads, spray cursors), so flowlet and per-packet choices are checked on
//! live state too.

use fabriclb::inspect::{
    describe::Description,
    explain::{Dynamic, Explanation, explain},
    maps::MapSet,
};
use lb_common::{select::flowlet::FlowletStep, verdict::Reason};

use crate::harness::{Harness, LOOPBACK, pin_to_one_cpu};
use crate::switch::{self, LB_MAC};

/// A group (its TOML `keys`: mode, choice rule) whose flowlets end after a
/// microsecond, so that every packet but a flow's first makes a choice
/// (the golden switch's own
/// flowlet groups keep flows for a second), with `members` next hops whose
/// MACs end in `mac:01`, `mac:02`, ... and routes from both families.
fn churn(name: &str, keys: &str, mac: &str, members: usize, routes: [&str; 2]) -> String {
    let next_hops: String = (1..=members)
        .map(|i| format!("  {{ interface = \"lo\", mac = \"02:00:00:00:{mac}:{i:02x}\" }},\n"))
        .collect();
    let routes: String = routes
        .iter()
        .map(|prefix| format!("\n[[route]]\nprefix = \"{prefix}\"\ngroup = \"{name}\"\n"))
        .collect();
    format!(
        "\n[[group]]\nname = \"{name}\"\n{keys}\nflowlet_gap_us = 1\n\
         next_hops = [\n{next_hops}]\n{routes}"
    )
}

/// splitmix64: a seeded sequence, so a failure replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len() as u64) as usize]
    }
}

/// Destinations: every group of the golden switch but the one whose 200 ms
/// gap a slow run could straddle, the churn groups, the box's own
/// addresses, multicast, link-local and no route. Few hosts each, so flows
/// repeat.
const V4_NETS: [&str; 14] = [
    "10.1.0", "10.4.0", "10.2.0", "10.3.0", "10.5.0", "10.7.0", "10.8.0", "10.9.0", "10.10.0",
    "10.200.0", "10.1.0", "10.9.0", "10.11.0", "10.12.0",
];
const V4_ODD: [&str; 3] = ["10.1.0.9", "224.0.0.5", "169.254.1.1"];
const V6_NETS: [&str; 7] = [
    "2001:db8:1::",
    "2001:db8:9::",
    "2001:db8:a::",
    "2001:db8:99::",
    "2001:db8:9::",
    "2001:db8:b::",
    "2001:db8:c::",
];
const V6_ODD: [&str; 2] = ["2001:db8:1::9", "fe80::1"];

/// A random packet description.
fn description(rng: &mut Rng) -> String {
    let v6 = rng.below(10) < 3;
    let host = 1 + rng.below(2);
    let (src, dst) = if v6 {
        let dst = if rng.below(8) == 0 {
            rng.pick(&V6_ODD).to_owned()
        } else {
            format!("{}{host}", rng.pick(&V6_NETS))
        };
        (
            format!("[2001:db8::{}]", 1 + rng.below(3)),
            format!("[{dst}]"),
        )
    } else {
        let dst = if rng.below(8) == 0 {
            rng.pick(&V4_ODD).to_owned()
        } else {
            format!("{}.{host}", rng.pick(&V4_NETS))
        };
        (format!("10.0.0.{}", 1 + rng.below(3)), dst)
    };
    let sport = 49152 + rng.below(2);
    let mut text = match rng.below(10) {
        0..3 => format!("tcp {src}:{sport} -> {dst}:{}", 80 + rng.below(2)),
        3..5 => format!("udp {src}:{sport} -> {dst}:9000"),
        _ => format!(
            "udp {src}:{sport} -> {dst}:4791 qp {:#x} opcode {:#04x}",
            0x100 + rng.below(3),
            rng.below(0x12)
        ),
    };
    match rng.below(20) {
        0 => text.push_str(" ttl 1"),
        1 => text.push_str(" ttl 0"),
        _ => {}
    }
    if rng.below(7) == 0 {
        text.push_str(&format!(" vlan {}", 1 + rng.below(4094)));
    }
    text
}

pub fn now_ns() -> u64 {
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).expect("clock");
    now.tv_sec() as u64 * 1_000_000_000 + now.tv_nsec() as u64
}

/// Whether the flow's flowlet state is so close to its gap's end that the
/// data plane, a moment after explain, may see the other side of it.
fn at_the_gap(e: &Explanation, now: u64) -> bool {
    let gap = e.group.map_or(0, |(_, g)| g.flowlet_gap_ns);
    let Some(Dynamic::Flowlet {
        state: Some(state), ..
    }) = e.dynamic.as_ref().map(|d| &d.kind)
    else {
        return false;
    };
    let age = now.saturating_sub(state.last_seen_ns);
    gap > 1_000_000 && age.abs_diff(gap) < 50_000_000
}

const PACKETS: usize = 1200;

#[test]
fn explain_agrees_with_the_data_plane_on_random_packets() {
    pin_to_one_cpu();
    let config = switch::config()
        + &churn(
            "churn",
            "mode = \"flowlet\"",
            "20",
            3,
            ["10.9.0.0/16", "2001:db8:9::/48"],
        )
        + &churn(
            "churn-spray",
            "mode = \"per-packet\"",
            "21",
            2,
            ["10.10.0.0/16", "2001:db8:a::/48"],
        )
        + &churn(
            "churn-two",
            "mode = \"flowlet\"\nflowlet_choice = \"two-choices\"",
            "22",
            4,
            ["10.11.0.0/16", "2001:db8:b::/48"],
        )
        + &churn(
            "churn-least-cost",
            "mode = \"per-packet\"\nflowlet_choice = \"least-cost\"",
            "23",
            3,
            ["10.12.0.0/16", "2001:db8:c::/48"],
        );
    let mut h = Harness::with_config(&config);
    h.set_local(&["10.1.0.9", "2001:db8:1::9"]);
    let info =
        h.dp.program()
            .expect("program")
            .info()
            .expect("program info");
    let maps = MapSet::from_program(&info).expect("the program's maps");
    let mut rng = Rng(0x5eed_0014);
    let mut seen = std::collections::BTreeMap::<&str, usize>::new();
    let mut skipped = 0;
    let mut sent: Vec<String> = Vec::new();
    for _ in 0..PACKETS {
        // Half the packets repeat an earlier one: flows that continue, or
        // choose again after their gap.
        let text = match rng.below(2) {
            0 if !sent.is_empty() => sent[rng.below(sent.len() as u64) as usize].clone(),
            _ => description(&mut rng),
        };
        sent.push(text.clone());
        let frame = Description::parse(&text).expect(&text).frame_to(LB_MAC);
        let before = h.dp.verdict_counts().expect("verdicts");
        let now = now_ns();
        let e = explain(&maps, &frame, LOOPBACK, Some(0), now).expect("explain");
        let (action, out) = h.run(&frame);
        let after = h.dp.verdict_counts().expect("verdicts");
        if at_the_gap(&e, now) {
            skipped += 1;
            continue;
        }
        let counted: Vec<Reason> = Reason::ALL
            .into_iter()
            .filter(|&r| after[r as usize] != before[r as usize])
            .collect();
        assert_eq!(counted, [e.verdict], "{text}: verdict");
        assert_eq!(action, e.verdict.xdp_action(), "{text}: action");
        *seen.entry(e.verdict.name()).or_default() += 1;
        if e.verdict != Reason::Forwarded {
            continue;
        }
        let (_, nh) = e.next_hop.expect("a forwarded packet's next hop");
        assert_eq!(out[..6], nh.dst_mac, "{text}: next hop (destination MAC)");
        let tag =
            (out[12..14] == [0x81, 0x00]).then(|| u16::from_be_bytes([out[14], out[15]]) & 0xfff);
        assert_eq!(tag.unwrap_or(0), nh.vlan, "{text}: egress VLAN");
        let kind = match e.dynamic.as_ref().map(|d| &d.kind) {
            None => "ecmp",
            Some(Dynamic::Sprayed { .. }) => "sprayed",
            Some(Dynamic::Flowlet {
                step: FlowletStep::Start,
                ..
            }) => "flowlet start",
            Some(Dynamic::Flowlet {
                step: FlowletStep::Continue(_),
                ..
            }) => "flowlet continue",
            Some(Dynamic::Flowlet { .. }) => "flowlet choose",
        };
        *seen.entry(kind).or_default() += 1;
    }
    eprintln!("{PACKETS} random packets, {skipped} at a gap's end skipped: {seen:?}");
    assert!(skipped < PACKETS / 20, "{skipped} packets skipped");
    // The mix reaches every path explain takes.
    for kind in [
        "forwarded",
        "no_route",
        "local",
        "ttl_expired",
        "no_nexthop",
        "ecmp",
        "sprayed",
        "flowlet start",
        "flowlet continue",
        "flowlet choose",
    ] {
        assert!(
            seen.get(kind).is_some_and(|&n| n >= 3),
            "too few {kind}: {seen:?}"
        );
    }
}
