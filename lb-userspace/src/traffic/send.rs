//! Putting a [`Generator`]'s frames on the wire: pacing, the TX ring, and
//! the sending host's addresses.

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use super::txring::TxRing;
use super::{Generator, Sender};
use crate::netlink::{self, Netlink};

/// How fast to send.
#[derive(Clone, Copy, Debug)]
pub struct Pace {
    /// Target packets per second; `None` sends as fast as the ring drains.
    pub rate_pps: Option<u64>,
    /// Idle time after each round of messages: the gap that lets a flowlet
    /// switch move a flow without reordering it.
    pub gap: Duration,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendReport {
    pub packets: u64,
    pub bytes: u64,
    pub elapsed: Duration,
    /// CLOCK_MONOTONIC nanoseconds just before the first packet went out:
    /// the clock `bpf_ktime_get_ns` reads, so receivers' XDP timestamps
    /// compare with it.
    pub started_ns: u64,
}

/// Sends the whole workload out of `interface` through an AF_PACKET TX
/// ring: one syscall per paced round, or per full ring when unpaced; never
/// one per packet.
pub fn send(interface: &str, mut generator: Generator, pace: Pace) -> anyhow::Result<SendReport> {
    let mut ring = TxRing::open(interface, 1024, 8192)?;
    let start = Instant::now();
    let mut report = SendReport {
        started_ns: monotonic_ns()?,
        ..SendReport::default()
    };
    loop {
        let round = generator.next_round();
        if round.is_empty() {
            break;
        }
        for frame in &round {
            while !ring.queue(frame)? {
                ring.flush()?;
            }
            report.packets += 1;
            report.bytes += frame.len() as u64;
        }
        let paced = pace.rate_pps.is_some() || !pace.gap.is_zero();
        if !paced {
            // Unpaced: only a full ring (or the end) costs a syscall.
            continue;
        }
        ring.flush()?;
        if let Some(pps) = pace.rate_pps.filter(|&p| p > 0) {
            let due = start + Duration::from_secs_f64(report.packets as f64 / pps as f64);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
        if !pace.gap.is_zero() {
            std::thread::sleep(pace.gap);
        }
    }
    ring.flush()?;
    report.elapsed = start.elapsed();
    Ok(report)
}

/// CLOCK_MONOTONIC now, in nanoseconds.
pub fn monotonic_ns() -> nix::Result<u64> {
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)?;
    Ok(now.tv_sec() as u64 * 1_000_000_000 + now.tv_nsec() as u64)
}

/// The sending host's identity on `interface`, and its gateway's MAC from
/// the neighbour table (solicited if missing), in the calling thread's
/// network namespace.
pub fn resolve_sender(interface: &str, gateway: Ipv4Addr) -> anyhow::Result<Sender> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let netlink = Netlink::connect()?;
        let link = netlink.link(interface).await?;
        let ip = ipv4_of(interface)?;
        let deadline = Instant::now() + Duration::from_secs(3);
        loop {
            if let Some(mac) = netlink
                .neighbours()
                .await?
                .get(&(link.ifindex, IpAddr::V4(gateway)))
            {
                return Ok(Sender {
                    ip,
                    mac: link.mac,
                    gateway_mac: *mac,
                });
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "no ARP answer from gateway {gateway} on {interface}"
            );
            netlink::solicit(Some(interface), link.ifindex, IpAddr::V4(gateway))?;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
}

fn ipv4_of(interface: &str) -> anyhow::Result<Ipv4Addr> {
    nix::ifaddrs::getifaddrs()?
        .filter(|a| a.interface_name == interface)
        .find_map(|a| {
            a.address
                .and_then(|s| s.as_sockaddr_in().map(|sin| sin.ip()))
        })
        .ok_or_else(|| anyhow::anyhow!("{interface} has no IPv4 address"))
}
