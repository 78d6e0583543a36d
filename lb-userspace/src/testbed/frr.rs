//! BGP in the testbed (`--routing bgp`): FRR's zebra and bgpd in the leaf,
//! every spine and the far leaf, eBGP with one AS per tier, so the leaf's
//! routes to the receivers are the kernel routes FRR installs (over every
//! spine, `maximum-paths`), not static ones.
//!
//! Each router's daemons run as FRR's own user with a directory of their
//! own (config, pid files, the zebra and vty sockets) under the system's
//! temporary directory, in the router's namespace; they outlive the
//! process that started them (`fabriclb testbed up`), so teardown stops
//! them by their pid files.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};

use super::fabric;
use super::netns::{output, run};
use super::topology::{host_addr, receiver_addr, spine_addr};

/// Where Debian's `frr` package puts the daemons.
const DAEMONS: &str = "/usr/lib/frr";
/// Routes installed with their next hops inline, not through `ip nexthop`
/// objects: Debian 12's FRR (8.4) keeps a next-hop group whose member the
/// kernel deleted with a lost carrier, and moves the route back onto it
/// when the link returns, so the kernel forwards without that spine until
/// the group goes (fixed upstream in 2023, FRR pull request 14080). Inline routes
/// are rewritten whole at each change.
const ZEBRA_CONF: &str = "no zebra nexthop kernel enable\n";
/// The leaf's, the spines' and the far leaf's AS.
pub const LEAF_AS: u32 = 65001;
pub const SPINE_AS: u32 = 65100;
pub const FAR_LEAF_AS: u32 = 65002;
/// A fabric's leaf K is in this AS + K.
const FABRIC_LEAF_AS: u32 = 65000;
/// How long the fabric may take to converge at start: sessions come up
/// with a 1 s connect timer, routes follow at once.
const CONVERGENCE: Duration = Duration::from_secs(60);

/// The routers of one testbed.
pub struct Routers {
    dir: PathBuf,
}

/// A router's role in the testbed, with what its config needs.
struct Router {
    role: String,
    asn: u32,
    router_id: String,
    /// (neighbour address, its AS).
    neighbours: Vec<(String, u32)>,
    networks: Vec<String>,
}

impl Routers {
    /// The directory testbed `name`'s routers keep their files in.
    fn dir(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("{name}-frr"))
    }

    /// Starts zebra and bgpd in the leaf, spines `1..=spines` and the far
    /// leaf of testbed `name` (namespaces `ns(role)`), then waits until the
    /// leaf has a route to every receiver over every spine and the far
    /// leaf one to every host.
    pub fn start(
        name: &str,
        hosts: usize,
        spines: usize,
        ns: impl Fn(&str) -> String,
    ) -> Result<Self> {
        let routers = Self::start_all(name, &plan(hosts, spines), &ns)?;
        let receivers: Vec<String> = (1..=hosts).map(|i| subnet(receiver_addr(i))).collect();
        let senders: Vec<String> = (1..=hosts).map(|i| subnet(host_addr(i))).collect();
        wait_for_routes(&ns("leaf"), &receivers, spines)?;
        wait_for_routes(&ns("fleaf"), &senders, spines)?;
        Ok(routers)
    }

    /// Starts zebra and bgpd on every leaf and spine of fabric `name` of
    /// `leaves` and `spines` (namespaces `ns(role)`, roles `l1`.. and
    /// `s1`..): eBGP as RFC 7938 lays a Clos out, the spines sharing one
    /// AS and each leaf an AS of its own, every leaf announcing its hosts'
    /// prefix. Waits until every leaf routes to every other leaf over
    /// every spine.
    pub fn start_fabric(
        name: &str,
        leaves: usize,
        spines: usize,
        ns: impl Fn(&str) -> String,
    ) -> Result<Self> {
        let routers = Self::start_all(name, &fabric_plan(leaves, spines), &ns)?;
        for k in 1..=leaves {
            let others: Vec<String> = fabric::other_leaves(leaves, k)
                .map(fabric::leaf_prefix)
                .collect();
            wait_for_routes(&ns(&format!("l{k}")), &others, spines)?;
        }
        Ok(routers)
    }

    fn start_all(name: &str, plan: &[Router], ns: &impl Fn(&str) -> String) -> Result<Self> {
        ensure!(
            Path::new(DAEMONS).join("bgpd").exists(),
            "FRR is not installed ({DAEMONS}/bgpd is missing): `cargo xtask setup` installs it"
        );
        // A stale testbed's routers were stopped with its namespaces
        // (`remove_namespaces`) before this one was built.
        let routers = Self {
            dir: Self::dir(name),
        };
        for router in plan {
            routers
                .start_router(router, &ns(&router.role))
                .with_context(|| format!("starting FRR on {}", router.role))?;
        }
        Ok(routers)
    }

    fn start_router(&self, router: &Router, ns: &str) -> Result<()> {
        let dir = self.dir.join(&router.role);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("zebra.conf"), ZEBRA_CONF)?;
        std::fs::write(dir.join("bgpd.conf"), config(router))?;
        run(Command::new("chown").args(["-R", "frr:frr"]).arg(&dir))?;
        for daemon in ["zebra", "bgpd"] {
            let path = |file: &str| dir.join(file).display().to_string();
            let mut command = Command::new("ip");
            command
                .args(["netns", "exec", ns])
                .arg(Path::new(DAEMONS).join(daemon))
                .args(["-d", "-u", "frr", "-g", "frr"])
                .args(["-f", &path(&format!("{daemon}.conf"))])
                .args(["-i", &path(&format!("{daemon}.pid"))])
                .args(["-z", &path("zserv.api")])
                .args(["--vty_socket", &path("")])
                .args(["--log", &format!("file:{}", path(&format!("{daemon}.log")))])
                // No vty over TCP: vtysh reaches it through the socket.
                .args(["-P", "0"]);
            run(&mut command)?;
            if daemon == "zebra" {
                // bgpd connects to zebra's socket once, at start.
                wait_for(&dir.join("zserv.api"))?;
            }
        }
        Ok(())
    }

    /// Runs vtysh `commands` (each one `-c`) on router `role` in namespace
    /// `ns`; returns what it printed.
    pub fn vtysh(&self, role: &str, ns: &str, commands: &[&str]) -> Result<String> {
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", ns, "vtysh", "--vty_socket"])
            .arg(self.dir.join(role));
        for c in commands {
            command.args(["-c", c]);
        }
        output(&mut command)
    }

    /// Shuts (or brings back) spine `j`'s session with the leaf, on the
    /// spine's side: the leaf loses its routes through it as a drained or
    /// failed spine takes them away.
    pub fn set_spine_session(&self, j: usize, ns: &str, up: bool) -> Result<()> {
        let verb = if up { "no neighbor" } else { "neighbor" };
        self.configure_spine(j, ns, &format!("{verb} {} shutdown", leaf_side(j)))
    }

    /// Puts spine `j` into (or out of) graceful shutdown (RFC 8326): its
    /// sessions stay up, its routes carry the GRACEFUL_SHUTDOWN community,
    /// which FRR on the leaf answers with local preference 0, so the leaf
    /// stops using the spine before it goes.
    pub fn set_spine_graceful_shutdown(&self, j: usize, ns: &str, on: bool) -> Result<()> {
        let verb = if on { "" } else { "no " };
        self.configure_spine(j, ns, &format!("{verb}bgp graceful-shutdown"))
    }

    /// `command` under spine `j`'s `router bgp`, in namespace `ns`.
    fn configure_spine(&self, j: usize, ns: &str, command: &str) -> Result<()> {
        let router = format!("router bgp {SPINE_AS}");
        let commands = ["configure terminal", router.as_str(), command];
        self.vtysh(&format!("s{j}"), ns, &commands).map(drop)
    }
}

/// Stops testbed `name`'s routers by their pid files and removes their
/// directory; nothing to do when there is none.
pub fn stop(name: &str) -> Result<()> {
    let dir = Routers::dir(name);
    let Ok(roles) = std::fs::read_dir(&dir) else {
        return Ok(());
    };
    let mut pids = Vec::new();
    for role in roles.flatten() {
        for daemon in ["bgpd", "zebra"] {
            let file = role.path().join(format!("{daemon}.pid"));
            if let Some(pid) = std::fs::read_to_string(&file)
                .ok()
                .and_then(|p| p.trim().parse::<i32>().ok())
            {
                pids.push(nix::unistd::Pid::from_raw(pid));
            }
        }
    }
    for &pid in &pids {
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
    }
    // zebra takes its routes out of the kernel as it stops; a second at
    // most, then they are killed.
    let deadline = Instant::now() + Duration::from_secs(2);
    while pids
        .iter()
        .any(|&p| nix::sys::signal::kill(p, None).is_ok())
    {
        if Instant::now() > deadline {
            for &pid in &pids {
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))
}

/// Spine `j`'s address on its link to the leaf's side: the leaf's own.
fn leaf_side(j: usize) -> String {
    format!("198.18.{j}.1")
}

/// The /24 a host or receiver sits in.
fn subnet(addr: std::net::Ipv4Addr) -> String {
    let [a, b, c, _] = addr.octets();
    format!("{a}.{b}.{c}.0/24")
}

fn plan(hosts: usize, spines: usize) -> Vec<Router> {
    let mut routers = vec![
        Router {
            role: "leaf".into(),
            asn: LEAF_AS,
            router_id: leaf_side(1),
            neighbours: (1..=spines)
                .map(|j| (spine_addr(j).to_string(), SPINE_AS))
                .collect(),
            networks: (1..=hosts).map(|i| subnet(host_addr(i))).collect(),
        },
        Router {
            role: "fleaf".into(),
            asn: FAR_LEAF_AS,
            router_id: "198.19.1.2".into(),
            neighbours: (1..=spines)
                .map(|j| (format!("198.19.{j}.1"), SPINE_AS))
                .collect(),
            networks: (1..=hosts).map(|i| subnet(receiver_addr(i))).collect(),
        },
    ];
    routers.extend((1..=spines).map(|j| Router {
        role: format!("s{j}"),
        asn: SPINE_AS,
        router_id: spine_addr(j).to_string(),
        neighbours: vec![
            (leaf_side(j), LEAF_AS),
            (format!("198.19.{j}.2"), FAR_LEAF_AS),
        ],
        networks: Vec::new(),
    }));
    routers
}

/// A fabric's routers: leaf K in AS [`FABRIC_LEAF_AS`] + K, announcing
/// its hosts' prefix to every spine; every spine in [`SPINE_AS`]. Each
/// peers over its links, so a session shares its link's fate.
fn fabric_plan(leaves: usize, spines: usize) -> Vec<Router> {
    let leaf_as = |k: usize| FABRIC_LEAF_AS + k as u32;
    let leaf_routers = (1..=leaves).map(|k| Router {
        role: format!("l{k}"),
        asn: leaf_as(k),
        router_id: fabric::mgmt_addr(fabric::Router::Leaf(k)).to_string(),
        neighbours: (1..=spines)
            .map(|j| (fabric::link_addr(k, j, true).to_string(), SPINE_AS))
            .collect(),
        networks: vec![fabric::leaf_prefix(k)],
    });
    let spine_routers = (1..=spines).map(|j| Router {
        role: format!("s{j}"),
        asn: SPINE_AS,
        router_id: fabric::mgmt_addr(fabric::Router::Spine(j)).to_string(),
        neighbours: (1..=leaves)
            .map(|k| (fabric::link_addr(k, j, false).to_string(), leaf_as(k)))
            .collect(),
        networks: Vec::new(),
    });
    leaf_routers.chain(spine_routers).collect()
}

/// bgpd's config: eBGP with 1 s keepalives and connect retries, updates
/// sent at once, multipath over as many paths as there are spines.
fn config(router: &Router) -> String {
    let mut c = format!(
        "hostname {}\nrouter bgp {}\n bgp router-id {}\n no bgp ebgp-requires-policy\n \
         no bgp network import-check\n timers bgp 1 3\n",
        router.role, router.asn, router.router_id
    );
    for (addr, asn) in &router.neighbours {
        let _ = write!(
            c,
            " neighbor {addr} remote-as {asn}\n neighbor {addr} timers connect 1\n \
             neighbor {addr} advertisement-interval 0\n"
        );
    }
    c.push_str(" address-family ipv4 unicast\n");
    for network in &router.networks {
        let _ = writeln!(c, "  network {network}");
    }
    c.push_str("  maximum-paths 16\n exit-address-family\n");
    c
}

fn wait_for(path: &Path) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !path.exists() {
        if Instant::now() > deadline {
            bail!("{} did not appear", path.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Waits until namespace `ns` routes every prefix in `prefixes` over
/// `paths` next hops, from BGP.
fn wait_for_routes(ns: &str, prefixes: &[String], paths: usize) -> Result<()> {
    let deadline = Instant::now() + CONVERGENCE;
    loop {
        let routes = output(Command::new("ip").args(["-n", ns, "route", "show", "proto", "bgp"]))?;
        let missing: Vec<&String> = prefixes
            .iter()
            .filter(|p| bgp_paths(&routes, p) != paths)
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "BGP did not converge in {CONVERGENCE:?}: {ns} lacks {paths} paths to {missing:?}; \
                 its BGP routes:\n{routes}"
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// How many next hops `ip route show` output gives `prefix`.
pub fn bgp_paths(routes: &str, prefix: &str) -> usize {
    let mut lines = routes.lines().skip_while(|l| !l.starts_with(prefix));
    let Some(first) = lines.next() else {
        return 0;
    };
    if first.contains(" via ") {
        return 1;
    }
    lines
        .take_while(|l| l.starts_with(char::is_whitespace))
        .filter(|l| l.trim_start().starts_with("nexthop via"))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_counted_from_ip_route_output() {
        let routes = "198.19.101.0/24 nhid 23 proto bgp metric 20 \n\
                      \tnexthop via 198.18.1.2 dev s1 weight 1 \n\
                      \tnexthop via 198.18.2.2 dev s2 weight 1 \n\
                      198.19.102.0/24 nhid 6 via 198.18.1.2 dev s1 proto bgp metric 20 \n";
        assert_eq!(bgp_paths(routes, "198.19.101.0/24"), 2);
        assert_eq!(bgp_paths(routes, "198.19.102.0/24"), 1);
        assert_eq!(bgp_paths(routes, "198.19.103.0/24"), 0);
    }

    #[test]
    fn every_router_peers_across_the_tiers() {
        let routers = plan(2, 3);
        assert_eq!(routers.len(), 5);
        let leaf = config(&routers[0]);
        assert!(leaf.contains("router bgp 65001\n"), "{leaf}");
        assert!(
            leaf.contains(" neighbor 198.18.3.2 remote-as 65100\n"),
            "{leaf}"
        );
        assert!(leaf.contains("  network 198.18.102.0/24\n"), "{leaf}");
        assert!(leaf.contains("  maximum-paths 16\n"), "{leaf}");
        let spine = config(&routers[4]);
        assert!(
            spine.contains(" neighbor 198.18.3.1 remote-as 65001\n"),
            "{spine}"
        );
        assert!(
            spine.contains(" neighbor 198.19.3.2 remote-as 65002\n"),
            "{spine}"
        );
    }

    #[test]
    fn a_fabric_peers_every_leaf_with_every_spine_over_its_links() {
        let routers = fabric_plan(3, 2);
        assert_eq!(routers.len(), 5);
        let leaf2 = config(&routers[1]);
        assert!(leaf2.contains("router bgp 65002\n"), "{leaf2}");
        assert!(leaf2.contains(" bgp router-id 198.18.255.2\n"), "{leaf2}");
        assert!(
            leaf2.contains(" neighbor 198.18.2.6 remote-as 65100\n"),
            "{leaf2}"
        );
        assert!(leaf2.contains("  network 198.19.16.0/20\n"), "{leaf2}");
        let spine2 = config(&routers[4]);
        assert!(
            spine2.contains(" neighbor 198.18.3.9 remote-as 65003\n"),
            "{spine2}"
        );
        assert!(!spine2.contains("  network "), "{spine2}");
    }
}
