//! Cross traffic: UDP from a namespace hanging off one spine toward the
//! far leaf, through the same shaped queue as the spine's share of the
//! collective, but from outside the leaf's view: what the leaf cannot
//! count, only telemetry of the spine's queue shows. The spine forwards
//! it, so it is a fixed load that the queue drops from, not a local
//! socket the queue would slow down. The far leaf counts what arrives, so
//! what the queue dropped of it can be told from what it dropped of the
//! collective.

use std::net::{Ipv4Addr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};

use super::Testbed;
use super::netns::in_netns;
use super::topology::CrossPort;

/// Datagram payload: with headers, about what the collective's frames are.
const PAYLOAD: usize = 1400;
/// The port the far leaf receives it on.
const PORT: u16 = 9471;
/// How long the far leaf waits at most for the last datagrams after
/// sending stops.
const GRACE: Duration = Duration::from_secs(2);
/// The receiver's read timeout: a read that times out found the socket
/// empty that long.
const EMPTY_READ: Duration = Duration::from_millis(20);
/// Empty reads after sending stopped that show nothing is still on its
/// way: the spine's queue (200 Mbit/s) holds at most 23 ms.
const EMPTY_READS_AFTER: u64 = 3;

/// UDP at a fixed rate through one spine, until stopped.
pub struct CrossTraffic {
    /// The namespace it is sent from, held to be removed on drop.
    _port: CrossPort,
    /// Stops the sender; the receiver has a flag of its own, so that it
    /// keeps counting while the queue drains.
    stop_sending: Arc<AtomicBool>,
    stop_receiving: Arc<AtomicBool>,
    sender: Option<JoinHandle<Result<u64>>>,
    counts: Arc<Counts>,
    receiver: Option<JoinHandle<Result<()>>>,
}

/// What the receiver counted: datagrams, and reads that found the socket
/// empty for [`EMPTY_READ`].
#[derive(Default)]
struct Counts {
    datagrams: AtomicU64,
    empty_reads: AtomicU64,
}

/// What it sent and what of it the spine's queue (or a link) lost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CrossReport {
    pub sent: u64,
    pub lost: u64,
}

impl CrossTraffic {
    /// Starts `mbit` Mbit/s of UDP through spine `j` to the far leaf's
    /// address on its link with that spine, which the spine sends out of
    /// its shaped device.
    pub fn start(bed: &Testbed, j: usize, mbit: u32) -> Result<Self> {
        let port = bed.add_cross_port(j)?;
        let target = Ipv4Addr::new(198, 19, j as u8, 2);
        let socket = in_netns(&bed.ns("fleaf"), move || UdpSocket::bind((target, PORT)))??;
        socket.set_read_timeout(Some(EMPTY_READ))?;
        // Room for a burst the counting thread is slow to read: a datagram
        // the socket drops would count as the queue's loss.
        nix::sys::socket::setsockopt(&socket, nix::sys::socket::sockopt::RcvBuf, &(8 << 20))?;
        let stop_sending = Arc::new(AtomicBool::new(false));
        let stop_receiving = Arc::new(AtomicBool::new(false));
        let counts = Arc::new(Counts::default());
        let receiver = {
            let (stop, counts) = (stop_receiving.clone(), counts.clone());
            std::thread::spawn(move || receive(&socket, &stop, &counts))
        };
        let sender = {
            let (stop, ns) = (stop_sending.clone(), port.ns().to_owned());
            std::thread::spawn(move || in_netns(&ns, move || send(target, mbit, &stop))?)
        };
        Ok(Self {
            _port: port,
            stop_sending,
            stop_receiving,
            sender: Some(sender),
            counts,
            receiver: Some(receiver),
        })
    }

    /// Stops sending, waits for the rest to arrive, and reports.
    pub fn stop(mut self) -> Result<CrossReport> {
        self.stop_sending.store(true, Ordering::Relaxed);
        let sent = self
            .sender
            .take()
            .context("stopped twice")?
            .join()
            .map_err(|_| anyhow!("cross sender panicked"))??;
        // Until every datagram is in, or the socket has stayed empty long
        // after the last was sent: a fixed wait counted datagrams still
        // queued, or unread by a receiver a busy machine had not run, as
        // the spine's losses.
        let deadline = Instant::now() + GRACE;
        let counts = &self.counts;
        let empty_before = counts.empty_reads.load(Ordering::Relaxed);
        while counts.datagrams.load(Ordering::Relaxed) < sent
            && counts.empty_reads.load(Ordering::Relaxed) < empty_before + EMPTY_READS_AFTER
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        let received = counts.datagrams.load(Ordering::Relaxed);
        self.stop_receiving.store(true, Ordering::Relaxed);
        if let Some(receiver) = self.receiver.take() {
            receiver
                .join()
                .map_err(|_| anyhow!("cross receiver panicked"))??;
        }
        Ok(CrossReport {
            sent,
            lost: sent.saturating_sub(received),
        })
    }
}

impl Drop for CrossTraffic {
    fn drop(&mut self) {
        self.stop_sending.store(true, Ordering::Relaxed);
        self.stop_receiving.store(true, Ordering::Relaxed);
    }
}

/// Sends to `target` at `mbit` until `stop`, in a burst per millisecond of
/// what the rate allows by then; returns the datagrams sent.
fn send(target: Ipv4Addr, mbit: u32, stop: &AtomicBool) -> Result<u64> {
    let socket = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
    socket.connect((target, PORT))?;
    let payload = [0u8; PAYLOAD];
    let per_second = f64::from(mbit) * 1e6 / 8.0 / PAYLOAD as f64;
    let start = Instant::now();
    let mut sent = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let due = (start.elapsed().as_secs_f64() * per_second) as u64;
        while sent < due {
            match socket.send(&payload) {
                Ok(_) => sent += 1,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(sent)
}

fn receive(socket: &UdpSocket, stop: &AtomicBool, counts: &Counts) -> Result<()> {
    let mut buf = [0u8; PAYLOAD + 1];
    while !stop.load(Ordering::Relaxed) {
        match socket.recv(&mut buf) {
            Ok(_) => {
                counts.datagrams.fetch_add(1, Ordering::Relaxed);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                counts.empty_reads.fetch_add(1, Ordering::Relaxed);
            }
            // A socket with a timeout is not restarted after a signal,
            // whatever the handler asked for.
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}
