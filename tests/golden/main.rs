//! Golden packets through BPF_PROG_TEST_RUN on the real program: for each
//! fixture the verdict, the exact output bytes, the verdict counters and
//! the next hop's counters. Expected outputs are built from scratch
//! (fresh IPv4 checksum, new L2 header), and the expected next hop is
//! predicted on the host with `crc32fast`, so every forwarded fixture also
//! checks hash parity between the kernel and the host.
//!
//! Needs root (loads an XDP program). Frames shorter than 14 bytes cannot
//! be fed to BPF_PROG_TEST_RUN (the kernel refuses them); the parser's unit
//! tests cover those.

use aya::programs::{TestRun, TestRunOptions};
use fabriclb::{
    config,
    dataplane::Dataplane,
    dataplane::tables::{self, Tables},
};
use lb_common::{
    abi::NextHop,
    limits::{BUCKETS_PER_GROUP, FLOWLET_TABLE_DEFAULT, NO_NEXTHOP},
    packet::craft::{self, Ipv4, Ipv6, bth, ipv6_ext, ipv6_frag, tcp, udp},
    packet::parse::{ETH_P_8021AD, ETH_P_8021Q, IPPROTO_TCP, IPPROTO_UDP, ROCEV2_UDP_PORT, parse},
    select::hash::{HashFields, hash_input},
    verdict::Reason,
};

const LB_MAC: [u8; 6] = [0x02, 0xfa, 0xb0, 0, 0, 0x01];
const PEER_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0xaa, 0, 0x01];
const SEED: u32 = 0x5eed_1234;

const CONFIG: &str = r#"
[switch]
hash_seed = 0x5eed1234
interfaces = ["lo"]

[[group]]
name = "spines"
next_hops = [
  { interface = "lo", mac = "02:00:00:00:0a:01" },
  { interface = "lo", mac = "02:00:00:00:0a:02" },
  { interface = "lo", mac = "02:00:00:00:0a:03" },
  { interface = "lo", mac = "02:00:00:00:0a:04" },
]

[[group]]
name = "five-tuple"
hash_fields = ["src_ip", "dst_ip", "ip_protocol", "l4_src_port", "l4_dst_port"]
next_hops = [
  { interface = "lo", mac = "02:00:00:00:0b:01" },
  { interface = "lo", mac = "02:00:00:00:0b:02" },
  { interface = "lo", mac = "02:00:00:00:0b:03" },
  { interface = "lo", mac = "02:00:00:00:0b:04" },
]

[[group]]
name = "tagged"
next_hops = [{ interface = "lo", mac = "02:00:00:00:0c:01", vlan = 100 }]

[[group]]
name = "down"
next_hops = [{ interface = "lo", mac = "02:00:00:00:0d:01" }]

[[route]]
prefix = "10.1.0.0/16"
group = "spines"

[[route]]
prefix = "2001:db8:1::/48"
group = "spines"

[[route]]
prefix = "10.4.0.0/16"
group = "five-tuple"

[[route]]
prefix = "10.2.0.0/16"
group = "tagged"

[[route]]
prefix = "10.3.0.0/16"
group = "down"

[[group]]
name = "flowlet-sticky"
mode = "flowlet"
flowlet_gap_us = 1000000
next_hops = [
  { interface = "lo", mac = "02:00:00:00:0e:01" },
  { interface = "lo", mac = "02:00:00:00:0e:02" },
  { interface = "lo", mac = "02:00:00:00:0e:03" },
  { interface = "lo", mac = "02:00:00:00:0e:04" },
]

[[group]]
name = "flowlet"
mode = "flowlet"
flowlet_gap_us = 2000
next_hops = [
  { interface = "lo", mac = "02:00:00:00:0f:01" },
  { interface = "lo", mac = "02:00:00:00:0f:02" },
  { interface = "lo", mac = "02:00:00:00:0f:03" },
  { interface = "lo", mac = "02:00:00:00:0f:04" },
]

[[group]]
name = "per-packet"
mode = "per-packet"
flowlet_gap_us = 1000000
next_hops = [
  { interface = "lo", mac = "02:00:00:00:10:01" },
  { interface = "lo", mac = "02:00:00:00:10:02" },
  { interface = "lo", mac = "02:00:00:00:10:03" },
  { interface = "lo", mac = "02:00:00:00:10:04" },
]

[[group]]
name = "spray-all"
mode = "per-packet"
spray = "all"
flowlet_gap_us = 1000000
next_hops = [
  { interface = "lo", mac = "02:00:00:00:11:01" },
  { interface = "lo", mac = "02:00:00:00:11:02" },
  { interface = "lo", mac = "02:00:00:00:11:03" },
  { interface = "lo", mac = "02:00:00:00:11:04" },
]

[[route]]
prefix = "10.5.0.0/16"
group = "flowlet-sticky"

[[route]]
prefix = "10.6.0.0/16"
group = "flowlet"

[[route]]
prefix = "10.7.0.0/16"
group = "per-packet"

[[route]]
prefix = "10.8.0.0/16"
group = "spray-all"
"#;

struct Harness {
    dp: Dataplane,
    tables: Tables,
    config: config::Config,
}

impl Harness {
    /// Loads the program and programs it through the daemon's own tables;
    /// every next hop leaves through `lo` (test runs transmit nothing) and
    /// the "down" group's only next hop is unusable.
    fn new() -> Self {
        let config = config::parse(CONFIG, "golden.toml".as_ref()).expect("golden config");
        let tables = Tables::build(&config, None, |spec| {
            tables::static_nexthop(spec, 1, LB_MAC)
        })
        .expect("tables");
        let mut dp = Dataplane::load(FLOWLET_TABLE_DEFAULT).expect("load XDP program (needs root)");
        tables.write(&mut dp, None).expect("program maps");
        let mut harness = Self { dp, tables, config };
        for id in harness.members("down") {
            harness.take_down(id);
        }
        harness
    }

    fn group(&self, name: &str) -> usize {
        self.config
            .groups
            .iter()
            .position(|g| g.name == name)
            .expect("group")
    }

    /// The next hop the host predicts for `frame` in `group`, with
    /// crc32fast standing in for the data plane's CRC.
    fn predict(&self, group: &str, frame: &[u8]) -> u32 {
        let g = &self.tables.groups[self.group(group)];
        let parsed = parse(frame).expect("forwardable fixture");
        let mut crc = crc32fast::Hasher::new_with_initial(SEED);
        crc.update(hash_input(&parsed.flow, HashFields(g.entry.hash_fields)).as_bytes());
        let bucket = crc.finalize() & (BUCKETS_PER_GROUP - 1);
        let id = g.buckets[bucket as usize];
        assert_ne!(id, NO_NEXTHOP);
        id
    }

    /// Runs one frame; returns the verdict and the output frame.
    fn run(&mut self, frame: &[u8]) -> (u32, Vec<u8>) {
        self.run_repeated(frame, 1)
    }

    /// Runs `repeat` copies back to back in the kernel (the program sees
    /// its own output each time, so the TTL drops by `repeat`); returns the
    /// last verdict and output frame.
    fn run_repeated(&mut self, frame: &[u8], repeat: u32) -> (u32, Vec<u8>) {
        let mut out = vec![0u8; frame.len() + 64];
        let result = self
            .dp
            .program()
            .expect("program")
            .test_run(TestRunOptions {
                data_in: Some(frame),
                data_out: Some(&mut out),
                repeat,
                ..Default::default()
            })
            .expect("BPF_PROG_TEST_RUN");
        out.truncate(result.data_size_out as usize);
        (result.return_value, out)
    }

    /// Runs a fixture and checks verdict, bytes and counters.
    fn check(&mut self, fixture: &Fixture) {
        let name = &fixture.name;
        let before = self.dp.verdict_counts().expect("verdicts");
        let nexthop = fixture.group.map(|g| self.predict(g, &fixture.input));
        let nh_before = nexthop.map(|id| self.dp.nexthop_stats(id).expect("stats"));

        let (verdict, out) = self.run(&fixture.input);

        assert_eq!(verdict, fixture.reason.xdp_action(), "{name}: verdict");
        let expected = match nexthop {
            Some(id) => (fixture.expected)(&self.tables.nexthops[id as usize]),
            None => fixture.input.clone(),
        };
        assert_eq!(hex(&out), hex(&expected), "{name}: output bytes");
        let after = self.dp.verdict_counts().expect("verdicts");
        for reason in Reason::ALL {
            let delta = after[reason as usize] - before[reason as usize];
            let want = u64::from(reason == fixture.reason);
            assert_eq!(delta, want, "{name}: counter {}", reason.name());
        }
        if let (Some(id), Some(before)) = (nexthop, nh_before) {
            let after = self.dp.nexthop_stats(id).expect("stats");
            assert_eq!(
                after.packets - before.packets,
                1,
                "{name}: next-hop packets"
            );
            assert_eq!(
                after.bytes - before.bytes,
                fixture.input.len() as u64,
                "{name}: next-hop bytes"
            );
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

type Expect = Box<dyn Fn(&NextHop) -> Vec<u8>>;

struct Fixture {
    name: String,
    input: Vec<u8>,
    reason: Reason,
    /// The group a forwarded packet goes to; `None` for every other verdict,
    /// whose output must equal the input.
    group: Option<&'static str>,
    expected: Expect,
}

fn forwarded(name: String, group: &'static str, input: Vec<u8>, expected: Expect) -> Fixture {
    Fixture {
        name,
        input,
        reason: Reason::Forwarded,
        group: Some(group),
        expected,
    }
}

fn untouched(name: impl Into<String>, input: Vec<u8>, reason: Reason) -> Fixture {
    Fixture {
        name: name.into(),
        input,
        reason,
        group: None,
        expected: Box::new(|_| Vec::new()),
    }
}

fn egress_tags(nh: &NextHop) -> Vec<(u16, u16)> {
    if nh.vlan == 0 {
        vec![]
    } else {
        vec![(ETH_P_8021Q, nh.vlan)]
    }
}

/// An IPv4 fixture: `ip` in, the same with TTL - 1 out, on the next hop's L2.
fn v4(
    name: &'static str,
    group: &'static str,
    tags: &[(u16, u16)],
    ip: Ipv4,
    l4: Vec<u8>,
) -> Fixture {
    let input = ip.frame(LB_MAC, PEER_MAC, tags, &l4);
    forwarded(
        name.into(),
        group,
        input,
        Box::new(move |nh| forwarded_v4(&ip, &l4, nh)),
    )
}

/// What `ip` carrying `l4` leaves as for next hop `nh`: TTL - 1, the next
/// hop's L2 header.
fn forwarded_v4(ip: &Ipv4, l4: &[u8], nh: &NextHop) -> Vec<u8> {
    Ipv4 {
        ttl: ip.ttl - 1,
        ..ip.clone()
    }
    .frame(nh.dst_mac, nh.src_mac, &egress_tags(nh), l4)
}

fn v6(
    name: &'static str,
    group: &'static str,
    tags: &[(u16, u16)],
    ip: Ipv6,
    body: Vec<u8>,
) -> Fixture {
    let input = ip.frame(LB_MAC, PEER_MAC, tags, &body);
    forwarded(
        name.into(),
        group,
        input,
        Box::new(move |nh| {
            let out = Ipv6 {
                hop_limit: ip.hop_limit - 1,
                ..ip.clone()
            };
            out.frame(nh.dst_mac, nh.src_mac, &egress_tags(nh), &body)
        }),
    )
}

fn ipv4_to(dst: [u8; 4], protocol: u8) -> Ipv4 {
    Ipv4 {
        dst,
        ..Ipv4::new(protocol)
    }
}

fn rocev2(opcode: u8, qp: u32) -> Vec<u8> {
    udp(
        0xc001,
        ROCEV2_UDP_PORT,
        &bth(opcode, qp, 0x10_0000, &[0xab; 64]),
    )
}

fn forwarding_fixtures() -> Vec<Fixture> {
    let dot1q = [(ETH_P_8021Q, 10)];
    let qinq = [(ETH_P_8021AD, 20), (ETH_P_8021Q, 30)];
    let mut fixtures = vec![
        v4(
            "ipv4 udp",
            "spines",
            &[],
            Ipv4::new(IPPROTO_UDP),
            udp(1234, 5678, b"payload"),
        ),
        v4(
            "ipv4 tcp",
            "spines",
            &[],
            Ipv4::new(IPPROTO_TCP),
            tcp(40000, 443),
        ),
        v4(
            "ipv4 ttl 2 leaves with 1",
            "spines",
            &[],
            Ipv4 {
                ttl: 2,
                ..Ipv4::new(IPPROTO_UDP)
            },
            udp(1, 2, b"x"),
        ),
        v4(
            "ipv4 checksum carry (ttl 255, id 0xffff)",
            "spines",
            &[],
            Ipv4 {
                ttl: 255,
                id: 0xffff,
                ..Ipv4::new(IPPROTO_UDP)
            },
            udp(9, 9, b"carry"),
        ),
        v4(
            "ipv4 802.1q tag stripped",
            "spines",
            &dot1q,
            Ipv4::new(IPPROTO_UDP),
            udp(7, 8, b"tag"),
        ),
        v4(
            "ipv4 qinq tags stripped",
            "spines",
            &qinq,
            Ipv4::new(IPPROTO_TCP),
            tcp(7, 8),
        ),
        v4(
            "ipv4 options",
            "spines",
            &[],
            Ipv4 {
                options: vec![0x94, 0x04, 0, 0, 0x01, 0x01, 0x01, 0x00],
                ..Ipv4::new(IPPROTO_UDP)
            },
            udp(3000, 3001, b"opts"),
        ),
        v4(
            "ipv4 first fragment",
            "spines",
            &[],
            Ipv4 {
                frag: 0x2000,
                ..Ipv4::new(IPPROTO_UDP)
            },
            udp(5, 6, &[0; 16]),
        ),
        v4(
            "ipv4 later fragment",
            "spines",
            &[],
            Ipv4 {
                frag: 0x00b9,
                ..Ipv4::new(IPPROTO_UDP)
            },
            vec![0x5a; 24],
        ),
        v4(
            "ipv4 unknown l4 (gre)",
            "spines",
            &[],
            Ipv4::new(47),
            vec![0, 0, 0x08, 0, 1, 2, 3, 4],
        ),
        v4(
            "egress vlan pushed",
            "tagged",
            &[],
            ipv4_to([10, 2, 0, 9], IPPROTO_UDP),
            udp(1, 2, b"push"),
        ),
        v4(
            "ingress tag swapped for egress tag",
            "tagged",
            &dot1q,
            ipv4_to([10, 2, 0, 9], IPPROTO_TCP),
            tcp(1, 2),
        ),
        v4(
            "five-tuple group",
            "five-tuple",
            &[],
            ipv4_to([10, 4, 0, 1], IPPROTO_UDP),
            rocev2(0x0a, 17),
        ),
        v6(
            "ipv6 udp",
            "spines",
            &[],
            Ipv6::new(IPPROTO_UDP),
            udp(1234, 5678, b"payload6"),
        ),
        v6(
            "ipv6 tcp",
            "spines",
            &[],
            Ipv6::new(IPPROTO_TCP),
            tcp(50000, 22),
        ),
        v6(
            "ipv6 qinq",
            "spines",
            &qinq,
            Ipv6::new(IPPROTO_UDP),
            udp(1, 2, b"q"),
        ),
        v6(
            "ipv6 rocev2 write only",
            "spines",
            &[],
            Ipv6::new(IPPROTO_UDP),
            rocev2(0x0a, 0x00ab_cdef),
        ),
        v6(
            "ipv6 hop limit 2 leaves with 1",
            "spines",
            &[],
            Ipv6 {
                hop_limit: 2,
                ..Ipv6::new(IPPROTO_TCP)
            },
            tcp(1, 2),
        ),
        v6(
            "ipv6 hop-by-hop, routing, destination options",
            "spines",
            &[],
            Ipv6::new(0),
            [
                ipv6_ext(43, 0),
                ipv6_ext(60, 2),
                ipv6_ext(IPPROTO_UDP, 1),
                udp(4000, 4001, b"ext"),
            ]
            .concat(),
        ),
        v6(
            "ipv6 later fragment",
            "spines",
            &[],
            Ipv6::new(44),
            [ipv6_frag(IPPROTO_UDP, 0x0011), vec![0x77; 32]].concat(),
        ),
        v6(
            "ipv6 first fragment",
            "spines",
            &[],
            Ipv6::new(44),
            [ipv6_frag(IPPROTO_UDP, 0x0001), udp(1, 2, &[0; 24])].concat(),
        ),
    ];
    // RoCEv2 at several opcodes: SEND FIRST/ONLY, WRITE FIRST/MIDDLE/LAST/
    // ONLY, READ RESPONSE ONLY, ACKNOWLEDGE.
    for (name, opcode) in [
        ("rocev2 send first", 0x00),
        ("rocev2 send only", 0x04),
        ("rocev2 write first", 0x06),
        ("rocev2 write middle", 0x07),
        ("rocev2 write last", 0x08),
        ("rocev2 write only", 0x0a),
        ("rocev2 read response only", 0x10),
        ("rocev2 acknowledge", 0x11),
    ] {
        fixtures.push(v4(
            name,
            "spines",
            &[],
            Ipv4::new(IPPROTO_UDP),
            rocev2(opcode, 0x000123 + opcode as u32),
        ));
    }
    fixtures
}

fn pass_and_drop_fixtures() -> Vec<Fixture> {
    let v4_udp = |ip: Ipv4| ip.frame(LB_MAC, PEER_MAC, &[], &udp(1, 2, b"data"));
    let mut arp = craft::ethernet([0xff; 6], PEER_MAC, &[], 0x0806, &[0; 28]);
    arp[0] = 0x02; // unicast ARP reply
    let mut bad_version = v4_udp(Ipv4::new(IPPROTO_UDP));
    bad_version[14] = 0x65;
    let mut bad_ihl = v4_udp(Ipv4::new(IPPROTO_UDP));
    bad_ihl[14] = 0x44;
    let mut jumbo = Ipv6::new(IPPROTO_UDP).frame(LB_MAC, PEER_MAC, &[], &udp(1, 2, b"j"));
    jumbo[18..20].copy_from_slice(&[0, 0]);
    let three_tags = Ipv4::new(IPPROTO_UDP).frame(
        LB_MAC,
        PEER_MAC,
        &[(ETH_P_8021AD, 1), (ETH_P_8021Q, 2), (ETH_P_8021Q, 3)],
        &udp(1, 2, b"3"),
    );
    vec![
        untouched(
            "ttl 1 goes to the kernel",
            v4_udp(Ipv4 {
                ttl: 1,
                ..Ipv4::new(IPPROTO_UDP)
            }),
            Reason::TtlExpired,
        ),
        untouched(
            "ttl 0 goes to the kernel",
            v4_udp(Ipv4 {
                ttl: 0,
                ..Ipv4::new(IPPROTO_UDP)
            }),
            Reason::TtlExpired,
        ),
        untouched(
            "hop limit 1 goes to the kernel",
            Ipv6 {
                hop_limit: 1,
                ..Ipv6::new(IPPROTO_TCP)
            }
            .frame(LB_MAC, PEER_MAC, &[], &tcp(1, 2)),
            Reason::TtlExpired,
        ),
        untouched(
            "ipv4 no route",
            v4_udp(ipv4_to([10, 9, 0, 1], IPPROTO_UDP)),
            Reason::NoRoute,
        ),
        untouched(
            "ipv6 no route",
            Ipv6 {
                dst: [0x20, 1, 0x0d, 0xb8, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
                ..Ipv6::new(IPPROTO_UDP)
            }
            .frame(LB_MAC, PEER_MAC, &[], &udp(1, 2, b"x")),
            Reason::NoRoute,
        ),
        untouched("arp is not ip", arp, Reason::NotIp),
        untouched(
            "broadcast goes to the kernel",
            Ipv4::new(IPPROTO_UDP).frame([0xff; 6], PEER_MAC, &[], &udp(1, 2, b"b")),
            Reason::NotUnicast,
        ),
        untouched(
            "ipv6 multicast goes to the kernel",
            Ipv6::new(IPPROTO_UDP).frame([0x33, 0x33, 0, 0, 0, 1], PEER_MAC, &[], &udp(1, 2, b"m")),
            Reason::NotUnicast,
        ),
        untouched(
            "group with no usable next hop",
            v4_udp(ipv4_to([10, 3, 0, 1], IPPROTO_UDP)),
            Reason::NoNextHop,
        ),
        untouched("three vlan tags", three_tags, Reason::Unsupported),
        untouched("ipv6 jumbogram", jumbo, Reason::Unsupported),
        untouched(
            "ipv4 version 6 in an ipv4 frame",
            bad_version,
            Reason::L3Malformed,
        ),
        untouched("ipv4 ihl 4", bad_ihl, Reason::L3Malformed),
        untouched(
            "udp header cut short inside the datagram",
            Ipv4::new(IPPROTO_UDP).frame(LB_MAC, PEER_MAC, &[], &udp(1, 2, &[])[..6]),
            Reason::L4Truncated,
        ),
        untouched(
            "tcp header cut short inside the datagram",
            Ipv6::new(IPPROTO_TCP).frame(LB_MAC, PEER_MAC, &[], &tcp(1, 2)[..12]),
            Reason::L4Truncated,
        ),
        untouched(
            "bth cut short inside the datagram",
            Ipv4::new(IPPROTO_UDP).frame(
                LB_MAC,
                PEER_MAC,
                &[],
                &udp(1, ROCEV2_UDP_PORT, &bth(0x0a, 1, 1, &[])[..8]),
            ),
            Reason::L4Truncated,
        ),
    ]
}

/// Every prefix of a full frame, cut at each header boundary and one byte
/// either side: a tag cut short is an L2 drop, anything shorter than the
/// IPv4/IPv6 total length an L3 drop (as `ip_rcv` would).
fn truncation_fixtures() -> Vec<Fixture> {
    let qinq = [(ETH_P_8021AD, 20), (ETH_P_8021Q, 30)];
    let v4 = Ipv4::new(IPPROTO_UDP).frame(LB_MAC, PEER_MAC, &qinq, &rocev2(0x0a, 5));
    let v6 = Ipv6::new(0).frame(
        LB_MAC,
        PEER_MAC,
        &[],
        &[ipv6_ext(IPPROTO_TCP, 0), tcp(1, 2)].concat(),
    );
    let mut fixtures = Vec::new();
    // QinQ IPv4 RoCEv2: Ethernet 14, tags to 22, IPv4 to 42, UDP to 50, BTH to 62.
    for boundary in [18, 22, 42, 50, 62] {
        for len in [boundary - 1, boundary] {
            let reason = if len < 22 {
                Reason::L2Truncated
            } else {
                Reason::L3Malformed
            };
            fixtures.push(untouched(
                format!("qinq ipv4 rocev2 cut to {len} bytes"),
                v4[..len].to_vec(),
                reason,
            ));
        }
    }
    // IPv6: Ethernet 14, IPv6 to 54, hop-by-hop to 62, TCP to 82.
    for boundary in [15, 54, 62, 82] {
        for len in [boundary - 1, boundary]
            .into_iter()
            .filter(|&len| len < v6.len())
        {
            fixtures.push(untouched(
                format!("ipv6 ext tcp cut to {len} bytes"),
                v6[..len].to_vec(),
                Reason::L3Malformed,
            ));
        }
    }
    fixtures
}

#[test]
fn forwarding_fixtures_rewrite_and_redirect() {
    let mut h = Harness::new();
    let fixtures = forwarding_fixtures();
    for fixture in &fixtures {
        h.check(fixture);
    }
    eprintln!("{} forwarding fixtures passed", fixtures.len());
}

#[test]
fn pass_and_drop_fixtures_leave_the_packet_alone() {
    let mut h = Harness::new();
    let fixtures = pass_and_drop_fixtures();
    for fixture in &fixtures {
        h.check(fixture);
    }
    eprintln!("{} pass/drop fixtures passed", fixtures.len());
}

#[test]
fn truncated_frames_at_every_header_boundary() {
    let mut h = Harness::new();
    let fixtures = truncation_fixtures();
    for fixture in &fixtures {
        h.check(fixture);
    }
    eprintln!("{} truncation fixtures passed", fixtures.len());
}

/// Next hop a frame left for, from its destination MAC.
fn nexthop_of(h: &Harness, out: &[u8]) -> usize {
    h.tables
        .nexthops
        .iter()
        .position(|n| n.dst_mac == out[..6])
        .expect("known next hop")
}

fn spread(h: &mut Harness, dst: [u8; 4]) -> Vec<usize> {
    let mut per_nexthop = vec![0usize; h.tables.nexthops.len()];
    for qp in 0..256u32 {
        let frame =
            ipv4_to(dst, IPPROTO_UDP).frame(LB_MAC, PEER_MAC, &[], &rocev2(0x0a, 0x1000 + qp));
        let (verdict, out) = h.run(&frame);
        assert_eq!(verdict, Reason::Forwarded.xdp_action());
        per_nexthop[nexthop_of(h, &out)] += 1;
    }
    per_nexthop
}

#[test]
fn destination_qp_spreads_one_five_tuple() {
    let mut h = Harness::new();
    let spines = spread(&mut h, [10, 1, 0, 2]);
    let with_qp: Vec<usize> = h.tables.groups[h.group("spines")]
        .members
        .iter()
        .map(|&id| spines[id as usize])
        .collect();
    eprintln!("256 QPs of one RoCEv2 five-tuple, hash with rdma_bth_dest_qp: {with_qp:?}");
    for (i, count) in with_qp.iter().enumerate() {
        assert!(
            (40..=88).contains(count),
            "next hop {i} got {count} of 256: {with_qp:?}"
        );
    }
    // Kernel counters agree with what left.
    for (&id, &count) in h.tables.groups[h.group("spines")]
        .members
        .iter()
        .zip(&with_qp)
    {
        assert_eq!(h.dp.nexthop_stats(id).expect("stats").packets, count as u64);
    }

    let five = spread(&mut h, [10, 4, 0, 2]);
    let without_qp: Vec<usize> = h.tables.groups[h.group("five-tuple")]
        .members
        .iter()
        .map(|&id| five[id as usize])
        .collect();
    eprintln!("same packets, hash without rdma_bth_dest_qp: {without_qp:?}");
    assert_eq!(
        without_qp.iter().filter(|&&c| c == 256).count(),
        1,
        "{without_qp:?}"
    );
    assert_eq!(without_qp.iter().sum::<usize>(), 256);
}

#[test]
fn every_reason_has_a_fixture() {
    let all: Vec<Fixture> = [
        forwarding_fixtures(),
        pass_and_drop_fixtures(),
        truncation_fixtures(),
    ]
    .into_iter()
    .flatten()
    .collect();
    for reason in Reason::ALL {
        assert!(
            all.iter().any(|f| f.reason == reason),
            "no fixture for {}",
            reason.name()
        );
    }
    eprintln!("{} golden fixtures in total", all.len());
}

// ---------------------------------------------------------------------------
// Flowlet and per-packet modes. Flowlet state, recent loads and the spray
// cursor are per CPU, and BPF_PROG_TEST_RUN runs on the calling CPU: each
// test pins itself to one CPU so that every run sees the same state.

fn pin_to_one_cpu() {
    let mut set = nix::sched::CpuSet::new();
    set.set(0).expect("cpu 0");
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).expect("pin to cpu 0");
}

const PAYLOAD: usize = 1000;

/// A UDP packet of flow `src_port` to `dst`, and its L4 bytes.
fn udp_packet(dst: [u8; 4], src_port: u16) -> (Ipv4, Vec<u8>) {
    (
        ipv4_to(dst, IPPROTO_UDP),
        udp(src_port, 9000, &[0x5a; PAYLOAD]),
    )
}

/// A RoCEv2 packet of `opcode` on QP `qp` to `dst`; `psn` tells packets
/// apart in the output.
fn roce_packet(dst: [u8; 4], opcode: u8, qp: u32, psn: u32) -> (Ipv4, Vec<u8>) {
    (
        ipv4_to(dst, IPPROTO_UDP),
        udp(0xc001, ROCEV2_UDP_PORT, &bth(opcode, qp, psn, &[0xab; 64])),
    )
}

impl Harness {
    /// Runs one packet, checks it was forwarded with exactly the bytes a
    /// next hop would get, and returns that next hop's id.
    fn forward(&mut self, name: &str, (ip, l4): &(Ipv4, Vec<u8>)) -> u32 {
        let frame = ip.frame(LB_MAC, PEER_MAC, &[], l4);
        let (verdict, out) = self.run(&frame);
        assert_eq!(verdict, Reason::Forwarded.xdp_action(), "{name}: verdict");
        let id = nexthop_of(self, &out) as u32;
        let expected = forwarded_v4(ip, l4, &self.tables.nexthops[id as usize]);
        assert_eq!(hex(&out), hex(&expected), "{name}: output bytes");
        id
    }

    fn members(&self, group: &str) -> Vec<u32> {
        self.tables.groups[self.group(group)].members.clone()
    }

    fn group_stats(&self, group: &str) -> lb_common::abi::GroupStats {
        let id = self.tables.groups[self.group(group)].id;
        self.dp.group_stats(id).expect("group stats")
    }

    /// Packets each member of `group` got, in member order.
    fn member_packets(&self, group: &str) -> Vec<u64> {
        self.members(group)
            .iter()
            .map(|&id| self.dp.nexthop_stats(id).expect("stats").packets)
            .collect()
    }

    /// Takes next hop `id` down the way the daemon does on link loss:
    /// flag cleared, buckets and spray sequence rewritten.
    fn take_down(&mut self, id: u32) {
        let previous = self.tables.clone();
        let nexthop = NextHop {
            flags: 0,
            ..self.tables.nexthops[id as usize]
        };
        assert!(self.tables.update_nexthop(id, nexthop));
        self.tables
            .write(&mut self.dp, Some(&previous))
            .expect("rewrite maps");
    }
}

#[test]
fn flowlet_packets_inside_the_gap_keep_their_next_hop() {
    pin_to_one_cpu();
    let mut h = Harness::new();
    let packet = udp_packet([10, 5, 0, 2], 1000);
    let frame = packet.0.frame(LB_MAC, PEER_MAC, &[], &packet.1);
    // A new flow starts where ECMP would put it...
    let first = h.forward("first packet", &packet);
    assert_eq!(first, h.predict("flowlet-sticky", &frame));
    // ...and stays there for the whole flowlet, although every other next
    // hop is idle and its own is the only loaded one.
    for i in 1..40 {
        assert_eq!(h.forward(&format!("packet {i}"), &packet), first);
    }
    let stats = h.group_stats("flowlet-sticky");
    assert_eq!(
        (
            stats.new_flowlets,
            stats.flowlet_moves,
            stats.pinned,
            stats.sprayed
        ),
        (1, 0, 40, 0)
    );
    let per_member = h.member_packets("flowlet-sticky");
    assert_eq!(per_member.iter().sum::<u64>(), 40);
    assert_eq!(
        per_member.iter().filter(|&&p| p == 40).count(),
        1,
        "{per_member:?}"
    );
}

#[test]
fn a_flowlet_after_the_gap_moves_off_a_shared_next_hop() {
    pin_to_one_cpu();
    let mut h = Harness::new();
    let dst = [10, 6, 0, 2];
    // Two flows ECMP puts on the same next hop.
    let predict = |h: &Harness, port| {
        let (ip, l4) = udp_packet(dst, port);
        h.predict("flowlet", &ip.frame(LB_MAC, PEER_MAC, &[], &l4))
    };
    let x = 2000u16;
    let shared = predict(&h, x);
    let y = (x + 1..x + 500)
        .find(|&p| predict(&h, p) == shared)
        .expect("a second flow on the same next hop");
    let (fx, fy) = (udp_packet(dst, x), udp_packet(dst, y));
    // 20 packets each, microseconds apart inside the kernel: one flowlet each.
    for (ip, l4) in [&fx, &fy] {
        let (verdict, _) = h.run_repeated(&ip.frame(LB_MAC, PEER_MAC, &[], l4), 20);
        assert_eq!(verdict, Reason::Forwarded.xdp_action());
    }
    let members = h.members("flowlet");
    let shared_slot = members.iter().position(|&id| id == shared).expect("member");
    let mut expected = vec![0; members.len()];
    expected[shared_slot] = 40;
    assert_eq!(h.member_packets("flowlet"), expected);
    let stats = h.group_stats("flowlet");
    assert_eq!((stats.new_flowlets, stats.flowlet_moves), (2, 0));

    // Past the 2 ms gap, x's next flowlet leaves the next hop it shares for
    // the first idle one; y then has its next hop to itself and stays.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let idle = *members
        .iter()
        .find(|&&id| id != shared)
        .expect("idle member");
    assert_eq!(h.forward("x after the gap", &fx), idle);
    assert_eq!(h.forward("y after the gap", &fy), shared);
    // And both keep those inside their new flowlets.
    assert_eq!(h.forward("x again", &fx), idle);
    assert_eq!(h.forward("y again", &fy), shared);
    let stats = h.group_stats("flowlet");
    assert_eq!((stats.new_flowlets, stats.flowlet_moves), (4, 1));
}

#[test]
fn down_next_hops_are_never_chosen() {
    pin_to_one_cpu();
    let mut h = Harness::new();
    let members = h.members("per-packet");
    let dst = [10, 7, 0, 2];

    // Per-packet: the spray sequence skips a next hop the daemon took down.
    h.take_down(members[1]);
    for psn in 0..300 {
        h.forward("sprayed", &roce_packet(dst, 0x0a, 0x100, psn));
    }
    assert_eq!(h.member_packets("per-packet"), [100, 0, 100, 100]);

    // A next hop that went down before the daemon rewrote the sequence is
    // still skipped: the least loaded usable one stands in.
    let id = members[2];
    let nexthop = NextHop {
        flags: 0,
        ..h.tables.nexthops[id as usize]
    };
    h.dp.set_nexthop(id, nexthop).expect("set next hop");
    for psn in 300..390 {
        h.forward("sprayed", &roce_packet(dst, 0x0a, 0x100, psn));
    }
    let after = h.member_packets("per-packet");
    assert_eq!((after[1], after[2]), (0, 100), "{after:?}");
    assert_eq!(after.iter().sum::<u64>(), 390);

    // Flowlet: a flow whose next hop goes down moves at once, gap or not.
    let packet = udp_packet([10, 5, 0, 9], 1000);
    let first = h.forward("first", &packet);
    h.take_down(first);
    let moved = h.forward("after its next hop went down", &packet);
    assert_ne!(moved, first);
    assert_eq!(h.forward("next", &packet), moved);
    let stats = h.group_stats("flowlet-sticky");
    assert_eq!((stats.new_flowlets, stats.flowlet_moves), (2, 1));
}

#[test]
fn only_self_contained_packets_are_sprayed() {
    use lb_common::packet::roce::*;
    pin_to_one_cpu();
    let mut h = Harness::new();
    // One QP: a multi-packet WRITE with single-packet messages between its
    // packets, as a NIC interleaves a QP's work requests.
    let mut sequence = vec![WRITE_FIRST];
    sequence.extend([WRITE_MIDDLE; 6]);
    sequence.push(WRITE_LAST);
    let only = [WRITE_ONLY, SEND_ONLY, WRITE_ONLY_IMM, ACKNOWLEDGE];
    let packets: Vec<u8> = sequence
        .iter()
        .zip(only.iter().cycle())
        .flat_map(|(&ordered, &single)| [ordered, single])
        .collect();

    for (group, dst) in [("per-packet", [10, 7, 0, 3]), ("spray-all", [10, 8, 0, 3])] {
        let members = h.members(group);
        let mut ordered_to = Vec::new();
        let mut single_to = vec![0u64; members.len()];
        for (psn, &opcode) in (0u32..).zip(&packets) {
            let id = h.forward(
                &format!("{group} opcode {opcode:#x}"),
                &roce_packet(dst, opcode, 0x200, psn),
            );
            let slot = members.iter().position(|&m| m == id).expect("member");
            if self_contained(opcode) {
                single_to[slot] += 1;
            } else {
                ordered_to.push(slot);
            }
        }
        let stats = h.group_stats(group);
        eprintln!(
            "{group}: FIRST/MIDDLE/LAST went to slots {ordered_to:?}, ONLY/ACK to {single_to:?}"
        );
        if group == "per-packet" {
            // ONLY and ACK packets spread evenly; the message's own
            // packets all stay on one next hop.
            assert_eq!(single_to, [2, 2, 2, 2]);
            assert!(
                ordered_to.iter().all(|&s| s == ordered_to[0]),
                "{ordered_to:?}"
            );
            assert_eq!((stats.sprayed, stats.pinned), (8, 8));
        } else {
            // Everything is sprayed, the message's packets too.
            let mut all = single_to.clone();
            for &slot in &ordered_to {
                all[slot] += 1;
            }
            assert_eq!(all, [4, 4, 4, 4]);
            assert!(
                ordered_to.iter().any(|&s| s != ordered_to[0]),
                "{ordered_to:?}"
            );
            assert_eq!((stats.sprayed, stats.pinned), (16, 0));
        }
    }

    // Non-RoCE traffic in a per-packet group follows flowlets.
    let tcp_packet = (ipv4_to([10, 7, 0, 4], IPPROTO_TCP), tcp(40000, 443));
    let first = h.forward("tcp", &tcp_packet);
    for _ in 0..7 {
        assert_eq!(h.forward("tcp", &tcp_packet), first);
    }
    assert_eq!(h.group_stats("per-packet").pinned, 16);
}
