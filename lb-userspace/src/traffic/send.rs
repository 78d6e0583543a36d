//! Putting a [`Generator`]'s frames on the wire: pacing, the TX ring, and
//! the sending host's addresses.

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use super::txring::TxRing;
use super::{Generator, Sender};
use crate::netlink::{self, Netlink};

/// How fast to send.
#[derive(Clone, Copy, Debug, Default)]
pub struct Pace {
    /// Target packets per second; `None` sends as fast as the ring drains.
    pub rate_pps: Option<u64>,
    /// Idle time after each round of messages: the gap that lets a flowlet
    /// switch move a flow without reordering it.
    pub gap: Duration,
    /// Send as a NIC serving all its active QPs does: a round's messages
    /// interleaved packet by packet, at `rate_pps` throughout the round
    /// ([`SPREAD_BURST`] packets at a time). Without it a round leaves in
    /// one burst at the ring's speed and the pacer waits after it; where
    /// the senders' links are faster than the fabric's, as on a testbed of
    /// veths, several such bursts meeting at one port are an incast no
    /// load balancing can spread.
    pub spread: bool,
}

/// Packets a spread sender puts on the wire back to back.
pub const SPREAD_BURST: u64 = 4;

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
        let mut round = generator.next_round();
        if round.is_empty() {
            break;
        }
        if pace.spread {
            round = interleaved(round, generator.frames_per_message());
        }
        let rate = pace.rate_pps.filter(|&p| p > 0);
        for frame in &round {
            while !ring.queue(frame)? {
                ring.flush()?;
            }
            report.packets += 1;
            report.bytes += frame.len() as u64;
            if let Some(pps) =
                rate.filter(|_| pace.spread && report.packets.is_multiple_of(SPREAD_BURST))
            {
                ring.flush()?;
                wait_until(start, report.packets, pps);
            }
        }
        let paced = pace.rate_pps.is_some() || !pace.gap.is_zero();
        if !paced {
            // Unpaced: only a full ring (or the end) costs a syscall.
            continue;
        }
        ring.flush()?;
        if let Some(pps) = rate {
            wait_until(start, report.packets, pps);
        }
        if !pace.gap.is_zero() {
            std::thread::sleep(pace.gap);
        }
    }
    ring.flush()?;
    report.elapsed = start.elapsed();
    Ok(report)
}

/// Sleeps until `packets` are due at `pps` from `start`.
fn wait_until(start: Instant, packets: u64, pps: u64) {
    let due = start + Duration::from_secs_f64(packets as f64 / pps as f64);
    if let Some(wait) = due.checked_duration_since(Instant::now()) {
        std::thread::sleep(wait);
    }
}

/// `round`'s messages (runs of `per_message` frames) interleaved frame by
/// frame: each message's frames stay in order, one of each in turn.
fn interleaved(round: Vec<Vec<u8>>, per_message: usize) -> Vec<Vec<u8>> {
    let total = round.len();
    let mut messages = Vec::new();
    let mut frames = round.into_iter();
    while frames.len() > 0 {
        let message: Vec<Vec<u8>> = frames.by_ref().take(per_message.max(1)).collect();
        messages.push(message.into_iter());
    }
    let mut out = Vec::with_capacity(total);
    while out.len() < total {
        for message in &mut messages {
            out.extend(message.next());
        }
    }
    out
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

#[cfg(test)]
mod tests {
    use super::interleaved;

    #[test]
    fn interleaving_takes_one_frame_of_each_message_in_turn() {
        // Three messages of three frames; a short last run keeps its order.
        let round: Vec<Vec<u8>> = [1, 2, 3, 11, 12, 13, 21, 22].map(|b| vec![b]).to_vec();
        let order: Vec<u8> = interleaved(round, 3).into_iter().map(|f| f[0]).collect();
        assert_eq!(order, [1, 11, 21, 2, 12, 22, 3, 13]);
    }
}
