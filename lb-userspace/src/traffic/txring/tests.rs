use super::*;
use std::fs::File;
use std::os::fd::FromRawFd;
use std::process::Command;
use std::sync::atomic::AtomicUsize;

use nix::sched::{CloneFlags, setns};

const ETHERTYPE: u16 = 0x88b5;
const DST: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
const SRC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];

/// Wraps an fd from `libc::socket` (nix lacks arbitrary ethertypes).
fn owned(fd: libc::c_int) -> Result<OwnedFd, Errno> {
    // SAFETY: a non-negative fd returned by socket() is ours to own.
    Errno::result(fd).map(|fd| unsafe { OwnedFd::from_raw_fd(fd) })
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A fresh namespace holding veth pair a <-> b, both up; deleted on drop
/// (also when a test panics).
struct Netns(String);

impl Netns {
    fn new() -> Netns {
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "fltx{}_{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        ip(&["netns", "add", &name]);
        let ns = Netns(name);
        ip(&[
            "-n", &ns.0, "link", "add", "name", "a", "type", "veth", "peer", "name", "b",
        ]);
        ip(&["-n", &ns.0, "link", "set", "dev", "a", "up"]);
        ip(&["-n", &ns.0, "link", "set", "dev", "b", "up"]);
        // Wait (bounded) for linkwatch to mark both ends up, so the
        // qdisc is active and nothing is dropped at the start.
        let deadline = Instant::now() + Duration::from_secs(5);
        for dev in ["a", "b"] {
            loop {
                let out = Command::new("ip")
                    .args(["-n", &ns.0, "-o", "link", "show", "dev", dev])
                    .output()
                    .expect("ip");
                if String::from_utf8_lossy(&out.stdout).contains("state UP") {
                    break;
                }
                assert!(Instant::now() < deadline, "{dev} in {} never came up", ns.0);
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        ns
    }

    /// Runs `f` on a new thread inside the namespace; panics propagate.
    fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = format!("/run/netns/{}", self.0);
        std::thread::spawn(move || {
            let file = File::open(&path).expect("open netns");
            setns(&file, CloneFlags::CLONE_NEWNET).expect("setns");
            f()
        })
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

/// Frame `seq`: 64..=128 bytes, sequence number first in the payload.
fn frame(seq: u32) -> Vec<u8> {
    let len = 64 + (seq % 65) as usize;
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&DST);
    f.extend_from_slice(&SRC);
    f.extend_from_slice(&ETHERTYPE.to_be_bytes());
    f.extend_from_slice(&seq.to_be_bytes());
    f.extend((f.len()..len).map(|i| (seq as usize * 7 + i) as u8));
    f
}

/// A socket on `iface` receiving only our ethertype, with a buffer big
/// enough for a whole test burst and a bounded receive wait.
fn receiver(iface: &str) -> OwnedFd {
    // SAFETY: plain socket() call.
    let fd =
        owned(unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })
            .expect("socket");
    socket::setsockopt(&fd, sockopt::RcvBufForce, &(64 << 20)).expect("SO_RCVBUFFORCE");
    socket::setsockopt(&fd, sockopt::ReceiveTimeout, &TimeVal::milliseconds(2000))
        .expect("SO_RCVTIMEO");
    // SAFETY: all-zero is a valid sockaddr_ll.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = ETHERTYPE.to_be();
    sll.sll_ifindex = nix::net::if_::if_nametoindex(iface).expect("ifindex") as i32;
    // SAFETY: valid sockaddr_ll with its size.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&raw const sll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    Errno::result(rc).expect("bind receiver");
    fd
}

fn expect_frames(rx: &OwnedFd, seqs: impl IntoIterator<Item = u32>) {
    let mut buf = [0u8; 4096];
    for seq in seqs {
        let n = socket::recv(rx.as_raw_fd(), &mut buf, MsgFlags::empty())
            .unwrap_or_else(|e| panic!("frame {seq} never arrived: {e}"));
        assert_eq!(&buf[..n], &frame(seq)[..], "frame {seq}");
    }
    // Nothing beyond what was expected.
    let extra = socket::recv(rx.as_raw_fd(), &mut buf, MsgFlags::MSG_DONTWAIT);
    assert_eq!(extra, Err(Errno::EAGAIN), "unexpected extra frame");
}

fn send_and_verify(ring_frames: u32) {
    let ns = Netns::new();
    let flushes = ns.run(move || {
        let rx = receiver("b");
        let mut tx = TxRing::open("a", ring_frames, 2048).expect("open");
        let mut flushes = 0;
        for seq in 0..1000 {
            let f = frame(seq);
            if !tx.queue(&f).expect("queue") {
                tx.flush().expect("flush");
                flushes += 1;
                assert!(
                    tx.queue(&f).expect("queue after flush"),
                    "ring still full after flush"
                );
            }
        }
        tx.flush().expect("flush");
        assert_eq!(tx.sent(), 1000);
        expect_frames(&rx, 0..1000);
        flushes
    });
    // A ring that holds the burst needs only the final flush.
    assert_eq!(
        flushes == 0,
        ring_frames >= 1000,
        "{flushes} intermediate flushes"
    );
}

#[test]
fn sends_1000_frames_in_one_batch() {
    send_and_verify(1024);
}

#[test]
fn sends_1000_frames_through_small_wrapping_ring() {
    send_and_verify(64);
}

#[test]
fn rejects_bad_lengths_and_geometry() {
    let ns = Netns::new();
    ns.run(|| {
        let mut tx = TxRing::open("a", 8, 2048).expect("open");
        assert_eq!(tx.max_frame_len(), 2048 - 32);
        let err = tx.queue(&vec![0; tx.max_frame_len() + 1]).unwrap_err();
        assert!(
            matches!(
                err,
                TxRingError::FrameTooLong {
                    len: 2017,
                    max: 2016,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains(" a "), "{err}");
        assert!(matches!(
            tx.queue(&[0; 13]),
            Err(TxRingError::FrameTooShort { .. })
        ));
        assert!(matches!(
            TxRing::open("a", 8, 3000),
            Err(TxRingError::InvalidGeometry { .. })
        ));
        assert!(matches!(
            TxRing::open("a", 8, 1024),
            Err(TxRingError::InvalidGeometry { .. })
        ));
        assert!(matches!(
            TxRing::open("a", 0, 2048),
            Err(TxRingError::InvalidGeometry { .. })
        ));
        let err = TxRing::open("nonexistent0", 8, 2048)
            .err()
            .expect("no such interface");
        assert!(err.to_string().contains("nonexistent0"), "{err}");
    });
}

#[test]
fn queue_reports_full_ring() {
    let ns = Netns::new();
    ns.run(|| {
        let rx = receiver("b");
        // 3 frames round up to 4: two 2048-byte frames per 4096-byte block.
        let mut tx = TxRing::open("a", 3, 2048).expect("open");
        assert_eq!(tx.capacity(), 4);
        for seq in 0..4 {
            assert!(tx.queue(&frame(seq)).expect("queue"), "slot {seq}");
        }
        assert!(!tx.queue(&frame(4)).expect("queue"), "ring should be full");
        assert_eq!(tx.sent(), 0);
        tx.flush().expect("flush");
        assert_eq!(tx.sent(), 4);
        assert!(tx.queue(&frame(4)).expect("queue"));
        tx.flush().expect("flush");
        assert_eq!(tx.sent(), 5);
        expect_frames(&rx, 0..5);
    });
}

#[test]
fn wrong_format_is_reported_and_ring_recovers() {
    let ns = Netns::new();
    ns.run(|| {
        let rx = receiver("b");
        let mut tx = TxRing::open("a", 8, 2048).expect("open");
        // Fits the slot but exceeds the 1500-byte MTU: only the kernel
        // can tell.
        let mut jumbo = frame(1);
        jumbo.resize(1600, 0xee);
        assert!(tx.queue(&frame(0)).expect("queue"));
        assert!(tx.queue(&jumbo).expect("queue"));
        assert!(tx.queue(&frame(2)).expect("queue"));
        let err = tx.flush().unwrap_err();
        assert!(
            matches!(err, TxRingError::WrongFormat { discarded: 2, .. }),
            "{err}"
        );
        assert!(tx.queue(&frame(3)).expect("queue"));
        tx.flush().expect("flush after recovery");
        assert_eq!(tx.sent(), 2);
        expect_frames(&rx, [0, 3]);
    });
}
