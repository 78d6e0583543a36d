//! The real program, loaded and programmed the way the daemon does it,
//! with the checks every golden test makes on what comes out.

use aya::programs::{TestRun, TestRunOptions};
use fabriclb::{
    config,
    dataplane::Dataplane,
    dataplane::tables::{self, Tables},
};
use lb_common::{
    abi::{GroupStats, NextHop},
    limits::FLOWLET_TABLE_DEFAULT,
    packet::craft::Ipv4,
    verdict::Reason,
};

use crate::expected;
use crate::fixtures::Fixture;
use crate::packets::PEER_MAC;
use crate::switch::{self, LB_MAC};

pub struct Harness {
    pub dp: Dataplane,
    pub tables: Tables,
    config: config::Config,
}

impl Harness {
    /// Loads the program and programs it with the switch config through
    /// the daemon's own tables ([`Harness::with_config`]); the "down"
    /// group's only next hop is unusable.
    pub fn new() -> Self {
        let mut harness = Self::with_config(&switch::config());
        for id in harness.members("down") {
            harness.take_down(id);
        }
        harness
    }

    /// Loads the program and programs it with the config `toml`.
    pub fn with_config(toml: &str) -> Self {
        let config = config::parse(toml, "golden.toml".as_ref()).expect("golden config");
        let tables = Tables::build(&config, None, |spec| {
            tables::static_nexthop(spec, 1, LB_MAC)
        })
        .expect("tables");
        let mut dp = Dataplane::load(FLOWLET_TABLE_DEFAULT).expect("load XDP program (needs root)");
        tables.write(&mut dp, None).expect("program maps");
        Self { dp, tables, config }
    }

    /// A harness for tests of per-CPU state: see [`pin_to_one_cpu`].
    pub fn on_one_cpu() -> Self {
        pin_to_one_cpu();
        Self::new()
    }

    fn group(&self, name: &str) -> usize {
        self.config
            .groups
            .iter()
            .position(|g| g.name == name)
            .expect("group")
    }

    /// The next hop the host predicts for `frame` in `group`.
    pub fn predict(&self, group: &str, frame: &[u8]) -> u32 {
        expected::nexthop(&self.tables.groups[self.group(group)], frame)
    }

    /// Makes `addrs` the box's own addresses the way the daemon does when
    /// they change: only the route entries that differ are written.
    pub fn set_local(&mut self, addrs: &[&str]) {
        let previous = self.tables.clone();
        let addrs = addrs.iter().map(|a| a.parse().expect("address")).collect();
        assert_eq!(self.tables.set_local(&addrs), 0, "local addresses left out");
        self.tables
            .write(&mut self.dp, Some(&previous))
            .expect("rewrite maps");
    }

    /// Moves to the config `toml` the way the daemon's reload does: new
    /// tables over the old ids, only what differs written.
    pub fn reload(&mut self, toml: &str) {
        let config = config::parse(toml, "golden.toml".as_ref()).expect("golden config");
        let tables = Tables::build(&config, Some(&self.tables), |spec| {
            tables::static_nexthop(spec, 1, LB_MAC)
        })
        .expect("tables");
        tables
            .write(&mut self.dp, Some(&self.tables))
            .expect("rewrite maps");
        self.tables = tables;
        self.config = config;
    }

    /// Runs one frame; returns the verdict and the output frame.
    pub fn run(&mut self, frame: &[u8]) -> (u32, Vec<u8>) {
        self.run_repeated(frame, 1)
    }

    /// Runs `repeat` copies back to back in the kernel (the program sees
    /// its own output each time, so the TTL drops by `repeat`); returns the
    /// last verdict and output frame.
    pub fn run_repeated(&mut self, frame: &[u8], repeat: u32) -> (u32, Vec<u8>) {
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
    pub fn check(&mut self, fixture: &Fixture) {
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

    /// Runs one packet, checks it was forwarded with exactly the bytes a
    /// next hop would get, and returns that next hop's id.
    pub fn forward(&mut self, name: &str, (ip, l4): &(Ipv4, Vec<u8>)) -> u32 {
        let frame = ip.frame(LB_MAC, PEER_MAC, &[], l4);
        let (verdict, out) = self.run(&frame);
        assert_eq!(verdict, Reason::Forwarded.xdp_action(), "{name}: verdict");
        let id = nexthop_of(self, &out) as u32;
        let expected =
            expected::forwarded(&ip.clone().into(), l4, &self.tables.nexthops[id as usize]);
        assert_eq!(hex(&out), hex(&expected), "{name}: output bytes");
        id
    }

    pub fn members(&self, group: &str) -> Vec<u32> {
        self.tables.groups[self.group(group)].members.clone()
    }

    pub fn group_stats(&self, group: &str) -> GroupStats {
        let id = self.tables.groups[self.group(group)].id;
        self.dp.group_stats(id).expect("group stats")
    }

    /// Packets each member of `group` got, in member order.
    pub fn member_packets(&self, group: &str) -> Vec<u64> {
        self.members(group)
            .iter()
            .map(|&id| self.dp.nexthop_stats(id).expect("stats").packets)
            .collect()
    }

    /// Next hop `id` as link loss leaves it: the usable flag cleared.
    pub fn unusable(&self, id: u32) -> NextHop {
        NextHop {
            flags: 0,
            ..self.tables.nexthops[id as usize]
        }
    }

    /// Takes next hop `id` down the way the daemon does on link loss:
    /// flag cleared, buckets and spray sequence rewritten.
    pub fn take_down(&mut self, id: u32) {
        let previous = self.tables.clone();
        assert!(self.tables.update_nexthop(id, self.unusable(id)));
        self.tables
            .write(&mut self.dp, Some(&previous))
            .expect("rewrite maps");
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Next hop a frame left for, from its destination MAC.
pub fn nexthop_of(h: &Harness, out: &[u8]) -> usize {
    h.tables
        .nexthops
        .iter()
        .position(|n| n.dst_mac == out[..6])
        .expect("known next hop")
}

/// Flowlet state, recent loads and the spray cursor are per CPU, and
/// BPF_PROG_TEST_RUN runs on the calling CPU: a test that depends on that
/// state pins itself to one CPU so that every run sees the same state.
fn pin_to_one_cpu() {
    let mut set = nix::sched::CpuSet::new();
    set.set(0).expect("cpu 0");
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).expect("pin to cpu 0");
}
