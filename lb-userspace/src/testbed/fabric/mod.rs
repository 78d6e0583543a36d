//! A fabric of several leaves in network namespaces, every leaf a switch
//! fabriclb runs on: L leaves, S spines, H hosts per leaf, every leaf
//! linked to every spine, each spine's port toward each leaf shaped on its
//! own ([`LinkRates`]), so that congestion sits where a fabric's does: on
//! the spine's port toward the destination leaf.
//!
//! ```text
//!  l1h1 ─┐         ┌─ s1 ─┐         ┌─ l2h1
//!  l1h2 ─┼── l1 ───┼─ s2 ─┼─── l2 ──┼─ l2h2
//!        │         └─ sS ─┘  (every leaf to every spine)
//! ```
//!
//! Addresses come from 198.18.0.0/15 (RFC 2544's benchmarking range):
//! leaf K's link to spine J is 198.18.K.(4J)/30, the leaf at .(4J+1), the
//! spine at .(4J+2); host I of leaf K is 198.19.(16(K-1)+I).1/24 behind
//! its leaf port's .254, so leaf K's hosts are 198.19.(16(K-1)).0/20.
//! Routes are static: each leaf reaches every other leaf's /20 over every
//! spine (the kernel's multipath route, and the group in each leaf's
//! fabriclb config), each spine reaches each leaf's /20 over its link.
//! Or they come from BGP ([`super::frr`] on every leaf and spine): the
//! same routes, learned, and each leaf's fabriclb follows the kernel's.
//! Every leaf and spine also has a port on a management network
//! (198.18.255.0/24, a bridge of its own), which telemetry is read over.
//! Teardown deletes every namespace, also on drop.

mod collective;
pub mod flex_counters;
mod rates;

use std::net::Ipv4Addr;
use std::process::Command;

use anyhow::{Context, Result, ensure};

pub use collective::{
    FabricReport, FabricRun, rank_addrs, rank_place, run_fabric_collective,
    run_fabric_collective_with, spine_labels,
};
pub use flex_counters::FlexCounters;
pub use rates::LinkRates;

use super::exporters;
use super::frr::{self, Routers};
use super::netns::{ethtool, ip};
use super::topology::{
    Queues, Routing, addr, remove_namespaces, spine_group_header, sysctl, tbf, veth,
};

/// The shape of a fabric.
#[derive(Clone, Debug)]
pub struct FabricShape {
    pub leaves: usize,
    pub spines: usize,
    /// Hosts per leaf.
    pub hosts: usize,
    pub rates: LinkRates,
    pub queues: Queues,
    /// Static, or BGP on every router (not APPL_DB: that is the single
    /// SONiC leaf's).
    pub routing: Routing,
}

impl Default for FabricShape {
    fn default() -> Self {
        Self {
            leaves: 4,
            spines: 4,
            hosts: 2,
            rates: LinkRates::default(),
            queues: Queues::Lossy,
            routing: Routing::Static,
        }
    }
}

/// How often a leaf reads the spines' queues and how fast its qualities
/// follow them: the `[ars_profile]` of every leaf's config.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sampling {
    pub interval_us: u32,
    pub ewma_time_constant_us: u32,
    pub worst_band_hold_us: u32,
}

impl Sampling {
    /// Every 40 ms. Every leaf scrapes every spine's node_exporter: at
    /// the daemon's 10 ms, four leaves' 1,600 scrapes a second took 1.35
    /// of this machine's two cores (exporters) and 0.41 (daemons) before
    /// any traffic ran. The time constant and worst-band hold are a
    /// quarter of the way and three samples at 40 ms: with every leaf
    /// moving flowlets on the same spines' samples, slower is steadier:
    /// at 30 ms and 20 ms (the defaults, the same at 10 ms) the herd lost
    /// 1.0-1.8% against 0.4-1.1%, and at 10 ms samples 1.5-3.0% against
    /// 0.5-2.2% (`fabric-herd`, flowlet and per-packet, two to five runs
    /// each).
    pub const FABRIC: Self = Self {
        interval_us: 40_000,
        ewma_time_constant_us: 120_000,
        worst_band_hold_us: 80_000,
    };
    /// Every 10 ms with the time constants a third and a quarter as long:
    /// what the testbed's COUNTERS_DB (written every 10 ms) serves four
    /// leaves, and where every packet is sprayed, nothing moves in lumps
    /// to herd (`fabric-herd`).
    pub const FRESH: Self = Self {
        interval_us: 10_000,
        ewma_time_constant_us: 40_000,
        worst_band_hold_us: 20_000,
    };
}

/// The management network's namespace role, and each router's port on it.
const MGMT: &str = "mgmt";

/// Leaves and spines a fabric may have: an address plan of a /30 per
/// link in a leaf's /24 holds 63 spines, and 16 leaves' /20s fill
/// 198.19.0.0/16.
const MAX_LEAVES: usize = 16;
const MAX_SPINES: usize = 16;
/// Hosts per leaf: host I's /24 is the I-th of its leaf's /20, the 0th
/// left out.
const MAX_HOSTS: usize = 15;

/// Host `host` (1-based) of leaf `leaf` (1-based).
pub fn host_addr(leaf: usize, host: usize) -> Ipv4Addr {
    Ipv4Addr::new(198, 19, host_subnet(leaf, host), 1)
}

/// The third octet of host `host`'s /24 on leaf `leaf`.
fn host_subnet(leaf: usize, host: usize) -> u8 {
    (16 * (leaf - 1) + host) as u8
}

/// Every leaf of `leaves` but `leaf`: where leaf `leaf`'s routes lead.
pub fn other_leaves(leaves: usize, leaf: usize) -> impl Iterator<Item = usize> {
    (1..=leaves).filter(move |&m| m != leaf)
}

/// Leaf `leaf`'s hosts, all of them: what every other leaf routes to it.
pub fn leaf_prefix(leaf: usize) -> String {
    format!("198.19.{}.0/20", 16 * (leaf - 1))
}

/// The management network's address of a leaf (`Router::Leaf(k)`) or
/// spine: a network apart from the links that carry traffic, as a
/// switch's out-of-band port is, so that what telemetry reads over it
/// takes no room on the shaped ports it measures.
pub fn mgmt_addr(router: Router) -> Ipv4Addr {
    match router {
        Router::Leaf(k) => Ipv4Addr::new(198, 18, 255, k as u8),
        Router::Spine(j) => Ipv4Addr::new(198, 18, 255, 128 + j as u8),
    }
}

/// A fabric's router, 1-based.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Router {
    Leaf(usize),
    Spine(usize),
}

/// The address of leaf `leaf`'s link to spine `spine`: the spine's end
/// (the leaf's next hop through it) or the leaf's (the spine's next hop
/// back).
pub fn link_addr(leaf: usize, spine: usize, spine_end: bool) -> Ipv4Addr {
    Ipv4Addr::new(
        198,
        18,
        leaf as u8,
        (4 * spine + 1 + usize::from(spine_end)) as u8,
    )
}

pub struct Fabric {
    name: String,
    shape: FabricShape,
    namespaces: Vec<String>,
    routers: Option<Routers>,
}

impl Fabric {
    /// Builds the fabric; `name` prefixes every namespace, and a stale
    /// testbed of that name is removed first.
    pub fn up(name: &str, shape: FabricShape) -> Result<Self> {
        ensure!(
            (2..=MAX_LEAVES).contains(&shape.leaves),
            "leaves must be 2..={MAX_LEAVES}, not {}",
            shape.leaves
        );
        ensure!(
            (1..=MAX_SPINES).contains(&shape.spines),
            "spines must be 1..={MAX_SPINES}, not {}",
            shape.spines
        );
        ensure!(
            (1..=MAX_HOSTS).contains(&shape.hosts),
            "hosts per leaf must be 1..={MAX_HOSTS}, not {}",
            shape.hosts
        );
        if let Some((spine, leaf)) =
            (shape.rates.named()).find(|&(spine, leaf)| spine > shape.spines || leaf > shape.leaves)
        {
            anyhow::bail!(
                "a rate for s{spine}:l{leaf}, which this fabric of {} spines and {} leaves \
                 does not have",
                shape.spines,
                shape.leaves
            );
        }
        ensure!(
            shape.routing != Routing::AppDb,
            "a fabric's routes are static or from BGP; APPL_DB routing is the single leaf's"
        );
        remove_namespaces(name)?;
        let mut fabric = Self {
            name: name.to_owned(),
            shape,
            namespaces: Vec::new(),
            routers: None,
        };
        fabric
            .build()
            .with_context(|| format!("building fabric {name}"))?;
        Ok(fabric)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn shape(&self) -> &FabricShape {
        &self.shape
    }

    pub fn ns(&self, role: &str) -> String {
        format!("{}-{role}", self.name)
    }

    /// Every namespace's role: `l1`.., `s1`.., `l1h1`..., `mgmt` (the
    /// management network's bridge).
    pub fn roles(&self) -> Vec<String> {
        let FabricShape {
            leaves,
            spines,
            hosts,
            ..
        } = self.shape;
        let mut roles: Vec<String> = (1..=leaves).map(|k| format!("l{k}")).collect();
        roles.extend((1..=spines).map(|j| format!("s{j}")));
        roles.extend((1..=leaves).flat_map(|k| (1..=hosts).map(move |i| format!("l{k}h{i}"))));
        roles.push(MGMT.to_owned());
        roles
    }

    /// Leaves the namespaces in place when dropped (`fabriclb testbed
    /// up`); `fabriclb testbed down` removes them.
    pub fn keep(mut self) {
        self.namespaces.clear();
        self.routers = None;
    }

    /// The group each leaf's metrics count the spines under
    /// ([`Routing::spine_group`]): with BGP, the one learned from its
    /// routes, all of which take every spine.
    pub fn spine_group(&self) -> &'static str {
        self.shape.routing.spine_group()
    }

    fn build(&mut self) -> Result<()> {
        for role in self.roles() {
            let ns = self.ns(&role);
            ip(&["netns", "add", &ns])?;
            self.namespaces.push(ns.clone());
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            // Packets between two leaves cross every spine; strict
            // reverse-path filtering would drop all but one path's.
            for key in ["all", "default"] {
                sysctl(&ns, &format!("net/ipv4/conf/{key}/rp_filter"), "0")?;
            }
        }
        let FabricShape {
            leaves,
            spines,
            hosts,
            ..
        } = self.shape;
        for k in 1..=leaves {
            let leaf = self.ns(&format!("l{k}"));
            sysctl(&leaf, "net/ipv4/ip_forward", "1")?;
            // The kernel's own path for what fabriclb passes up: hashed on
            // the five-tuple, as the single-leaf testbed's.
            sysctl(&leaf, "net/ipv4/fib_multipath_hash_policy", "1")?;
            for i in 1..=hosts {
                self.add_host(k, i)?;
            }
        }
        for j in 1..=spines {
            let spine = self.ns(&format!("s{j}"));
            sysctl(&spine, "net/ipv4/ip_forward", "1")?;
            for k in 1..=leaves {
                self.add_link(k, j)?;
            }
        }
        self.add_mgmt()?;
        match self.shape.routing {
            Routing::Static | Routing::AppDb => {
                for k in 1..=leaves {
                    self.leaf_routes(k)?;
                }
            }
            Routing::Bgp => {
                let routers =
                    Routers::start_fabric(&self.name, leaves, spines, |role| self.ns(role))?;
                self.routers = Some(routers);
            }
        }
        Ok(())
    }

    /// The management network: a bridge in namespace `mgmt`, a port
    /// `mgmt` on every leaf and spine at its [`mgmt_addr`].
    fn add_mgmt(&self) -> Result<()> {
        let bridge = self.ns(MGMT);
        ip(&["-n", &bridge, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &bridge, "link", "set", "br0", "up"])?;
        let routers = (1..=self.shape.leaves)
            .map(Router::Leaf)
            .chain((1..=self.shape.spines).map(Router::Spine));
        for router in routers {
            let (role, port) = match router {
                Router::Leaf(k) => (format!("l{k}"), format!("l{k}")),
                Router::Spine(j) => (format!("s{j}"), format!("s{j}")),
            };
            let ns = self.ns(&role);
            veth(&ns, MGMT, &bridge, &port)?;
            ip(&["-n", &bridge, "link", "set", &port, "master", "br0"])?;
            addr(&ns, MGMT, &format!("{}/24", mgmt_addr(router)))?;
        }
        Ok(())
    }

    /// Host `i` of leaf `k`, behind the leaf's port `h{i}`.
    fn add_host(&self, k: usize, i: usize) -> Result<()> {
        let (leaf, host) = (self.ns(&format!("l{k}")), self.ns(&format!("l{k}h{i}")));
        let port = format!("h{i}");
        veth(&host, "eth0", &leaf, &port)?;
        let subnet = host_subnet(k, i);
        addr(&host, "eth0", &format!("{}/24", host_addr(k, i)))?;
        addr(&leaf, &port, &format!("198.19.{subnet}.254/24"))?;
        let gateway = format!("198.19.{subnet}.254");
        ip(&["-n", &host, "route", "add", "default", "via", &gateway])?;
        // veth leaves UDP checksums to "hardware"; once a leaf's XDP turns
        // the skb into a frame nobody fills them in (see the single-leaf
        // testbed).
        ethtool(&host, &["-K", "eth0", "tx", "off"])
    }

    /// Leaf `k`'s link to spine `j`: port `s{j}` on the leaf, `l{k}` on the
    /// spine, shaped on the spine's side; the spine's static route to the
    /// leaf's hosts.
    fn add_link(&self, k: usize, j: usize) -> Result<()> {
        let (leaf, spine) = (self.ns(&format!("l{k}")), self.ns(&format!("s{j}")));
        let (leaf_port, spine_port) = (format!("s{j}"), format!("l{k}"));
        veth(&leaf, &leaf_port, &spine, &spine_port)?;
        addr(&leaf, &leaf_port, &format!("{}/30", link_addr(k, j, false)))?;
        addr(
            &spine,
            &spine_port,
            &format!("{}/30", link_addr(k, j, true)),
        )?;
        if self.shape.routing == Routing::Static {
            let back = link_addr(k, j, false).to_string();
            ip(&["-n", &spine, "route", "add", &leaf_prefix(k), "via", &back])?;
        }
        if let Some(mbit) = self.shape.rates.rate(j, k) {
            tbf(&spine, &spine_port, "add", mbit, self.shape.queues)?;
        }
        Ok(())
    }

    /// Changes every port of spine `j` toward a leaf to `mbit` while
    /// traffic runs (the queues keep their kind; [`Self::shape`] keeps the
    /// rates the fabric was built with).
    pub fn set_spine_rate(&self, j: usize, mbit: u32) -> Result<()> {
        let spine = self.ns(&format!("s{j}"));
        for k in 1..=self.shape.leaves {
            tbf(&spine, &format!("l{k}"), "change", mbit, self.shape.queues)?;
        }
        Ok(())
    }

    /// Leaf `k`'s multipath route to every other leaf over every spine.
    fn leaf_routes(&self, k: usize) -> Result<()> {
        let leaf = self.ns(&format!("l{k}"));
        for m in other_leaves(self.shape.leaves, k) {
            let prefix = leaf_prefix(m);
            let mut args = vec!["-n", leaf.as_str(), "route", "add", prefix.as_str()];
            let hops: Vec<String> = (1..=self.shape.spines)
                .map(|j| link_addr(k, j, true).to_string())
                .collect();
            for hop in &hops {
                args.extend(["nexthop", "via", hop.as_str()]);
            }
            ip(&args)?;
        }
        Ok(())
    }

    /// fabriclb's config for leaf `k`: XDP on its host ports, a group over
    /// the spines with the TOML keys `group` adds (mode, ...), a hash seed
    /// of its own, as each switch of a fabric needs against polarization.
    /// Statically routed, the group lists the spines (next hops by IP) and
    /// every other leaf's hosts are routed over it; with BGP, it follows
    /// the kernel's BGP routes and names no next hop.
    ///
    /// With `telemetry = "remote"` among the keys, the group reads each
    /// spine's exporter ([`super::Exporters::start_fabric`]), with
    /// `"counters-db"` each spine's COUNTERS_DB ([`FlexCounters`]), and has
    /// a destination per other leaf: its hosts' prefix, rated by each
    /// spine's port toward that leaf. Every spine is read over the
    /// management network: a learned one at the address the group's
    /// `switch_addresses` gives the port toward it.
    pub fn leaf_config(&self, k: usize, group: &str, sampling: Sampling) -> String {
        let source = ["remote", "counters-db"].into_iter().find(|source| {
            group
                .lines()
                .any(|l| l.replace(' ', "") == format!("telemetry=\"{source}\""))
        });
        let mut text = spine_group_header(0x5eed_0000 + k as u32, self.shape.hosts, group);
        // Every route has a destination: the spine's port back toward this
        // leaf rates none of them.
        let learned = self.shape.routing == Routing::Bgp;
        if learned {
            text.push_str("kernel_routes = { table = \"main\", protocol = \"bgp\" }\n");
            let switches = (1..=self.shape.spines)
                .map(|j| format!("s{j} = \"{}\"", mgmt_addr(Router::Spine(j))))
                .collect::<Vec<_>>()
                .join(", ");
            match source {
                Some("remote") => text.push_str(&format!(
                    "telemetry_url = \"http://{{switch}}:{}/metrics\"\n\
                     telemetry_device = \"l{k}\"\nswitch_addresses = {{ {switches} }}\n",
                    exporters::PORT,
                )),
                Some(_) => text.push_str(&format!(
                    "counters_db = \"redis://{{switch}}:{}\"\nsonic_port = \"l{k}\"\n\
                     switch_addresses = {{ {switches} }}\n",
                    flex_counters::PORT,
                )),
                None => {}
            }
        } else {
            text.push_str("next_hops = [\n");
            for j in 1..=self.shape.spines {
                let spine = link_addr(k, j, true);
                let telemetry = match source {
                    Some("remote") => format!(
                        ", telemetry_url = \"{}\", telemetry_device = \"l{k}\"",
                        exporters::Exporters::fabric_url(j)
                    ),
                    Some(_) => format!(
                        ", counters_db = \"{}\", sonic_port = \"l{k}\"",
                        flex_counters::address(j)
                    ),
                    None => String::new(),
                };
                text.push_str(&format!(
                    "  {{ interface = \"s{j}\", ip = \"{spine}\"{telemetry} }},\n"
                ));
            }
            text.push_str("]\n");
        }
        if source.is_some() {
            text.push_str("destinations = [\n");
            for m in other_leaves(self.shape.leaves, k) {
                text.push_str(&format!(
                    "  {{ name = \"l{m}\", prefixes = [\"{}\"], telemetry_device = \"l{m}\" }},\n",
                    leaf_prefix(m)
                ));
            }
            let Sampling {
                interval_us,
                ewma_time_constant_us,
                worst_band_hold_us,
            } = sampling;
            text.push_str(&format!(
                "]\n\n[ars_profile]\nsampling_interval = {interval_us}\n\
                 ewma_time_constant = {ewma_time_constant_us}\n\
                 worst_band_hold = {worst_band_hold_us}\n"
            ));
        }
        if !learned {
            for m in other_leaves(self.shape.leaves, k) {
                text.push_str(&format!(
                    "\n[[route]]\nprefix = \"{}\"\ngroup = \"spines\"\n",
                    leaf_prefix(m)
                ));
            }
        }
        text
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

impl Drop for Fabric {
    fn drop(&mut self) {
        self.down();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_address_plan_keeps_leaves_links_and_hosts_apart() {
        assert_eq!(link_addr(3, 2, true), Ipv4Addr::new(198, 18, 3, 10));
        assert_eq!(link_addr(3, 2, false), Ipv4Addr::new(198, 18, 3, 9));
        assert_eq!(link_addr(MAX_LEAVES, MAX_SPINES, true).octets()[3], 66);
        assert_eq!(host_addr(1, 1), Ipv4Addr::new(198, 19, 1, 1));
        assert_eq!(host_addr(2, 3), Ipv4Addr::new(198, 19, 19, 1));
        assert_eq!(leaf_prefix(2), "198.19.16.0/20");
        // The last host of the last leaf stays inside 198.19.0.0/16, in
        // its leaf's /20.
        assert_eq!(host_subnet(MAX_LEAVES, MAX_HOSTS), 255);
        assert_eq!(leaf_prefix(MAX_LEAVES), "198.19.240.0/20");
        // The management network keeps leaves and spines apart too.
        assert_eq!(
            mgmt_addr(Router::Leaf(MAX_LEAVES)),
            Ipv4Addr::new(198, 18, 255, 16)
        );
        assert_eq!(
            mgmt_addr(Router::Spine(1)),
            Ipv4Addr::new(198, 18, 255, 129)
        );
        assert_eq!(mgmt_addr(Router::Spine(MAX_SPINES)).octets()[3], 144);
    }
}
