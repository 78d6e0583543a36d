//! Plain UDP flows over sockets from h1 to r1 through a running
//! `fabriclb run`: arrival, TTLs and the daemon's counters.

use std::collections::BTreeMap;
use std::io::IoSliceMut;
use std::net::{SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg, setsockopt, sockopt};

use super::netns::in_netns;
use super::{
    Daemon, FAR_PORT, LeafCounters, LinkDrops, SENT_TTL, Testbed, host_addr, receiver_addr,
};

/// What a UDP traffic run saw.
#[derive(Debug)]
pub struct TrafficReport {
    pub sent: u64,
    pub received: u64,
    /// TTL at the receiver -> datagrams.
    pub ttls: BTreeMap<u8, u64>,
    /// What the testbed's links dropped during the run.
    pub drops: LinkDrops,
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
    let daemon = Daemon::start(bed, fabriclb, workdir, &bed.leaf_config(""), &[])?;
    let receiver = Receiver::start(&bed.ns("r1"))?;
    let drops_before = LinkDrops::read(bed)?;
    let sent = in_netns(&bed.ns("h1"), move || send_flows(flows, packets))??;
    let (received, ttls) = receiver.finish(sent)?;
    let drops = LinkDrops::read(bed)?.since(&drops_before);
    let text = daemon.stop()?;
    Ok(TrafficReport {
        sent,
        received,
        ttls,
        drops,
        leaf: LeafCounters::from_metrics(bed, &text)?,
    })
}

/// UDP flows from h1 to r1 sent until [`UdpLoad::stop`]: traffic for
/// tests that change the fabric under it, for as long as they take.
pub struct UdpLoad {
    stop: Arc<AtomicBool>,
    sender: Option<std::thread::JoinHandle<Result<u64>>>,
    receiver: Option<Receiver>,
    drops_before: LinkDrops,
}

/// What a [`UdpLoad`] sent, what arrived at r1 and what the links dropped.
#[derive(Debug)]
pub struct LoadReport {
    pub sent: u64,
    pub received: u64,
    pub drops: LinkDrops,
}

impl UdpLoad {
    /// Starts `flows` flows, one datagram each per 2 ms round: 64 flows
    /// leave no spine without one and stay within what a loaded machine
    /// forwards and receives without loss.
    pub fn start(bed: &Testbed, flows: u16) -> Result<Self> {
        let receiver = Receiver::start(&bed.ns("r1"))?;
        let drops_before = LinkDrops::read(bed)?;
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, ns) = (stop.clone(), bed.ns("h1"));
        let sender = std::thread::spawn(move || {
            in_netns(&ns, move || {
                send_rounds(flows, Duration::from_millis(2), |_| {
                    !flag.load(Ordering::Relaxed)
                })
            })?
        });
        Ok(Self {
            stop,
            sender: Some(sender),
            receiver: Some(receiver),
            drops_before,
        })
    }

    /// Stops sending and waits for what is still under way.
    pub fn stop(mut self, bed: &Testbed) -> Result<LoadReport> {
        self.stop.store(true, Ordering::Relaxed);
        let sent = self
            .sender
            .take()
            .context("stopped twice")?
            .join()
            .map_err(|_| anyhow::anyhow!("sender panicked"))??;
        let (received, _) = self
            .receiver
            .take()
            .context("stopped twice")?
            .finish(sent)?;
        Ok(LoadReport {
            sent,
            received,
            drops: LinkDrops::read(bed)?.since(&self.drops_before),
        })
    }
}

impl Drop for UdpLoad {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// `flows` flows of `packets` datagrams each.
fn send_flows(flows: u16, packets: u32) -> Result<u64> {
    // Paced so the veth queues never overflow: loss here would be the
    // testbed's, not fabriclb's.
    send_rounds(flows, Duration::from_millis(1), |round| round < packets)
}

/// One connected socket per flow (distinct source ports), one datagram
/// each per round, `pause` after each round, while `more(round)` holds.
fn send_rounds(flows: u16, pause: Duration, mut more: impl FnMut(u32) -> bool) -> Result<u64> {
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
    let mut round = 0;
    while more(round) {
        for s in &sockets {
            s.send(&payload)?;
            sent += 1;
        }
        std::thread::sleep(pause);
        round += 1;
    }
    Ok(sent)
}

/// How long the receiver waits for stragglers once the sender is done.
pub(super) const RECEIVE_GRACE: Duration = Duration::from_secs(10);

/// Counts datagrams to r1 and their TTLs, on a thread in r1.
struct Receiver {
    handle: std::thread::JoinHandle<Result<(u64, BTreeMap<u8, u64>)>>,
    /// How many datagrams to wait for; `u64::MAX` until the sender is done.
    expected: Arc<AtomicU64>,
}

impl Receiver {
    fn start(ns: &str) -> Result<Self> {
        let expected = Arc::new(AtomicU64::new(u64::MAX));
        let want = expected.clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let ns = ns.to_owned();
        let handle = std::thread::spawn(move || in_netns(&ns, move || receive(&want, ready_tx))?);
        ready_rx
            .recv_timeout(Duration::from_secs(5))
            .context("receiver did not start")?;
        Ok(Self { handle, expected })
    }

    /// Waits until `expected` datagrams arrived, or [`receive`] gave up.
    fn finish(self, expected: u64) -> Result<(u64, BTreeMap<u8, u64>)> {
        self.expected.store(expected, Ordering::Release);
        self.handle
            .join()
            .map_err(|_| anyhow::anyhow!("receiver panicked"))?
    }
}

/// Once the sender is done, how long no datagram may arrive before the
/// rest count as lost: a test that loses a few (a failover's) waited out
/// the whole [`RECEIVE_GRACE`], 10 s of the suite, while what was still
/// in flight arrives within milliseconds.
const RECEIVE_QUIET: Duration = Duration::from_secs(1);

/// Counts datagrams to r1's [`FAR_PORT`] and their TTLs until `expected`
/// arrived, or [`RECEIVE_GRACE`] passed after it was set, or none arrived
/// for [`RECEIVE_QUIET`] since.
fn receive(
    expected: &AtomicU64,
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
    let mut last_heard = Instant::now();
    let mut buf = [0u8; 2048];
    let mut cmsg = nix::cmsg_space!(i32);
    loop {
        let want = expected.load(Ordering::Acquire);
        let now = Instant::now();
        let quiet = deadline.is_some() && now.duration_since(last_heard) > RECEIVE_QUIET;
        if received >= want || quiet || deadline.is_some_and(|d| now > d) {
            return Ok((received, ttls));
        }
        if want != u64::MAX && deadline.is_none() {
            deadline = Some(now + RECEIVE_GRACE);
            last_heard = now;
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
                last_heard = Instant::now();
                for c in msg.cmsgs()? {
                    if let ControlMessageOwned::Ipv4Ttl(ttl) = c {
                        *ttls.entry(ttl as u8).or_insert(0) += 1;
                    }
                }
            }
            // A socket with a timeout is not restarted after a signal.
            Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}
