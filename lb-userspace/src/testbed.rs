//! A fabric in network namespaces for tests and the demo: a sender host,
//! the leaf running fabriclb, S spines forwarding with the kernel, and a
//! far host behind all spines.
//!
//! ```text
//!  h1 ── leaf ─┬─ s1 ─┐
//!              ├─ s2 ─┤
//!              ├─ .. ─┼── h2 (198.19.255.1)
//!              └─ sS ─┘
//! ```
//!
//! Addresses come from 198.18.0.0/15 (RFC 2544's benchmarking range) and
//! exist only inside the testbed's namespaces. Teardown deletes every
//! namespace, which deletes every veth; it runs on drop, so also after a
//! failed assertion.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::IoSliceMut;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use lb_common::maps::Reason;
use nix::sched::{CloneFlags, setns};
use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg, setsockopt, sockopt};

use crate::metrics;

/// Where h2 listens; every flow goes here.
pub const FAR_HOST: Ipv4Addr = Ipv4Addr::new(198, 19, 255, 1);
pub const SENDER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const LEAF_HOST_SIDE: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 254);
pub const FAR_PORT: u16 = 7471;
/// TTL the sender uses; h2 must see it minus two (leaf, spine).
pub const SENT_TTL: u8 = 64;

pub struct Testbed {
    name: String,
    spines: usize,
    namespaces: Vec<String>,
}

impl Testbed {
    /// Builds the fabric. `name` prefixes every namespace; it must not be in
    /// use (a stale testbed of the same name is removed first).
    pub fn up(name: &str, spines: usize) -> Result<Self> {
        ensure!(
            (1..=16).contains(&spines),
            "spines must be 1..=16, not {spines}"
        );
        let mut bed = Self {
            name: name.to_owned(),
            spines,
            namespaces: Vec::new(),
        };
        bed.remove_stale();
        bed.build()
            .with_context(|| format!("building testbed {name}"))?;
        Ok(bed)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn ns(&self, role: &str) -> String {
        format!("{}-{role}", self.name)
    }

    fn roles(&self) -> Vec<String> {
        let mut roles = vec!["h1".to_owned(), "leaf".to_owned(), "h2".to_owned()];
        roles.extend((1..=self.spines).map(|i| format!("s{i}")));
        roles
    }

    fn remove_stale(&self) {
        for role in self.roles() {
            let _ = Command::new("ip")
                .args(["netns", "del", &self.ns(&role)])
                .stderr(Stdio::null())
                .status();
        }
    }

    fn build(&mut self) -> Result<()> {
        for role in self.roles() {
            let ns = self.ns(&role);
            ip(&["netns", "add", &ns])?;
            self.namespaces.push(ns.clone());
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            // Packets from h1 reach h2 over every spine; strict reverse-path
            // filtering would drop all but one.
            sysctl(&ns, "net/ipv4/conf/all/rp_filter", "0")?;
            sysctl(&ns, "net/ipv4/conf/default/rp_filter", "0")?;
        }
        let (h1, leaf, h2) = (self.ns("h1"), self.ns("leaf"), self.ns("h2"));
        veth(&h1, "eth0", &leaf, "h1")?;
        // veth leaves UDP checksums to "hardware" (CHECKSUM_PARTIAL); once
        // the leaf's XDP turns the skb into a frame nobody fills them in and
        // h2 drops every datagram. Real NICs have no such gap.
        ethtool(&h1, &["-K", "eth0", "tx", "off"])?;
        addr(&h1, "eth0", &format!("{SENDER}/24"))?;
        addr(&leaf, "h1", &format!("{LEAF_HOST_SIDE}/24"))?;
        ip(&[
            "-n",
            &h1,
            "route",
            "add",
            "default",
            "via",
            &LEAF_HOST_SIDE.to_string(),
        ])?;
        ip(&[
            "-n",
            &h2,
            "addr",
            "add",
            &format!("{FAR_HOST}/32"),
            "dev",
            "lo",
        ])?;
        sysctl(&leaf, "net/ipv4/ip_forward", "1")?;
        for i in 1..=self.spines {
            let spine = self.ns(&format!("s{i}"));
            let s = format!("s{i}");
            sysctl(&spine, "net/ipv4/ip_forward", "1")?;
            veth(&leaf, &s, &spine, "leaf")?;
            addr(&leaf, &s, &format!("198.18.{i}.1/24"))?;
            addr(&spine, "leaf", &format!("198.18.{i}.2/24"))?;
            // Frames the leaf redirects with XDP arrive without an skb; a
            // veth accepts them only with NAPI on, which GRO turns on.
            ethtool(&spine, &["-K", "leaf", "gro", "on"])?;
            veth(&spine, "h2", &h2, &s)?;
            addr(&spine, "h2", &format!("198.19.{i}.1/24"))?;
            addr(&h2, &s, &format!("198.19.{i}.2/24"))?;
            ip(&[
                "-n",
                &spine,
                "route",
                "add",
                &format!("{FAR_HOST}/32"),
                "via",
                &format!("198.19.{i}.2"),
            ])?;
            ip(&[
                "-n",
                &spine,
                "route",
                "add",
                "198.18.0.0/24",
                "via",
                &format!("198.18.{i}.1"),
            ])?;
            sysctl(&h2, &format!("net/ipv4/conf/s{i}/rp_filter"), "0")?;
        }
        // The kernel's own path for what fabriclb passes up (and its
        // reply route from h2).
        ip(&[
            "-n",
            &leaf,
            "route",
            "add",
            "198.19.255.0/24",
            "via",
            "198.18.1.2",
        ])?;
        ip(&[
            "-n",
            &h2,
            "route",
            "add",
            "198.18.0.0/24",
            "via",
            "198.19.1.1",
        ])?;
        Ok(())
    }

    /// fabriclb's config for the leaf: XDP on the host port, one ECMP group
    /// over the spines, next hops by IP (resolved from ARP).
    pub fn leaf_config(&self) -> String {
        let mut text = String::from(
            "[switch]\nhash_seed = 0x5eed\ninterfaces = [\"h1\"]\n\n[[group]]\nname = \"spines\"\nnext_hops = [\n",
        );
        for i in 1..=self.spines {
            text.push_str(&format!(
                "  {{ interface = \"s{i}\", ip = \"198.18.{i}.2\" }},\n"
            ));
        }
        text.push_str("]\n\n[[route]]\nprefix = \"198.19.255.0/24\"\ngroup = \"spines\"\n");
        text
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

fn ethtool(ns: &str, args: &[&str]) -> Result<()> {
    run(Command::new("ip")
        .args(["netns", "exec", ns, "ethtool"])
        .args(args))
}

fn veth(ns_a: &str, name_a: &str, ns_b: &str, name_b: &str) -> Result<()> {
    ip(&[
        "-n", ns_a, "link", "add", name_a, "type", "veth", "peer", "name", name_b, "netns", ns_b,
    ])?;
    ip(&["-n", ns_a, "link", "set", name_a, "up"])?;
    ip(&["-n", ns_b, "link", "set", name_b, "up"])
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

/// What a traffic run saw.
#[derive(Debug)]
pub struct TrafficReport {
    pub sent: u64,
    pub received: u64,
    /// TTL at the far host -> datagrams.
    pub ttls: BTreeMap<u8, u64>,
    /// Per next hop: (label, packets), from the daemon's metrics.
    pub nexthops: Vec<(String, u64)>,
    pub forwarded: u64,
    pub passed_to_kernel: u64,
}

/// Starts `fabriclb run` on the leaf with the testbed's config, sends
/// `flows` UDP flows of `packets` datagrams each from h1 to h2, and
/// collects what arrived and what the daemon counted.
pub fn run_traffic(
    bed: &Testbed,
    fabriclb: &Path,
    workdir: &Path,
    flows: u16,
    packets: u32,
) -> Result<TrafficReport> {
    let config = workdir.join("leaf.toml");
    let metrics_file = workdir.join("leaf.prom");
    std::fs::write(&config, bed.leaf_config())?;
    let _ = std::fs::remove_file(&metrics_file);
    let mut daemon = Daemon::start(bed, fabriclb, &config, &metrics_file)?;

    let receiver = Receiver::start(&bed.ns("h2"))?;
    let sent = in_netns(&bed.ns("h1"), move || send_flows(flows, packets))??;
    let (received, ttls) = receiver.finish(sent)?;

    let text = daemon.stop_and_read_metrics()?;
    let nexthops = (1..=bed.spines)
        .map(|i| {
            let label = format!("s{i} 198.18.{i}.2");
            let packets = metrics::sample(
                &text,
                "fabriclb_nexthop_packets_total",
                &format!("nexthop=\"{label}\""),
            )
            .with_context(|| format!("no counter for {label} in {}", metrics_file.display()))?;
            Ok((label, packets))
        })
        .collect::<Result<Vec<_>>>()?;
    let count = |reason: Reason| {
        metrics::sample(
            &text,
            "fabriclb_packets_total",
            &format!("\"{}\"", reason.name()),
        )
    };
    Ok(TrafficReport {
        sent,
        received,
        ttls,
        nexthops,
        forwarded: count(Reason::Forwarded).unwrap_or(0),
        passed_to_kernel: Reason::ALL
            .into_iter()
            .filter(|r| *r != Reason::Forwarded)
            .filter_map(count)
            .sum(),
    })
}

/// `fabriclb run` inside the leaf namespace, stopped with SIGTERM.
struct Daemon {
    child: Child,
    metrics_file: PathBuf,
}

impl Daemon {
    fn start(bed: &Testbed, fabriclb: &Path, config: &Path, metrics_file: &Path) -> Result<Self> {
        let child = Command::new("ip")
            .args(["netns", "exec", &bed.ns("leaf")])
            .arg(fabriclb)
            .args(["run", "--metrics-interval-ms", "200", "--config"])
            .arg(config)
            .arg("--metrics-file")
            .arg(metrics_file)
            .stdin(Stdio::null())
            .spawn()
            .context("starting fabriclb run")?;
        let mut daemon = Self {
            child,
            metrics_file: metrics_file.to_owned(),
        };
        // The first metrics snapshot is written once the program is
        // attached and next hops are resolved.
        let deadline = Instant::now() + Duration::from_secs(20);
        while !metrics_file.exists() {
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

    fn stop_and_read_metrics(&mut self) -> Result<String> {
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
            let s = UdpSocket::bind((SENDER, 0))?;
            s.set_ttl(SENT_TTL.into())?;
            s.connect(SocketAddrV4::new(FAR_HOST, FAR_PORT))?;
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

/// Counts datagrams to [`FAR_HOST`] and their TTLs, on a thread in h2.
struct Receiver {
    handle: std::thread::JoinHandle<Result<(u64, BTreeMap<u8, u64>)>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Receiver {
    fn start(ns: &str) -> Result<Self> {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(u64::MAX));
        let expected = stop.clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let file = File::open(format!("/run/netns/{ns}"))?;
        let handle = std::thread::spawn(move || -> Result<(u64, BTreeMap<u8, u64>)> {
            setns(&file, CloneFlags::CLONE_NEWNET)?;
            let socket = UdpSocket::bind((FAR_HOST, FAR_PORT))?;
            setsockopt(&socket, sockopt::Ipv4RecvTtl, &true)?;
            // Room for a whole run, so a slow reader never drops.
            setsockopt(&socket, sockopt::RcvBufForce, &(32 << 20))?;
            socket.set_read_timeout(Some(Duration::from_millis(100)))?;
            let _ = ready_tx.send(());
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
        });
        ready_rx
            .recv_timeout(Duration::from_secs(5))
            .context("receiver did not start")?;
        Ok(Self { handle, stop })
    }

    /// Waits until `expected` datagrams arrived, or [`RECEIVE_GRACE`] passed.
    fn finish(self, expected: u64) -> Result<(u64, BTreeMap<u8, u64>)> {
        self.stop
            .store(expected, std::sync::atomic::Ordering::Release);
        self.handle
            .join()
            .map_err(|_| anyhow::anyhow!("receiver panicked"))?
    }
}
