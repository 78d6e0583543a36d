//! The real program, loaded and programmed the way the daemon does it,
//! with the checks every golden test makes on what comes out. The daemon's
//! tables only program the maps and say which map slot holds which group
//! member; what a frame must become comes from `expected` and `switch`.

use aya::maps::{MapData, RingBuf};
use aya::programs::{TestRun, TestRunOptions};
use fabriclb::{
    config,
    dataplane::tables::route_table::{Family, Level},
    dataplane::tables::{self, Tables},
    dataplane::{Dataplane, DataplaneError, LoadRow},
};
use lb_common::{
    abi::{
        GroupEntry, GroupStats, NEXTHOP_USABLE, NextHop, NextHopStats, PortMacs,
        events::{EventConfig, FlowEvent},
    },
    limits::FLOWLET_TABLE_DEFAULT,
    packet::{craft::Ipv4, parse::parse},
    select::{
        flowlet::{FlowletState, flowlet_index},
        hash::{HashFields, flow_hash},
    },
    verdict::Reason,
};

use crate::expected;
use crate::fixtures::Fixture;
use crate::packets::PEER_MAC;
use crate::switch::{self, GROUPS, LB_MAC};

/// The ifindex a test run's packets come in on: the loopback's.
pub const LOOPBACK: u32 = 1;

/// What the daemon writes for a port it attaches to, for the port test
/// runs come in on (the loopback): frames to [`LB_MAC`] are for the box,
/// and to `dlb` unless it is all zeros (`switch.dlb_mac`).
pub fn take_frames_to_lb_mac(dp: &mut Dataplane, dlb: [u8; 6]) {
    dp.set_port_macs(PortMacs {
        ifindex: LOOPBACK,
        own: LB_MAC,
        dlb,
    })
    .expect("port MACs");
}

/// The production object, for a harness with maps sized otherwise.
static OBJECT: &[u8] = aya::include_bytes_aligned!(env!("FABRICLB_BPF_OBJECT"));

pub struct Harness {
    pub dp: Dataplane,
    pub tables: Tables,
}

impl Harness {
    /// Loads the program and programs it with the switch config through
    /// the daemon's own tables ([`Harness::with_config`]); checks that
    /// every group member's map entry holds the MAC and VLAN `switch` gives
    /// it.
    pub fn new() -> Self {
        let harness = Self::with_config(&switch::config());
        for group in &GROUPS {
            for slot in 0..group.macs.len() {
                let nh = harness.nexthop(group.name, slot);
                assert_eq!(nh.dst_mac, group.mac(slot), "{} {slot}: MAC", group.name);
                assert_eq!(
                    nh.vlan,
                    group.vlan.unwrap_or(0),
                    "{} {slot}: VLAN",
                    group.name
                );
            }
        }
        harness
    }

    /// Loads the program and programs it with the config `toml`.
    pub fn with_config(toml: &str) -> Self {
        let dp = Dataplane::load(FLOWLET_TABLE_DEFAULT).expect("load XDP program (needs root)");
        Self::programmed(dp, toml)
    }

    /// [`Harness::with_config`] with the production object's maps sized as
    /// `max_entries` says.
    pub fn with_sized_maps(toml: &str, max_entries: &[(&str, u32)]) -> Self {
        let dp = Dataplane::load_sized(OBJECT, max_entries).expect("load XDP program (needs root)");
        Self::programmed(dp, toml)
    }

    fn programmed(mut dp: Dataplane, toml: &str) -> Self {
        let config = config::parse(toml, "golden.toml".as_ref()).expect("golden config");
        let tables = Tables::build(&config, None, |spec| {
            tables::static_nexthop(spec, 1, LB_MAC)
        })
        .expect("tables");
        tables.write(&mut dp, None).expect("program maps");
        take_frames_to_lb_mac(&mut dp, [0; 6]);
        Self { dp, tables }
    }

    /// Raw first-level entry `index` of `family`'s route table.
    pub fn route_first(&self, family: Family, index: u32) -> u32 {
        self.dp
            .route_entry(family, Level::First, index)
            .expect("read")
            .expect("in range")
    }

    /// A harness for tests of per-CPU state: see [`pin_to_one_cpu`].
    pub fn on_one_cpu() -> Self {
        pin_to_one_cpu();
        Self::new()
    }

    fn group_table(&self, name: &str) -> &tables::GroupTable {
        self.tables
            .groups
            .iter()
            .find(|g| g.name == name)
            .expect("group")
    }

    /// The map id of the next hop in `slot` of `group`.
    pub fn id(&self, group: &str, slot: usize) -> u32 {
        self.group_table(group).members[slot]
    }

    /// The next hop in `slot` of `group` as the data plane holds it.
    fn nexthop(&self, group: &str, slot: usize) -> NextHop {
        self.dp
            .maps
            .nexthops
            .get(&self.id(group, slot), 0)
            .expect("next hop entry")
    }

    /// The data plane's flow events from now on, each CPU sending as
    /// `config` says.
    pub fn flow_events(&mut self, config: EventConfig) -> RingBuf<MapData> {
        self.dp.configure_events(config).expect("events configured");
        self.dp.take_flow_events().expect("the ring")
    }

    /// The events in `ring` now.
    pub fn events_in(ring: &mut RingBuf<MapData>) -> Vec<FlowEvent> {
        let mut events = Vec::new();
        while let Some(item) = ring.next() {
            assert_eq!(item.len(), size_of::<FlowEvent>(), "an event's size");
            // SAFETY: the program writes whole `FlowEvent`s, plain integers.
            events.push(unsafe { std::ptr::read_unaligned(item.as_ptr().cast()) });
        }
        events
    }

    /// The group id of `group`.
    pub fn group_id(&self, group: &str) -> u32 {
        self.group_table(group).id
    }

    /// Clears the usable flag of the next hop in `slot` of `group` and
    /// nothing else: buckets and spray sequences still name it.
    pub fn clear_usable(&mut self, group: &str, slot: usize) {
        self.set_flags(group, slot, 0);
    }

    /// Tells every CPU that the other CPUs' flows put `bytes` on the next
    /// hop in `slot` of `group`, as the daemon does.
    pub fn set_peer_load(&mut self, group: &str, slot: usize, bytes: u64) {
        let cpus = aya::util::nr_cpus().expect("CPUs");
        let id = self.id(group, slot);
        self.dp
            .set_peer_loads(LoadRow::Nexthop(id), vec![bytes; cpus])
            .expect("set peer loads");
    }

    /// Sets the usable flag [`Harness::clear_usable`] cleared.
    pub fn restore_usable(&mut self, group: &str, slot: usize) {
        self.set_flags(group, slot, NEXTHOP_USABLE);
    }

    fn set_flags(&mut self, group: &str, slot: usize, flags: u16) {
        let id = self.id(group, slot);
        let nh = NextHop {
            flags,
            ..self.nexthop(group, slot)
        };
        self.dp.set_nexthop(id, nh).expect("set next hop");
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
        let tables = self.tables_for(toml);
        tables
            .write(&mut self.dp, Some(&self.tables))
            .expect("rewrite maps");
        self.tables = tables;
    }

    /// What the daemon's tick does once an ECMP group's changed overrides
    /// waited their gap: flips them.
    pub fn flip_pins(&mut self) {
        let later = std::time::Instant::now() + std::time::Duration::from_secs(3600);
        self.tables
            .flip_pins(&mut self.dp, later)
            .expect("flip overrides");
    }

    /// The daemon's undo of a reload to `toml` whose write failed before
    /// it wrote anything: the running tables written over the new ones.
    pub fn undo_unwritten_reload(&mut self, toml: &str) -> Result<(), DataplaneError> {
        let unwritten = self.tables_for(toml);
        self.tables.write(&mut self.dp, Some(&unwritten))
    }

    fn tables_for(&self, toml: &str) -> Tables {
        let config = config::parse(toml, "golden.toml".as_ref()).expect("golden config");
        Tables::build(&config, Some(&self.tables), |spec| {
            tables::static_nexthop(spec, 1, LB_MAC)
        })
        .expect("tables")
    }

    /// Runs one frame; returns the verdict and the output frame.
    pub fn run(&mut self, frame: &[u8]) -> (u32, Vec<u8>) {
        self.run_in_kernel(frame, 1)
    }

    /// Runs `frame` once, then its output `repeat - 1` times back to back
    /// in the kernel (the program sees its own output each time, so the
    /// TTL drops by `repeat`); returns the last verdict and output frame.
    /// The output is addressed to the next hop, which the port takes as
    /// its DLB MAC for the runs.
    pub fn run_repeated(&mut self, frame: &[u8], repeat: u32) -> (u32, Vec<u8>) {
        let first = self.run_in_kernel(frame, 1);
        if repeat <= 1 || first.0 != Reason::Forwarded.xdp_action() {
            return first;
        }
        let to: [u8; 6] = first.1[..6].try_into().expect("a MAC");
        self.set_dlb(to);
        let last = self.run_in_kernel(&first.1, repeat - 1);
        self.set_dlb([0; 6]);
        last
    }

    /// The loopback's DLB MAC, as the daemon writes `switch.dlb_mac`.
    pub fn set_dlb(&mut self, dlb: [u8; 6]) {
        take_frames_to_lb_mac(&mut self.dp, dlb);
    }

    fn run_in_kernel(&mut self, frame: &[u8], repeat: u32) -> (u32, Vec<u8>) {
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

    /// Every group member's counters by group and slot, in `switch` order.
    fn all_nexthop_stats(&self) -> Vec<((&'static str, usize), NextHopStats)> {
        GROUPS
            .iter()
            .flat_map(|g| (0..g.macs.len()).map(move |slot| (g.name, slot)))
            .map(|(group, slot)| {
                let stats = self.dp.nexthop_stats(self.id(group, slot)).expect("stats");
                ((group, slot), stats)
            })
            .collect()
    }

    /// Runs a fixture and checks verdict, bytes and counters: its verdict
    /// counted once, with the bytes of the frame the program left, and no
    /// other; its next hop (if forwarded) counting one packet of its length
    /// and every other next hop nothing.
    pub fn check(&mut self, fixture: &Fixture) {
        let name = &fixture.name;
        let before = self.dp.verdict_totals().expect("verdicts");
        let nh_before = self.all_nexthop_stats();

        let (verdict, out) = self.run(&fixture.input);

        assert_eq!(verdict, fixture.reason.xdp_action(), "{name}: verdict");
        let (expected, to) = match &fixture.to {
            Some(to) => {
                let mac = switch::group(to.group).mac(to.member);
                assert_eq!(to.frame[..6], mac, "{name}: fixture leaves for another MAC");
                (&to.frame, Some((to.group, to.member)))
            }
            None => (&fixture.input, None),
        };
        assert_eq!(hex(&out), hex(expected), "{name}: output bytes");
        let after = self.dp.verdict_totals().expect("verdicts");
        for reason in Reason::ALL {
            let (after, before) = (after[reason as usize], before[reason as usize]);
            let delta = (after.packets - before.packets, after.bytes - before.bytes);
            let want = if reason == fixture.reason {
                (1, expected.len() as u64)
            } else {
                (0, 0)
            };
            assert_eq!(
                delta,
                want,
                "{name}: packets and bytes of {}",
                reason.name()
            );
        }
        for ((nexthop, before), (_, after)) in nh_before.iter().zip(self.all_nexthop_stats()) {
            let want = if to == Some(*nexthop) {
                (1, fixture.input.len() as u64)
            } else {
                (0, 0)
            };
            assert_eq!(
                (after.packets - before.packets, after.bytes - before.bytes),
                want,
                "{name}: packets and bytes of next hop {nexthop:?}"
            );
            assert_eq!(after.sprayed, before.sprayed, "{name}: {nexthop:?} sprayed");
        }
    }

    /// Runs one packet, checks it was forwarded to a member of `group` with
    /// exactly the bytes etherparse makes of it for that member, and
    /// returns the member's slot.
    pub fn forward(&mut self, group: &str, name: &str, (ip, l4): &(Ipv4, Vec<u8>)) -> usize {
        let frame = ip.frame(LB_MAC, PEER_MAC, &[], l4);
        let (verdict, out) = self.run(&frame);
        assert_eq!(verdict, Reason::Forwarded.xdp_action(), "{name}: verdict");
        let slot = self.slot_of(group, &out);
        let spec = switch::group(group);
        let expected = expected::forwarded(&frame, spec.mac(slot), spec.vlan);
        assert_eq!(hex(&out), hex(&expected), "{name}: output bytes");
        slot
    }

    /// The slot of the member of `group` a frame left for, by its
    /// destination MAC.
    pub fn slot_of(&self, group: &str, out: &[u8]) -> usize {
        switch::group(group)
            .slot_of(&out[..6])
            .unwrap_or_else(|| panic!("left for {:02x?}, not a member of {group}", &out[..6]))
    }

    /// Ends every drain as the daemon does once it is due.
    pub fn end_drains(&mut self) -> Vec<String> {
        let due = std::time::Instant::now() + std::time::Duration::from_secs(3600);
        self.tables
            .end_drains(&mut self.dp, due)
            .expect("end drains")
    }

    /// `group`'s entry as the data plane holds it.
    pub fn group_entry(&self, group: &str) -> GroupEntry {
        let id = self.group_table(group).id;
        self.dp.maps.groups.get(&id, 0).expect("group entry")
    }

    /// The flowlet table entry a frame of `group` uses, as the program
    /// computes it.
    pub fn flowlet_index(&self, group: &str, frame: &[u8]) -> u32 {
        let entry = self.group_entry(group);
        let flow = parse(frame).expect("parsable frame").flow;
        let hash = flow_hash(entry.hash_seed, &flow, HashFields(entry.hash_fields));
        let size = self.dp.maps.flowlet_capacity().expect("flowlet table size");
        flowlet_index(self.group_table(group).id, hash, size)
    }

    /// Flowlet table entry `index` on the CPU tests pin themselves to.
    pub fn flowlet_entry(&self, index: u32) -> FlowletState {
        self.dp.maps.flowlets.get(&index, 0).expect("flowlet entry")[0]
    }

    pub fn group_stats(&self, group: &str) -> GroupStats {
        self.dp
            .group_stats(self.group_table(group).id)
            .expect("group stats")
    }

    /// Packets each member of `group` got, in slot order.
    pub fn member_packets(&self, group: &str) -> Vec<u64> {
        (0..switch::group(group).macs.len())
            .map(|slot| {
                let id = self.id(group, slot);
                self.dp.nexthop_stats(id).expect("stats").packets
            })
            .collect()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Flowlet state, recent loads and the spray cursor are per CPU, and
/// BPF_PROG_TEST_RUN runs on the calling CPU: a test that depends on that
/// state pins itself to one CPU so that every run sees the same state.
pub fn pin_to_one_cpu() {
    pin_to_cpu(0);
}

/// Runs the calling thread, and so its test runs, on CPU `cpu` alone.
pub fn pin_to_cpu(cpu: usize) {
    let mut set = nix::sched::CpuSet::new();
    set.set(cpu).expect("a CPU number");
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
        .unwrap_or_else(|e| panic!("pin to CPU {cpu}: {e}"));
}
