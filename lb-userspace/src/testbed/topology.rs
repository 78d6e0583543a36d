//! A leaf-spine fabric in network namespaces, for tests, the demo and the
//! benchmarks: N sender hosts, the leaf running fabriclb on its host-facing
//! ports, S spines forwarding with the kernel, a far leaf and N receivers.
//!
//! ```text
//!  h1 ─┐        ┌─ s1 ─┐         ┌─ r1
//!  h2 ─┼─ leaf ─┼─ s2 ─┼─ fleaf ─┼─ r2
//!  .. ─┘        └─ sS ─┘         └─ ..
//! ```
//!
//! Addresses come from 198.18.0.0/15 (RFC 2544's benchmarking range) and
//! exist only inside the testbed's namespaces: host i is 198.18.(100+i).1,
//! receiver i 198.19.(100+i).1. Spine links toward the far leaf can be
//! rate-limited with TBF so queues build for real. Teardown deletes every
//! namespace (and with them every veth); it runs on drop, so also after a
//! failed assertion, unless the testbed is [`Testbed::keep`]t.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::IoSliceMut;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use lb_common::verdict::Reason;
use nix::sched::{CloneFlags, setns};
use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg, setsockopt, sockopt};

use super::sink::{Sink, SinkTotals};
use crate::metrics;
use crate::traffic;

/// The shape of a testbed.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Sender hosts, and as many receivers.
    pub hosts: usize,
    pub spines: usize,
    /// TBF rate on each spine's link to the far leaf; `None` for none.
    pub spine_rate_mbit: Option<u32>,
}

impl Default for Shape {
    fn default() -> Self {
        Self {
            hosts: 4,
            spines: 4,
            spine_rate_mbit: None,
        }
    }
}

/// Sender host `i` (1-based).
pub fn host_addr(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, 100 + i as u8, 1)
}

/// Receiver `i` (1-based).
pub fn receiver_addr(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(198, 19, 100 + i as u8, 1)
}

fn spine_addr(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, i as u8, 2)
}

/// Where UDP flows go in [`run_traffic`].
pub const FAR_PORT: u16 = 7471;
/// TTL the sender uses; receivers must see it minus three (leaf, spine,
/// far leaf).
pub const SENT_TTL: u8 = 64;

pub struct Testbed {
    name: String,
    shape: Shape,
    namespaces: Vec<String>,
}

impl Testbed {
    /// Builds the fabric. `name` prefixes every namespace; a stale testbed
    /// of the same name is removed first.
    pub fn up(name: &str, shape: Shape) -> Result<Self> {
        ensure!(
            (1..=16).contains(&shape.spines),
            "spines must be 1..=16, not {}",
            shape.spines
        );
        ensure!(
            (1..=32).contains(&shape.hosts),
            "hosts must be 1..=32, not {}",
            shape.hosts
        );
        remove_namespaces(name)?;
        let mut bed = Self {
            name: name.to_owned(),
            shape,
            namespaces: Vec::new(),
        };
        bed.build()
            .with_context(|| format!("building testbed {name}"))?;
        Ok(bed)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn shape(&self) -> Shape {
        self.shape
    }

    pub fn ns(&self, role: &str) -> String {
        format!("{}-{role}", self.name)
    }

    /// Leaves the namespaces in place when the testbed is dropped
    /// (`fabriclb testbed up`); `fabriclb testbed down` removes them.
    pub fn keep(mut self) {
        self.namespaces.clear();
    }

    fn build(&mut self) -> Result<()> {
        let Shape {
            hosts,
            spines,
            spine_rate_mbit,
        } = self.shape;
        let mut roles = vec!["leaf".to_owned(), "fleaf".to_owned()];
        roles.extend((1..=hosts).flat_map(|i| [format!("h{i}"), format!("r{i}")]));
        roles.extend((1..=spines).map(|i| format!("s{i}")));
        for role in &roles {
            let ns = self.ns(role);
            ip(&["netns", "add", &ns])?;
            self.namespaces.push(ns.clone());
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            // Packets cross the fabric over every spine; strict reverse-path
            // filtering would drop all but one path's.
            for key in ["all", "default"] {
                sysctl(&ns, &format!("net/ipv4/conf/{key}/rp_filter"), "0")?;
            }
        }
        let (leaf, fleaf) = (self.ns("leaf"), self.ns("fleaf"));
        sysctl(&leaf, "net/ipv4/ip_forward", "1")?;
        sysctl(&fleaf, "net/ipv4/ip_forward", "1")?;
        for i in 1..=hosts {
            let (h, r) = (self.ns(&format!("h{i}")), self.ns(&format!("r{i}")));
            let (hi, ri) = (format!("h{i}"), format!("r{i}"));
            veth(&h, "eth0", &leaf, &hi)?;
            addr(&h, "eth0", &format!("{}/24", host_addr(i)))?;
            addr(&leaf, &hi, &format!("198.18.{}.254/24", 100 + i))?;
            ip(&[
                "-n",
                &h,
                "route",
                "add",
                "default",
                "via",
                &format!("198.18.{}.254", 100 + i),
            ])?;
            // veth leaves UDP checksums to "hardware" (CHECKSUM_PARTIAL);
            // once the leaf's XDP turns the skb into a frame nobody fills
            // them in and receivers drop the datagrams. Real NICs have no
            // such gap.
            ethtool(&h, &["-K", "eth0", "tx", "off"])?;
            veth(&fleaf, &ri, &r, "eth0")?;
            addr(&fleaf, &ri, &format!("198.19.{}.254/24", 100 + i))?;
            addr(&r, "eth0", &format!("{}/24", receiver_addr(i)))?;
            ip(&[
                "-n",
                &r,
                "route",
                "add",
                "default",
                "via",
                &format!("198.19.{}.254", 100 + i),
            ])?;
        }
        for j in 1..=spines {
            let spine = self.ns(&format!("s{j}"));
            let sj = format!("s{j}");
            sysctl(&spine, "net/ipv4/ip_forward", "1")?;
            veth(&leaf, &sj, &spine, "leaf")?;
            addr(&leaf, &sj, &format!("198.18.{j}.1/24"))?;
            addr(&spine, "leaf", &format!("{}/24", spine_addr(j)))?;
            veth(&spine, "fleaf", &fleaf, &sj)?;
            addr(&spine, "fleaf", &format!("198.19.{j}.1/24"))?;
            addr(&fleaf, &sj, &format!("198.19.{j}.2/24"))?;
            sysctl(&fleaf, &format!("net/ipv4/conf/{sj}/rp_filter"), "0")?;
            ip(&[
                "-n",
                &spine,
                "route",
                "add",
                "198.19.0.0/16",
                "via",
                &format!("198.19.{j}.2"),
            ])?;
            ip(&[
                "-n",
                &spine,
                "route",
                "add",
                "198.18.0.0/16",
                "via",
                &format!("198.18.{j}.1"),
            ])?;
            if let Some(mbit) = spine_rate_mbit {
                let rate = format!("{mbit}mbit");
                ip_tc(
                    &spine,
                    &[
                        "qdisc", "add", "dev", "fleaf", "root", "tbf", "rate", &rate, "burst",
                        "64kb", "latency", "20ms",
                    ],
                )?;
            }
        }
        // The kernel's own path for what fabriclb passes up, and the
        // baseline it is measured against: multipath over every spine,
        // hashed on the five-tuple (fib_multipath_hash_policy 1).
        sysctl(&leaf, "net/ipv4/fib_multipath_hash_policy", "1")?;
        let mut multipath = vec![
            "-n".to_owned(),
            leaf.clone(),
            "route".into(),
            "add".into(),
            "198.19.0.0/16".into(),
        ];
        for j in 1..=spines {
            multipath.extend(["nexthop".into(), "via".into(), spine_addr(j).to_string()]);
        }
        ip(&multipath.iter().map(String::as_str).collect::<Vec<_>>())?;
        ip(&[
            "-n",
            &fleaf,
            "route",
            "add",
            "198.18.0.0/16",
            "via",
            "198.19.1.1",
        ])?;
        Ok(())
    }

    /// fabriclb's config for the leaf: XDP on the host ports, one group
    /// over the spines (next hops by IP, resolved from ARP) with the TOML
    /// keys `group` adds (mode, hash fields, ...; empty for defaults), the
    /// receivers' /16 routed over it.
    pub fn leaf_config(&self, group: &str) -> String {
        let interfaces: Vec<String> = (1..=self.shape.hosts)
            .map(|i| format!("\"h{i}\""))
            .collect();
        let mut text = format!(
            "[switch]\nhash_seed = 0x5eed\ninterfaces = [{}]\n\n[[group]]\nname = \"spines\"\n",
            interfaces.join(", ")
        );
        for line in group.lines().filter(|l| !l.trim().is_empty()) {
            text.push_str(line.trim());
            text.push('\n');
        }
        text.push_str("next_hops = [\n");
        for j in 1..=self.shape.spines {
            text.push_str(&format!(
                "  {{ interface = \"s{j}\", ip = \"{}\" }},\n",
                spine_addr(j)
            ));
        }
        text.push_str("]\n\n[[route]]\nprefix = \"198.19.0.0/16\"\ngroup = \"spines\"\n");
        text
    }

    /// Label of spine `j`'s next hop in fabriclb's metrics.
    pub fn spine_label(&self, j: usize) -> String {
        format!("s{j} {}", spine_addr(j))
    }

    pub fn down(&mut self) {
        for ns in self.namespaces.drain(..) {
            let _ = Command::new("ip").args(["netns", "del", &ns]).status();
        }
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        self.down();
    }
}

/// Every namespace of testbed `name`, as `ip netns list` shows them.
pub fn namespaces(name: &str) -> Result<Vec<String>> {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .context("ip netns list")?;
    let prefix = format!("{name}-");
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|ns| ns.starts_with(&prefix))
        .map(str::to_owned)
        .collect())
}

/// Removes testbed `name` when SIGINT or SIGTERM arrives, then exits as
/// the signal would have. Call it before starting other threads: they
/// inherit the blocked signals, so only the watcher thread receives them
/// and `Drop` alone never misses a Ctrl-C. (Child processes, such as the
/// daemon, start with no signals blocked and get the terminal's Ctrl-C
/// themselves.)
pub fn tear_down_on_signal(name: &str) -> Result<()> {
    use nix::sys::signal::{SigSet, Signal};
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGINT);
    signals.add(Signal::SIGTERM);
    signals.thread_block()?;
    let name = name.to_owned();
    std::thread::spawn(move || {
        if let Ok(signal) = signals.wait() {
            eprintln!("{signal}: removing testbed {name}");
            let _ = remove_namespaces(&name);
            std::process::exit(128 + signal as i32);
        }
    });
    Ok(())
}

/// Removes testbed `name` (`fabriclb testbed down`, or a stale one).
pub fn remove_namespaces(name: &str) -> Result<usize> {
    let stale = namespaces(name)?;
    for ns in &stale {
        ip(&["netns", "del", ns])?;
    }
    Ok(stale.len())
}

fn run(cmd: &mut Command) -> Result<()> {
    let output = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {cmd:?}"))?;
    if !output.status.success() {
        bail!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

fn ip(args: &[&str]) -> Result<()> {
    run(Command::new("ip").args(args))
}

fn ip_tc(ns: &str, args: &[&str]) -> Result<()> {
    run(Command::new("tc").args(["-n", ns]).args(args))
}

fn ethtool(ns: &str, args: &[&str]) -> Result<()> {
    run(Command::new("ip")
        .args(["netns", "exec", ns, "ethtool"])
        .args(args))
}

/// Link MTU: room for RoCEv2 packets of the 2048-byte IB MTU with their
/// headers, and still within what a veth takes with a (single-buffer) XDP
/// program attached, about a page. A 400G fabric would run 4096-byte RoCE
/// MTU in 9000-byte jumbo frames; XDP on veth cannot here.
pub const LINK_MTU: u32 = 3000;
/// The largest RoCE MTU that fits [`LINK_MTU`].
pub const ROCE_MTU: u32 = 2048;

fn veth(ns_a: &str, name_a: &str, ns_b: &str, name_b: &str) -> Result<()> {
    let mtu = LINK_MTU.to_string();
    ip(&[
        "-n", ns_a, "link", "add", name_a, "mtu", &mtu, "type", "veth", "peer", "name", name_b,
        "mtu", &mtu, "netns", ns_b,
    ])?;
    let ends = [(ns_a, name_a), (ns_b, name_b)];
    for (ns, name) in ends {
        ip(&["-n", ns, "link", "set", name, "up"])?;
    }
    // GRO turns on the veth's NAPI: frames redirected by XDP are only
    // accepted with it. With it, and with TSO off on the sending side (a
    // veth with TSO hands forwarded skbs to the sending CPU's backlog
    // instead), a veth queues what it receives in one FIFO, so a spine
    // whose NAPI runs on either CPU cannot reorder a flow the way no
    // switch would. (UDP is not coalesced: UDP GRO forwarding stays off.)
    // Only a running veth starts NAPI when GRO is switched on, so this
    // comes after "up".
    for (ns, name) in ends {
        ethtool(ns, &["-K", name, "gro", "on", "tso", "off"])?;
    }
    Ok(())
}

fn addr(ns: &str, dev: &str, cidr: &str) -> Result<()> {
    ip(&["-n", ns, "addr", "add", cidr, "dev", dev])
}

fn sysctl(ns: &str, key: &str, value: &str) -> Result<()> {
    let path = format!("/proc/sys/{key}");
    let value = value.to_owned();
    in_netns(ns, move || {
        std::fs::write(&path, value).with_context(|| format!("writing {path}"))
    })?
}

/// Runs `f` on a thread that has entered network namespace `ns`; sockets it
/// opens live there.
pub fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> Result<T> {
    let file =
        File::open(format!("/run/netns/{ns}")).with_context(|| format!("opening netns {ns}"))?;
    std::thread::spawn(move || -> Result<T> {
        setns(&file, CloneFlags::CLONE_NEWNET).context("setns")?;
        Ok(f())
    })
    .join()
    .map_err(|_| anyhow::anyhow!("thread in netns panicked"))?
}

/// One spine as the leaf's fabriclb counted it.
#[derive(Clone, Debug, Default)]
pub struct SpineCount {
    pub label: String,
    pub packets: u64,
    pub bytes: u64,
    /// Of `packets`, those sprayed (per-packet mode).
    pub sprayed: u64,
}

/// What the leaf's fabriclb counted, from its metrics file.
#[derive(Clone, Debug, Default)]
pub struct LeafCounters {
    pub spines: Vec<SpineCount>,
    pub forwarded: u64,
    pub passed_to_kernel: u64,
    /// The spine group's counters.
    pub new_flowlets: u64,
    pub flowlet_moves: u64,
    pub sprayed: u64,
    pub pinned: u64,
    /// The mode the group runs in.
    pub mode: Option<String>,
}

impl LeafCounters {
    pub fn from_metrics(bed: &Testbed, text: &str) -> Result<Self> {
        let spines = (1..=bed.shape.spines)
            .map(|j| {
                let label = bed.spine_label(j);
                let filter = format!("nexthop=\"{label}\"");
                let read = |metric| {
                    metrics::sample(text, metric, &filter)
                        .with_context(|| format!("no {metric} for {label}"))
                };
                Ok(SpineCount {
                    packets: read("fabriclb_nexthop_packets_total")?,
                    bytes: read("fabriclb_nexthop_bytes_total")?,
                    sprayed: read("fabriclb_nexthop_sprayed_packets_total")?,
                    label,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let count = |reason: Reason| {
            metrics::sample(
                text,
                "fabriclb_packets_total",
                &format!("\"{}\"", reason.name()),
            )
        };
        let group = |metric| metrics::sample(text, metric, "group=\"spines\"").unwrap_or(0);
        Ok(Self {
            spines,
            forwarded: count(Reason::Forwarded).unwrap_or(0),
            passed_to_kernel: Reason::ALL
                .into_iter()
                .filter(|r| *r != Reason::Forwarded)
                .filter_map(count)
                .sum(),
            new_flowlets: group("fabriclb_group_new_flowlets_total"),
            flowlet_moves: group("fabriclb_group_flowlet_moves_total"),
            sprayed: group("fabriclb_group_sprayed_packets_total"),
            pinned: group("fabriclb_group_pinned_packets_total"),
            mode: crate::config::Mode::NAMES
                .iter()
                .map(|(name, _)| *name)
                .find(|name| {
                    metrics::sample(text, "fabriclb_group_mode", &format!("mode=\"{name}\""))
                        == Some(1)
                })
                .map(str::to_owned),
        })
    }

    /// Busiest spine's bytes over the mean.
    pub fn byte_mmr(&self) -> f64 {
        mmr(self.spines.iter().map(|s| s.bytes))
    }

    /// Busiest spine's sprayed packets over the mean.
    pub fn sprayed_mmr(&self) -> f64 {
        mmr(self.spines.iter().map(|s| s.sprayed))
    }
}

/// Max over mean; 0 for nothing.
pub fn mmr(values: impl Iterator<Item = u64> + Clone) -> f64 {
    let n = values.clone().count().max(1) as f64;
    let mean = values.clone().sum::<u64>() as f64 / n;
    values.max().unwrap_or(0) as f64 / mean.max(1.0)
}

/// What a UDP traffic run saw.
#[derive(Debug)]
pub struct TrafficReport {
    pub sent: u64,
    pub received: u64,
    /// TTL at the receiver -> datagrams.
    pub ttls: BTreeMap<u8, u64>,
    pub leaf: LeafCounters,
}

/// Starts `fabriclb run` on the leaf, sends `flows` UDP flows of `packets`
/// datagrams each from h1 to r1 over plain sockets, and collects what
/// arrived and what the daemon counted.
pub fn run_traffic(
    bed: &Testbed,
    fabriclb: &Path,
    workdir: &Path,
    flows: u16,
    packets: u32,
) -> Result<TrafficReport> {
    let daemon = Daemon::start(bed, fabriclb, workdir, &bed.leaf_config(""))?;
    let receiver = Receiver::start(&bed.ns("r1"))?;
    let sent = in_netns(&bed.ns("h1"), move || send_flows(flows, packets))??;
    let (received, ttls) = receiver.finish(sent)?;
    let text = daemon.stop()?;
    Ok(TrafficReport {
        sent,
        received,
        ttls,
        leaf: LeafCounters::from_metrics(bed, &text)?,
    })
}

/// Group keys for hashing on the five-tuple alone (no BTH destination QP).
pub const FIVE_TUPLE: &str =
    r#"hash_fields = ["src_ip", "dst_ip", "ip_protocol", "l4_src_port", "l4_dst_port"]"#;

/// A collective workload for every sender host.
#[derive(Clone, Debug)]
pub struct Collective {
    pub pattern: traffic::Pattern,
    pub qps_per_connection: u32,
    pub message_bytes: u32,
    pub mtu: u32,
    pub messages: u32,
    pub pace: traffic::Pace,
    /// See [`traffic::Workload::source_port_per_qp`].
    pub source_port_per_qp: bool,
    /// See [`traffic::Workload::small_messages`].
    pub small_messages: u32,
    /// Hosts 1..=senders send; all receive.
    pub senders: usize,
    pub leaf: Leaf,
}

/// What forwards at the leaf.
#[derive(Clone, Debug)]
pub enum Leaf {
    /// fabriclb, its group configured by the TOML keys `group` (see
    /// [`Testbed::leaf_config`]).
    Fabriclb { group: String },
    /// No fabriclb: the leaf kernel's own multipath route.
    KernelMultipath,
    /// The sink on the leaf's host ports: everything dropped at the first
    /// hop, so a run measures the sender alone.
    Drop,
}

#[derive(Debug)]
pub struct CollectiveReport {
    pub sent_packets: u64,
    pub sent_bytes: u64,
    pub received: SinkTotals,
    pub leaf: LeafCounters,
    pub elapsed: Duration,
}

/// Runs `collective` with every host as a rank: the chosen leaf, a sink on
/// every receiver, the generators on the senders at once.
pub fn run_collective(
    bed: &Testbed,
    fabriclb: &Path,
    workdir: &Path,
    collective: &Collective,
) -> Result<CollectiveReport> {
    run_collective_with(bed, fabriclb, workdir, collective, |_| Ok(())).map(|(report, ())| report)
}

/// [`run_collective`], calling `during` with the leaf's daemon (if any)
/// while the senders send.
pub fn run_collective_with<T>(
    bed: &Testbed,
    fabriclb: &Path,
    workdir: &Path,
    collective: &Collective,
    during: impl FnOnce(Option<&Daemon>) -> Result<T>,
) -> Result<(CollectiveReport, T)> {
    let hosts = bed.shape.hosts;
    let (daemon, _leaf_sinks) = match &collective.leaf {
        Leaf::Fabriclb { group } => (
            Some(Daemon::start(
                bed,
                fabriclb,
                workdir,
                &bed.leaf_config(group),
            )?),
            Vec::new(),
        ),
        Leaf::KernelMultipath => (None, Vec::new()),
        Leaf::Drop => (
            None,
            (1..=hosts)
                .map(|i| in_netns(&bed.ns("leaf"), move || Sink::attach(&format!("h{i}")))?)
                .collect::<Result<Vec<_>>>()?,
        ),
    };
    let sinks = (1..=hosts)
        .map(|i| in_netns(&bed.ns(&format!("r{i}")), || Sink::attach("eth0"))?)
        .collect::<Result<Vec<_>>>()?;
    let ranks: Vec<Ipv4Addr> = (1..=hosts).map(receiver_addr).collect();
    let senders: Vec<_> = (1..=collective.senders.min(hosts))
        .map(|i| {
            let workload = traffic::Workload {
                pattern: collective.pattern,
                ranks: ranks.clone(),
                rank: i - 1,
                qps_per_connection: collective.qps_per_connection,
                message_bytes: collective.message_bytes,
                mtu: collective.mtu,
                messages: collective.messages,
                source_port_per_qp: collective.source_port_per_qp,
                small_messages: collective.small_messages,
            };
            let (ns, pace) = (bed.ns(&format!("h{i}")), collective.pace);
            let gateway = Ipv4Addr::new(198, 18, 100 + i as u8, 254);
            std::thread::spawn(move || {
                in_netns(&ns, move || -> Result<traffic::SendReport> {
                    // A veth hop runs on the sending CPU; a sender that
                    // migrated mid-run would leave packets in two CPUs'
                    // backlogs and reorder its own QPs, which is the
                    // testbed's doing, not the fabric's.
                    pin_to_cpu(i)?;
                    let sender = traffic::resolve_sender("eth0", gateway)?;
                    traffic::send("eth0", traffic::Generator::new(workload, sender), pace)
                })?
            })
        })
        .collect();
    let during = during(daemon.as_ref());
    let mut report = CollectiveReport {
        sent_packets: 0,
        sent_bytes: 0,
        received: SinkTotals::default(),
        leaf: LeafCounters::default(),
        elapsed: Duration::ZERO,
    };
    for sender in senders {
        let sent = sender
            .join()
            .map_err(|_| anyhow::anyhow!("sender thread panicked"))??;
        report.sent_packets += sent.packets;
        report.sent_bytes += sent.bytes;
        report.elapsed = report.elapsed.max(sent.elapsed);
    }
    // Let queues (TBF) drain before counting.
    let deadline = Instant::now() + RECEIVE_GRACE;
    loop {
        report.received = sinks.iter().try_fold(SinkTotals::default(), |acc, s| {
            anyhow::Ok(acc + s.totals()?)
        })?;
        if report.received.packets >= report.sent_packets
            || matches!(collective.leaf, Leaf::Drop)
            || Instant::now() > deadline
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    if let Some(daemon) = daemon {
        report.leaf = LeafCounters::from_metrics(bed, &daemon.stop()?)?;
    }
    Ok((report, during?))
}

fn pin_to_cpu(index: usize) -> Result<()> {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let mut set = nix::sched::CpuSet::new();
    set.set(index % cpus)?;
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)?;
    Ok(())
}

/// `fabriclb run` inside the leaf namespace, stopped with SIGTERM.
pub struct Daemon {
    child: Child,
    config_file: PathBuf,
    metrics_file: PathBuf,
}

impl Daemon {
    /// Writes `config` to `workdir`, starts the daemon and waits until it
    /// is ready (its first metrics snapshot appears once the program is
    /// attached and next hops are resolved).
    pub fn start(bed: &Testbed, fabriclb: &Path, workdir: &Path, config: &str) -> Result<Self> {
        let config_file = workdir.join("leaf.toml");
        let metrics_file = workdir.join("leaf.prom");
        std::fs::write(&config_file, config)?;
        let _ = std::fs::remove_file(&metrics_file);
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &bed.ns("leaf")])
            .arg(fabriclb)
            .args(["run", "--metrics-interval-ms", "100", "--config"])
            .arg(&config_file)
            .arg("--metrics-file")
            .arg(&metrics_file)
            // Its start-up and shutdown lines would cut through reports.
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::null());
        // SAFETY: prctl and sigprocmask are async-signal-safe. If this
        // process dies without stopping the daemon (killed, or exiting from
        // the testbed's signal watcher), the kernel stops the daemon too;
        // the setting survives `ip netns exec`'s exec. The signal mask is
        // inherited: the watcher's blocked SIGINT/SIGTERM must not reach
        // the daemon, or it could never be stopped.
        unsafe {
            command.pre_exec(|| {
                use nix::sys::signal::{SigSet, SigmaskHow, Signal, sigprocmask};
                sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)?;
                nix::sys::prctl::set_pdeathsig(Signal::SIGTERM)?;
                Ok(())
            });
        }
        let child = command.spawn().context("starting fabriclb run")?;
        let mut daemon = Self {
            child,
            config_file,
            metrics_file,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !daemon.metrics_file.exists() {
            if let Some(status) = daemon.child.try_wait()? {
                bail!("fabriclb run exited early: {status}");
            }
            ensure!(
                Instant::now() < deadline,
                "fabriclb run not ready after 20 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(daemon)
    }

    /// Replaces the config file (atomically, as an editor saving it would)
    /// and sends SIGHUP; returns when the signal went out.
    pub fn reconfigure(&self, config: &str) -> Result<Instant> {
        let tmp = self.config_file.with_extension("toml.new");
        std::fs::write(&tmp, config)?;
        std::fs::rename(&tmp, &self.config_file)?;
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP)?;
        Ok(Instant::now())
    }

    /// The daemon's latest metrics snapshot.
    pub fn metrics(&self) -> Result<String> {
        Ok(std::fs::read_to_string(&self.metrics_file)?)
    }

    /// Stops the daemon and returns its final metrics.
    pub fn stop(mut self) -> Result<String> {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM)?;
        let status = self.child.wait()?;
        ensure!(status.success(), "fabriclb run exited with {status}");
        Ok(std::fs::read_to_string(&self.metrics_file)?)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// One connected socket per flow (distinct source ports), `packets`
/// datagrams each, interleaved across flows.
fn send_flows(flows: u16, packets: u32) -> Result<u64> {
    let sockets = (0..flows)
        .map(|_| {
            let s = UdpSocket::bind((host_addr(1), 0))?;
            s.set_ttl(SENT_TTL.into())?;
            s.connect(SocketAddrV4::new(receiver_addr(1), FAR_PORT))?;
            Ok(s)
        })
        .collect::<std::io::Result<Vec<_>>>()?;
    let payload = [0x5au8; 64];
    let mut sent = 0;
    for _ in 0..packets {
        for s in &sockets {
            s.send(&payload)?;
            sent += 1;
        }
        // Paced so the veth queues never overflow: loss here would be the
        // testbed's, not fabriclb's.
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(sent)
}

/// How long the receiver waits for stragglers once the sender is done.
const RECEIVE_GRACE: Duration = Duration::from_secs(10);

/// Counts datagrams to r1 and their TTLs, on a thread in r1.
struct Receiver {
    handle: std::thread::JoinHandle<Result<(u64, BTreeMap<u8, u64>)>>,
    /// How many datagrams to wait for; `u64::MAX` until the sender is done.
    expected: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Receiver {
    fn start(ns: &str) -> Result<Self> {
        let expected = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(u64::MAX));
        let want = expected.clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let ns = ns.to_owned();
        let handle = std::thread::spawn(move || in_netns(&ns, move || receive(&want, ready_tx))?);
        ready_rx
            .recv_timeout(Duration::from_secs(5))
            .context("receiver did not start")?;
        Ok(Self { handle, expected })
    }

    /// Waits until `expected` datagrams arrived, or [`RECEIVE_GRACE`] passed.
    fn finish(self, expected: u64) -> Result<(u64, BTreeMap<u8, u64>)> {
        self.expected
            .store(expected, std::sync::atomic::Ordering::Release);
        self.handle
            .join()
            .map_err(|_| anyhow::anyhow!("receiver panicked"))?
    }
}

/// Counts datagrams to r1's [`FAR_PORT`] and their TTLs until `expected`
/// arrived or [`RECEIVE_GRACE`] passed after it was set.
fn receive(
    expected: &std::sync::atomic::AtomicU64,
    ready: std::sync::mpsc::Sender<()>,
) -> Result<(u64, BTreeMap<u8, u64>)> {
    let socket = UdpSocket::bind((receiver_addr(1), FAR_PORT))?;
    setsockopt(&socket, sockopt::Ipv4RecvTtl, &true)?;
    // Room for a whole run, so a slow reader never drops.
    setsockopt(&socket, sockopt::RcvBufForce, &(32 << 20))?;
    socket.set_read_timeout(Some(Duration::from_millis(100)))?;
    let _ = ready.send(());
    let (mut received, mut ttls) = (0u64, BTreeMap::new());
    let mut deadline: Option<Instant> = None;
    let mut buf = [0u8; 2048];
    let mut cmsg = nix::cmsg_space!(i32);
    loop {
        let want = expected.load(std::sync::atomic::Ordering::Acquire);
        if received >= want || deadline.is_some_and(|d| Instant::now() > d) {
            return Ok((received, ttls));
        }
        if want != u64::MAX && deadline.is_none() {
            deadline = Some(Instant::now() + RECEIVE_GRACE);
        }
        let mut iov = [IoSliceMut::new(&mut buf)];
        match recvmsg::<()>(
            socket.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::empty(),
        ) {
            Ok(msg) => {
                received += 1;
                for c in msg.cmsgs()? {
                    if let ControlMessageOwned::Ipv4Ttl(ttl) = c {
                        *ttls.entry(ttl as u8).or_insert(0) += 1;
                    }
                }
            }
            Err(nix::errno::Errno::EAGAIN) => {}
            Err(e) => return Err(e.into()),
        }
    }
}
