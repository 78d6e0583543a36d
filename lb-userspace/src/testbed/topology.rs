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

use std::net::Ipv4Addr;
use std::process::Command;

use anyhow::{Context, Result, ensure};

use super::frr::{self, Routers};
use super::netns::{ethtool, in_netns, ip, ip_tc};
use super::{Exporters, exporters};

/// The shape of a testbed.
#[derive(Clone, Debug)]
pub struct Shape {
    /// Sender hosts, and as many receivers.
    pub hosts: usize,
    pub spines: usize,
    /// TBF rate on each spine's link to the far leaf, in Mbit/s: none for
    /// no shaping, one for every spine, or one per spine.
    pub spine_rates_mbit: Vec<u32>,
    /// How the shaped links queue.
    pub queues: Queues,
    pub routing: Routing,
}

impl Default for Shape {
    fn default() -> Self {
        Self {
            hosts: 4,
            spines: 4,
            spine_rates_mbit: Vec::new(),
            queues: Queues::Lossy,
            routing: Routing::Static,
        }
    }
}

/// Where the fabric's routes come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Routing {
    /// Static routes: the spines' to both sides, the leaf's multipath
    /// route over every spine, the far leaf's back.
    #[default]
    Static,
    /// BGP ([`super::frr`]): the same routes, learned from FRR.
    Bgp,
    /// Static as the kernel's, and the leaf's fabriclb takes its route over
    /// the spines from SONiC's APPL_DB (`sonic_routes`, `run --sonic`):
    /// the rows [`Testbed::appl_db_route`] writes.
    AppDb,
}

impl Routing {
    /// The name of a leaf's group over the spines in fabriclb's metrics:
    /// the one its config declares, or with BGP or APPL_DB the first (and
    /// only) one it learns from their routes.
    pub fn spine_group(self) -> &'static str {
        match self {
            Self::Static => "spines",
            Self::Bgp | Self::AppDb => "spines#1",
        }
    }
}

impl Shape {
    /// Spine `j`'s (1-based) rate, if shaped.
    pub fn spine_rate_mbit(&self, j: usize) -> Option<u32> {
        match self.spine_rates_mbit.as_slice() {
            [] => None,
            [all] => Some(*all),
            rates => rates.get(j - 1).copied(),
        }
    }

    /// The sum of the spines' rates: what the fabric carries at best;
    /// `None` when a spine is unshaped.
    pub fn capacity_mbit(&self) -> Option<u64> {
        (1..=self.spines)
            .map(|j| self.spine_rate_mbit(j).map(u64::from))
            .sum()
    }
}

/// How a shaped spine link queues what exceeds its rate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Queues {
    /// TBF with tc's `latency 20ms`: a switch's shallow buffer, tail drop
    /// beyond it. tc adds the 64 KB bucket to the latency's bytes, so a
    /// packet waits up to 20 ms plus 64 KB at the port's rate: 72 ms at 10
    /// Mbit/s, 33 ms at 40, 31 ms at 50, 23 ms at 200.
    #[default]
    Lossy,
    /// TBF with a limit of [`LOSSLESS_LIMIT_BYTES`]: nothing drops, the
    /// queue grows instead, as a PFC fabric backs up rather than drops.
    Lossless,
}

/// The lossless queue's limit. A scenario sends at most a few hundred MB
/// in all (the slow-spine one about 110 MB per mode), so even a spine that
/// got every packet could hold them; memory is only taken as the queue
/// fills, and a 4-spine testbed's worst case stays within a few GB.
pub const LOSSLESS_LIMIT_BYTES: u32 = 512 << 20;

/// Sender host `i` (1-based).
pub fn host_addr(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, 100 + i as u8, 1)
}

/// Receiver `i` (1-based).
pub fn receiver_addr(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(198, 19, 100 + i as u8, 1)
}

/// Spine `i`'s (1-based) address on its link to the leaf: the leaf's next
/// hop through it.
pub fn spine_addr(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, i as u8, 2)
}

/// The `remote` telemetry source's name in config.
const REMOTE: &str = "remote";
/// Each spine's interface toward the far leaf: where its TBF queues.
pub const SHAPED_DEVICE: &str = "fleaf";

/// Where UDP flows go in [`run_traffic`].
pub const FAR_PORT: u16 = 7471;
/// TTL the sender uses; receivers must see it minus three (leaf, spine,
/// far leaf).
pub const SENT_TTL: u8 = 64;

pub struct Testbed {
    name: String,
    shape: Shape,
    namespaces: Vec<String>,
    routers: Option<Routers>,
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
        let rates = shape.spine_rates_mbit.len();
        ensure!(
            rates <= 1 || rates == shape.spines,
            "{rates} spine rates for {} spines: give one for all or one per spine",
            shape.spines
        );
        ensure!(
            !shape.spine_rates_mbit.contains(&0),
            "a spine rate of 0 Mbit/s carries nothing"
        );
        remove_namespaces(name)?;
        let mut bed = Self {
            name: name.to_owned(),
            shape,
            namespaces: Vec::new(),
            routers: None,
        };
        bed.build()
            .with_context(|| format!("building testbed {name}"))?;
        Ok(bed)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    pub fn ns(&self, role: &str) -> String {
        format!("{}-{role}", self.name)
    }

    /// Every namespace's role: `leaf`, `fleaf`, `h1`.., `r1`.., `s1`...
    pub fn roles(&self) -> Vec<String> {
        let mut roles = vec!["leaf".to_owned(), "fleaf".to_owned()];
        roles.extend((1..=self.shape.hosts).flat_map(|i| [format!("h{i}"), format!("r{i}")]));
        roles.extend((1..=self.shape.spines).map(|i| format!("s{i}")));
        roles
    }

    /// Leaves the namespaces (and routers) in place when the testbed is
    /// dropped (`fabriclb testbed up`); `fabriclb testbed down` removes
    /// them.
    pub fn keep(mut self) {
        self.namespaces.clear();
        self.routers = None;
    }

    /// The BGP routers, with `--routing bgp`.
    pub fn routers(&self) -> Option<&Routers> {
        self.routers.as_ref()
    }

    fn build(&mut self) -> Result<()> {
        let (hosts, spines) = (self.shape.hosts, self.shape.spines);
        for role in &self.roles() {
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
            veth(&spine, SHAPED_DEVICE, &fleaf, &sj)?;
            addr(&spine, SHAPED_DEVICE, &format!("198.19.{j}.1/24"))?;
            addr(&fleaf, &sj, &format!("198.19.{j}.2/24"))?;
            sysctl(&fleaf, &format!("net/ipv4/conf/{sj}/rp_filter"), "0")?;
            if self.shape.routing != Routing::Bgp {
                static_spine_routes(&spine, j)?;
            }
            if let Some(mbit) = self.shape.spine_rate_mbit(j) {
                self.shape_spine(j, "add", mbit)?;
            }
        }
        // The kernel's own path for what fabriclb passes up, and the
        // baseline it is measured against: multipath over every spine,
        // hashed on the five-tuple (fib_multipath_hash_policy 1).
        sysctl(&leaf, "net/ipv4/fib_multipath_hash_policy", "1")?;
        match self.shape.routing {
            Routing::Static | Routing::AppDb => static_leaf_routes(&leaf, &fleaf, spines),
            Routing::Bgp => {
                let routers = Routers::start(&self.name, hosts, spines, |role| self.ns(role))?;
                self.routers = Some(routers);
                Ok(())
            }
        }
    }
    /// fabriclb's config for the leaf: XDP on the host ports, one group
    /// over the spines (next hops by IP, resolved from ARP) with the TOML
    /// keys `group` adds (mode, hash fields, ...; empty for defaults), the
    /// receivers' /16 routed over it; with BGP, a group that follows the
    /// kernel's BGP routes instead. A group with `telemetry = "remote"`
    /// reads each spine's queue toward the far leaf from the exporter the
    /// testbed runs on that spine ([`super::Exporters`]).
    pub fn leaf_config(&self, group: &str) -> String {
        let remote = group
            .lines()
            .any(|l| l.replace(' ', "") == format!("telemetry=\"{REMOTE}\""));
        let mut text = spine_group_header(0x5eed, self.shape.hosts, group);
        // The spines and the receivers' routes are BGP's.
        let learned = match self.shape.routing {
            Routing::Bgp => Some("kernel_routes = { table = \"main\", protocol = \"bgp\" }\n"),
            Routing::AppDb => Some("sonic_routes = { protocol = \"bgp\" }\n"),
            Routing::Static => None,
        };
        if let Some(routes) = learned {
            text.push_str(routes);
            if remote {
                // Each spine's exporter listens on its address toward the
                // leaf: the learned next hop's own.
                text.push_str(&format!(
                    "telemetry_url = \"http://{{ip}}:{}/metrics\"\ntelemetry_device = \"{}\"\n",
                    exporters::PORT,
                    exporters::DEVICE
                ));
            }
            return text;
        }
        text.push_str("next_hops = [\n");
        for j in 1..=self.shape.spines {
            let telemetry = if remote {
                let target = Exporters::target(j);
                format!(
                    ", telemetry_url = \"{}\", telemetry_device = \"{}\"",
                    target.url, target.device
                )
            } else {
                String::new()
            };
            text.push_str(&format!(
                "  {{ interface = \"s{j}\", ip = \"{}\"{telemetry} }},\n",
                spine_addr(j)
            ));
        }
        text.push_str("]\n\n[[route]]\nprefix = \"198.19.0.0/16\"\ngroup = \"spines\"\n");
        text
    }

    /// Changes spine `j`'s rate toward the far leaf while traffic runs (the
    /// queue keeps its kind; [`Self::shape`] keeps the rates it was built
    /// with).
    pub fn set_spine_rate(&self, j: usize, mbit: u32) -> Result<()> {
        self.shape_spine(j, "change", mbit)
    }

    /// `tc qdisc {verb}` of spine `j`'s TBF at `mbit`.
    fn shape_spine(&self, j: usize, verb: &str, mbit: u32) -> Result<()> {
        let spine = self.ns(&format!("s{j}"));
        tbf(&spine, SHAPED_DEVICE, verb, mbit, self.shape.queues)
    }

    /// A namespace `c{j}` attached to spine `j` only, its address
    /// 198.18.(200+j).1 routed through the spine: a source of traffic the
    /// spine forwards toward the far leaf without the leaf seeing it.
    /// Removed when the port is dropped, or with the testbed.
    pub fn add_cross_port(&self, j: usize) -> Result<CrossPort> {
        let port = CrossPort {
            ns: self.ns(&format!("c{j}")),
            spine: self.ns(&format!("s{j}")),
        };
        let (ns, spine) = (port.ns.as_str(), port.spine.as_str());
        // A stale one from a run that was killed; none is the usual case.
        port.remove();
        ip(&["netns", "add", ns])?;
        ip(&["-n", ns, "link", "set", "lo", "up"])?;
        veth(ns, "eth0", spine, "cross")?;
        addr(ns, "eth0", &format!("198.18.{}.1/24", 200 + j))?;
        addr(spine, "cross", &format!("198.18.{}.254/24", 200 + j))?;
        ip(&[
            "-n",
            ns,
            "route",
            "add",
            "default",
            "via",
            &format!("198.18.{}.254", 200 + j),
        ])?;
        Ok(port)
    }

    /// The name of the leaf's group over the spines in fabriclb's metrics
    /// ([`Routing::spine_group`]).
    pub fn spine_group(&self) -> &'static str {
        self.shape.routing.spine_group()
    }

    /// The command that writes the receivers' route over `spines` (1-based)
    /// into APPL_DB as fpmsyncd writes a BGP route: `ROUTE_TABLE:<prefix>`
    /// with the `nexthop` and `ifname` lists and `protocol`.
    pub fn appl_db_route(&self, spines: &[usize]) -> Vec<String> {
        let list = |f: &dyn Fn(usize) -> String| {
            spines.iter().map(|&j| f(j)).collect::<Vec<_>>().join(",")
        };
        [
            "HSET",
            "ROUTE_TABLE:198.19.0.0/16",
            "nexthop",
            &list(&|j| spine_addr(j).to_string()),
            "ifname",
            &list(&|j| format!("s{j}")),
            "protocol",
            "bgp",
        ]
        .map(str::to_owned)
        .to_vec()
    }

    /// Label of spine `j`'s next hop in fabriclb's metrics.
    pub fn spine_label(&self, j: usize) -> String {
        format!("s{j} {}", spine_addr(j))
    }

    pub fn down(&mut self) {
        if self.routers.take().is_some() {
            let _ = frr::stop(&self.name);
        }
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

/// Removes testbed `name`, and the scratch directories and bpffs mounts
/// the run holds ([`super::leftovers`]), when SIGINT or SIGTERM arrives,
/// then exits as the signal would have. Call it before starting other
/// threads: they inherit the blocked signals, so only the watcher thread
/// receives them and `Drop` alone never misses a Ctrl-C. (Child processes,
/// such as the daemon, start with no signals blocked and get the
/// terminal's Ctrl-C themselves.) One watcher serves every call, as the
/// matrix's fabrics come one after another.
pub fn tear_down_on_signal(name: &str) -> Result<()> {
    use nix::sys::signal::{SigSet, Signal};
    static NAMES: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let names = || NAMES.lock().unwrap_or_else(|e| e.into_inner());
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGINT);
    signals.add(Signal::SIGTERM);
    signals.thread_block()?;
    let first = names().is_empty();
    if !names().iter().any(|n| n == name) {
        names().push(name.to_owned());
    }
    if first {
        std::thread::spawn(move || {
            if let Ok(signal) = signals.wait() {
                for name in names().iter() {
                    eprintln!("{signal}: removing testbed {name}");
                    let _ = remove_namespaces(name);
                }
                super::leftovers::remove_all();
                std::process::exit(128 + signal as i32);
            }
        });
    }
    Ok(())
}

/// A cross-traffic namespace on one spine ([`Testbed::add_cross_port`]),
/// removed on drop.
pub struct CrossPort {
    ns: String,
    spine: String,
}

impl CrossPort {
    /// The namespace the traffic is sent from.
    pub fn ns(&self) -> &str {
        &self.ns
    }

    /// Removes the namespace, its veth first. `ip netns del` returns
    /// before the kernel has torn the namespace down, and the veth's end
    /// on the spine goes only then: the next row's cross port, made at
    /// once, found that end still there ("File exists"). Deleting one end
    /// of a veth takes both before it returns.
    fn remove(&self) {
        ip_quietly(&["-n", &self.spine, "link", "del", "cross"]);
        ip_quietly(&["netns", "del", &self.ns]);
    }
}

impl Drop for CrossPort {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Runs `ip` with `args`, for a cleanup that may find nothing to do.
fn ip_quietly(args: &[&str]) {
    let _ = Command::new("ip")
        .args(args)
        .stderr(std::process::Stdio::null())
        .status();
}

/// Removes testbed `name` (`fabriclb testbed down`, or a stale one).
pub fn remove_namespaces(name: &str) -> Result<usize> {
    frr::stop(name)?;
    let stale = namespaces(name)?;
    for ns in &stale {
        ip(&["netns", "del", ns])?;
    }
    Ok(stale.len())
}

/// Link MTU: room for RoCEv2 packets of the 2048-byte IB MTU with their
/// headers, and still within what a veth takes with a (single-buffer) XDP
/// program attached, about a page. A 400G fabric would run 4096-byte RoCE
/// MTU in 9000-byte jumbo frames; XDP on veth cannot here.
pub const LINK_MTU: u32 = 3000;
/// The largest RoCE MTU that fits [`LINK_MTU`].
pub const ROCE_MTU: u32 = 2048;

/// A leaf config's start: the switch with `hash_seed`, XDP on host ports
/// `h1..=h{hosts}`, and group "spines" with the TOML keys `group` adds,
/// its next hops and routes left to follow.
pub(super) fn spine_group_header(hash_seed: u32, hosts: usize, group: &str) -> String {
    let ports: Vec<String> = (1..=hosts).map(|i| format!("\"h{i}\"")).collect();
    let mut text = format!(
        "[switch]\nhash_seed = {hash_seed:#x}\ninterfaces = [{}]\n\n[[group]]\nname = \"spines\"\n",
        ports.join(", ")
    );
    for line in group.lines().filter(|l| !l.trim().is_empty()) {
        text.push_str(line.trim());
        text.push('\n');
    }
    text
}

/// `verb` (`add`, `change`) a TBF root qdisc at `mbit` on `dev`, queueing
/// as `queues` says.
pub(super) fn tbf(ns: &str, dev: &str, verb: &str, mbit: u32, queues: Queues) -> Result<()> {
    let rate = format!("{mbit}mbit");
    let limit = LOSSLESS_LIMIT_BYTES.to_string();
    let mut tbf = vec![
        "qdisc", verb, "dev", dev, "root", "tbf", "rate", &rate, "burst", "64kb",
    ];
    tbf.extend(match queues {
        Queues::Lossy => ["latency", "20ms"],
        Queues::Lossless => ["limit", limit.as_str()],
    });
    ip_tc(ns, &tbf)
}

pub(super) fn veth(ns_a: &str, name_a: &str, ns_b: &str, name_b: &str) -> Result<()> {
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

/// Spine `j`'s routes to both sides of the fabric.
fn static_spine_routes(spine: &str, j: usize) -> Result<()> {
    let far = format!("198.19.{j}.2");
    ip(&["-n", spine, "route", "add", "198.19.0.0/16", "via", &far])?;
    let leaf = format!("198.18.{j}.1");
    ip(&["-n", spine, "route", "add", "198.18.0.0/16", "via", &leaf])
}

/// The leaf's multipath route to the receivers over every spine, and the
/// far leaf's back through the first.
fn static_leaf_routes(leaf: &str, fleaf: &str, spines: usize) -> Result<()> {
    let mut multipath = vec![
        "-n".to_owned(),
        leaf.to_owned(),
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
        fleaf,
        "route",
        "add",
        "198.18.0.0/16",
        "via",
        "198.19.1.1",
    ])
}

pub(super) fn addr(ns: &str, dev: &str, cidr: &str) -> Result<()> {
    ip(&["-n", ns, "addr", "add", cidr, "dev", dev])
}

pub(super) fn sysctl(ns: &str, key: &str, value: &str) -> Result<()> {
    let path = format!("/proc/sys/{key}");
    let value = value.to_owned();
    in_netns(ns, move || {
        std::fs::write(&path, value).with_context(|| format!("writing {path}"))
    })?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spine_rates_are_none_one_for_all_or_one_per_spine() {
        let shape = |rates: &[u32]| Shape {
            spine_rates_mbit: rates.to_vec(),
            ..Shape::default()
        };
        assert_eq!(shape(&[]).spine_rate_mbit(1), None);
        assert_eq!(shape(&[]).capacity_mbit(), None);
        assert_eq!(shape(&[100]).spine_rate_mbit(4), Some(100));
        assert_eq!(shape(&[100]).capacity_mbit(), Some(400));
        let slow = shape(&[200, 200, 200, 50]);
        assert_eq!(
            (1..=4).map(|j| slow.spine_rate_mbit(j)).collect::<Vec<_>>(),
            [Some(200), Some(200), Some(200), Some(50)]
        );
        assert_eq!(slow.capacity_mbit(), Some(650));
    }
}
