//! Batched raw-frame transmission through an `AF_PACKET` `PACKET_TX_RING`.
//!
//! A traffic generator that calls `send()` once per frame spends most of its
//! time in syscall entry/exit. With a TX ring the frames are copied into
//! memory shared with the kernel, and a single `send()` makes the kernel walk
//! the ring and hand every queued frame to the driver.
//!
//! The ring uses `TPACKET_V2`: each slot is a `tpacket2_hdr` followed (at
//! `TPACKET_ALIGN(sizeof(tpacket2_hdr))`) by the frame bytes. Ownership of a
//! slot is carried by its `tp_status` word: `TP_STATUS_AVAILABLE` means user
//! space may write it, `TP_STATUS_SEND_REQUEST` hands it to the kernel,
//! `TP_STATUS_SENDING` means the kernel built an skb from it, and the skb's
//! destructor sets it back to `TP_STATUS_AVAILABLE`. The kernel consumes slots
//! strictly in ring order starting at its own head, so [`TxRing`] fills them in
//! the same order and keeps its write index in step with the kernel's.

use std::ffi::c_void;
use std::mem::size_of;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::socket::{self, AddressFamily, MsgFlags, SockFlag, SockType, sockopt};
use nix::sys::time::{TimeVal, TimeValLike};

/// Offset of the frame bytes inside a slot. Without `PACKET_TX_HAS_OFF` the
/// kernel reads the frame at `tp_hdrlen - sizeof(struct sockaddr_ll)`, which
/// for V2 is the 16-byte-aligned size of `tpacket2_hdr` (32).
const DATA_OFFSET: usize = libc::TPACKET2_HDRLEN - size_of::<libc::sockaddr_ll>();

/// Smallest frame the kernel accepts on an Ethernet device: its header.
const ETH_HLEN: usize = 14;

/// Smallest slot size: leaves room for a full 1500-byte-MTU frame and keeps
/// slots page-friendly.
const MIN_FRAME_SIZE: u32 = 2048;

/// How long one blocking `send()` may wait (for socket buffer space or for
/// the driver to release frames) before the kernel returns to us.
const SEND_TIMEOUT: Duration = Duration::from_secs(1);

/// Upper bound on a whole [`TxRing::flush`]; a ring that has not drained by
/// then indicates a stuck link, and the caller should hear about it.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(10);

/// Timestamp flags the kernel may OR into a returned slot's status when TX
/// timestamping is on; they don't change who owns the slot.
const TP_STATUS_TS_MASK: u32 =
    libc::TP_STATUS_TS_SOFTWARE | libc::TP_STATUS_TS_SYS_HARDWARE | libc::TP_STATUS_TS_RAW_HARDWARE;

/// Failures of [`TxRing`]; each names the interface and, for syscalls, which
/// call failed, since a generator usually drives several interfaces at once.
#[derive(Debug, thiserror::Error)]
pub enum TxRingError {
    #[error("invalid TX ring for {interface}: {reason}")]
    InvalidGeometry { interface: String, reason: String },
    #[error("{syscall} failed for interface {interface}: {source}")]
    Syscall {
        syscall: &'static str,
        interface: String,
        #[source]
        source: Errno,
    },
    #[error("frame of {len} bytes for {interface} exceeds the TX ring's {max}-byte limit")]
    FrameTooLong {
        interface: String,
        len: usize,
        max: usize,
    },
    #[error("frame of {len} bytes for {interface} is shorter than an Ethernet header")]
    FrameTooShort { interface: String, len: usize },
    #[error(
        "kernel rejected a frame on {interface} (TP_STATUS_WRONG_FORMAT, e.g. longer than \
         MTU); it and the frames queued after it ({discarded} in all) were discarded"
    )]
    WrongFormat { interface: String, discarded: usize },
    #[error(
        "flushing the TX ring of {interface} timed out after {timeout:?} with {pending} frames pending"
    )]
    FlushTimeout {
        interface: String,
        pending: usize,
        timeout: Duration,
    },
}

/// An `AF_PACKET` socket bound to one interface with a mmapped TX ring.
///
/// Frames are [`queue`](TxRing::queue)d into the ring and sent by
/// [`flush`](TxRing::flush) with one `send()` syscall per batch.
pub struct TxRing {
    /// Start of the mmapped ring; `frame_nr * frame_size` bytes.
    ring: NonNull<u8>,
    ring_len: usize,
    frame_size: usize,
    frame_nr: usize,
    /// Next slot to fill; always equal to the kernel's TX head plus the
    /// frames queued since the last send.
    head: usize,
    /// Oldest slot handed to the kernel but not yet seen back as available.
    tail: usize,
    /// Slots from `tail` up to (excluding) `head`.
    in_flight: usize,
    sent: u64,
    interface: String,
    /// Dropped after `Drop::drop` unmaps the ring, so the socket outlives it.
    fd: OwnedFd,
}

// SAFETY: the mapping is owned exclusively by this value (nothing else holds
// the pointer), and the kernel side is indifferent to which thread touches
// it; only socket creation is namespace-sensitive, and that happens in `open`.
unsafe impl Send for TxRing {}

impl TxRing {
    /// Opens an `AF_PACKET` `SOCK_RAW` socket bound to `interface` with
    /// protocol 0 (so it never receives, and costs nothing on RX), asks for
    /// `PACKET_QDISC_BYPASS` (best effort: frames from a generator need no
    /// queueing discipline), and sets up a TX ring of at least `frames` slots
    /// of `frame_size` bytes, rounded up to fill whole page-multiple blocks.
    ///
    /// The socket lives in the network namespace of the calling thread.
    /// `frame_size` must be a power of two of at least 2048.
    pub fn open(interface: &str, frames: u32, frame_size: u32) -> Result<Self, TxRingError> {
        let invalid = |reason: String| TxRingError::InvalidGeometry {
            interface: interface.to_owned(),
            reason,
        };
        let syscall_err = |syscall: &'static str| {
            move |source: Errno| TxRingError::Syscall {
                syscall,
                interface: interface.to_owned(),
                source,
            }
        };
        if frames == 0 {
            return Err(invalid("zero frames".into()));
        }
        if !frame_size.is_power_of_two() || frame_size < MIN_FRAME_SIZE {
            return Err(invalid(format!(
                "frame size {frame_size} is not a power of two >= {MIN_FRAME_SIZE}"
            )));
        }
        // SAFETY: sysconf has no memory-safety preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let page = u32::try_from(page)
            .ok()
            .filter(|p| p.is_power_of_two())
            .unwrap_or(4096);
        // Both are powers of two, so a block holds a whole number of frames
        // and slots sit back to back at `frame_size` strides in the mapping.
        let block_size = page.max(frame_size);
        let frames_per_block = block_size / frame_size;
        let block_nr = frames.div_ceil(frames_per_block);
        let frame_nr = block_nr
            .checked_mul(frames_per_block)
            .ok_or_else(|| invalid(format!("{frames} frames overflow the ring size")))?;
        let ring_len = usize::try_from(u64::from(block_nr) * u64::from(block_size))
            .map_err(|_| invalid(format!("{frames} frames of {frame_size} bytes overflow")))?;

        let ifindex =
            nix::net::if_::if_nametoindex(interface).map_err(syscall_err("if_nametoindex"))?;
        let ifindex = i32::try_from(ifindex)
            .map_err(|_| invalid(format!("ifindex {ifindex} out of range")))?;

        let fd = socket::socket(
            AddressFamily::Packet,
            SockType::Raw,
            SockFlag::SOCK_CLOEXEC,
            None,
        )
        .map_err(syscall_err("socket(AF_PACKET, SOCK_RAW)"))?;

        set_int_opt(
            &fd,
            libc::PACKET_VERSION,
            libc::tpacket_versions::TPACKET_V2 as libc::c_int,
        )
        .map_err(syscall_err("setsockopt(PACKET_VERSION)"))?;
        // Not every kernel/device allows bypass; the ring works either way.
        let _ = set_int_opt(&fd, libc::PACKET_QDISC_BYPASS, 1);

        let req = libc::tpacket_req {
            tp_block_size: block_size,
            tp_block_nr: block_nr,
            tp_frame_size: frame_size,
            tp_frame_nr: frame_nr,
        };
        // SAFETY: `req` is a valid tpacket_req and the length matches it.
        let rc = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_TX_RING,
                (&raw const req).cast::<c_void>(),
                size_of::<libc::tpacket_req>() as libc::socklen_t,
            )
        };
        Errno::result(rc).map_err(syscall_err("setsockopt(PACKET_TX_RING)"))?;

        // Bounds each blocking send() so flush() can enforce its deadline.
        let timeout = TimeVal::milliseconds(SEND_TIMEOUT.as_millis() as i64);
        socket::setsockopt(&fd, sockopt::SendTimeout, &timeout)
            .map_err(syscall_err("setsockopt(SO_SNDTIMEO)"))?;

        // SAFETY: mapping a fresh region (addr NULL) of the ring's exact size
        // from the socket; the result is checked against MAP_FAILED.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                ring_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(syscall_err("mmap(PACKET_TX_RING)")(Errno::last()));
        }
        let ring =
            NonNull::new(map.cast::<u8>()).ok_or_else(|| invalid("mmap returned NULL".into()))?;
        // From here on Drop unmaps the ring and closes the socket.
        let tx = TxRing {
            ring,
            ring_len,
            frame_size: frame_size as usize,
            frame_nr: frame_nr as usize,
            head: 0,
            tail: 0,
            in_flight: 0,
            sent: 0,
            interface: interface.to_owned(),
            fd,
        };

        // SAFETY: all-zero is a valid sockaddr_ll.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = 0;
        sll.sll_ifindex = ifindex;
        // SAFETY: `sll` is a valid sockaddr_ll and the length matches it.
        let rc = unsafe {
            libc::bind(
                tx.fd.as_raw_fd(),
                (&raw const sll).cast::<libc::sockaddr>(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        Errno::result(rc).map_err(syscall_err("bind(AF_PACKET)"))?;
        Ok(tx)
    }

    /// Largest frame a slot can carry: the slot minus the `tpacket2_hdr`
    /// in front of the data. (The device MTU may limit frames further; the
    /// kernel reports those as [`TxRingError::WrongFormat`] on flush.)
    pub fn max_frame_len(&self) -> usize {
        self.frame_size - DATA_OFFSET
    }

    /// Number of slots in the ring (`frames` rounded up to whole blocks):
    /// how many frames can be queued between flushes.
    pub fn capacity(&self) -> usize {
        self.frame_nr
    }

    /// Copies `frame` into the next free slot and hands it to the kernel
    /// (`TP_STATUS_SEND_REQUEST`); it goes out on the next [`flush`].
    ///
    /// Returns `Ok(false)` when every slot is still owned by the kernel: the
    /// caller should flush and retry.
    ///
    /// [`flush`]: TxRing::flush
    pub fn queue(&mut self, frame: &[u8]) -> Result<bool, TxRingError> {
        if frame.len() > self.max_frame_len() {
            return Err(TxRingError::FrameTooLong {
                interface: self.interface.clone(),
                len: frame.len(),
                max: self.max_frame_len(),
            });
        }
        if frame.len() < ETH_HLEN {
            return Err(TxRingError::FrameTooShort {
                interface: self.interface.clone(),
                len: frame.len(),
            });
        }
        if self.in_flight == self.frame_nr {
            // Slots the kernel finished with since the last flush are free.
            self.reclaim();
            if self.in_flight == self.frame_nr {
                return Ok(false);
            }
        }
        let slot = self.slot(self.head);
        let hdr = slot.cast::<libc::tpacket2_hdr>();
        // SAFETY: `slot` is in the mapping with `frame_size` bytes behind it,
        // 16-byte aligned; the frame fits after DATA_OFFSET (checked above);
        // the slot is ours because it is outside the in-flight window, so its
        // status was last seen (with Acquire) as available.
        unsafe {
            std::ptr::copy_nonoverlapping(frame.as_ptr(), slot.add(DATA_OFFSET), frame.len());
            std::ptr::write_volatile(&raw mut (*hdr).tp_len, frame.len() as u32);
            std::ptr::write_volatile(&raw mut (*hdr).tp_snaplen, frame.len() as u32);
        }
        // Release: the frame bytes and length are visible before the kernel
        // can observe the slot as its own.
        self.status(self.head)
            .store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
        self.head = (self.head + 1) % self.frame_nr;
        self.in_flight += 1;
        Ok(true)
    }

    /// Transmits everything queued with one blocking `send()` (more only if
    /// the kernel returns early, e.g. when the socket buffer was full), and
    /// returns once the kernel has released every queued slot, i.e. each
    /// frame has been handed to the driver. Bounded by an overall deadline.
    ///
    /// On [`TxRingError::WrongFormat`] the rejected frame and the ones queued
    /// after it are dropped so the ring stays usable; on other errors queued
    /// frames stay queued and a later flush retries them.
    pub fn flush(&mut self) -> Result<(), TxRingError> {
        let deadline = Instant::now() + FLUSH_TIMEOUT;
        loop {
            self.reap()?;
            if self.in_flight == 0 {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(TxRingError::FlushTimeout {
                    interface: self.interface.clone(),
                    pending: self.in_flight,
                    timeout: FLUSH_TIMEOUT,
                });
            }
            // Blocking (no MSG_DONTWAIT): the kernel sends every
            // SEND_REQUEST slot and then waits, up to SO_SNDTIMEO, for their
            // skbs to be released. No buffer: the ring is the payload.
            match socket::send(self.fd.as_raw_fd(), &[], MsgFlags::empty()) {
                Ok(_) | Err(Errno::EINTR | Errno::EAGAIN | Errno::ETIMEDOUT) => {}
                // The driver queue was full; the kernel left the frame queued.
                Err(Errno::ENOBUFS) => std::thread::sleep(Duration::from_micros(100)),
                Err(source) => {
                    self.reap()?;
                    // The kernel stops at a malformed slot, possibly while
                    // earlier ones are still being sent; look past them.
                    if let Some(bad) = (0..self.in_flight)
                        .map(|i| (self.tail + i) % self.frame_nr)
                        .find(|&s| {
                            self.status(s).load(Ordering::Acquire) & libc::TP_STATUS_WRONG_FORMAT
                                != 0
                        })
                    {
                        return Err(self.discard_from(bad));
                    }
                    return Err(TxRingError::Syscall {
                        syscall: "send(PACKET_TX_RING)",
                        interface: self.interface.clone(),
                        source,
                    });
                }
            }
        }
    }

    /// Frames the kernel has taken from the ring and released (handed to the
    /// driver) so far.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Pointer to slot `index`.
    fn slot(&self, index: usize) -> *mut u8 {
        debug_assert!(index < self.frame_nr);
        // SAFETY: index < frame_nr, so the offset is within the mapping.
        unsafe { self.ring.as_ptr().add(index * self.frame_size) }
    }

    /// The status word of slot `index`, shared with the kernel.
    fn status(&self, index: usize) -> &AtomicU32 {
        let hdr = self.slot(index).cast::<libc::tpacket2_hdr>();
        // SAFETY: tp_status is a 4-byte-aligned u32 in the live mapping
        // (slots are 16-byte aligned); the kernel only accesses it with
        // single word reads/writes, and it outlives the borrow of self.
        unsafe { AtomicU32::from_ptr(&raw mut (*hdr).tp_status) }
    }

    /// Advances `tail` over slots the kernel has released. Stops at a slot
    /// still being sent, or at a malformed one (returned as an error).
    fn reap(&mut self) -> Result<(), TxRingError> {
        self.reclaim();
        if self.in_flight > 0
            && self.status(self.tail).load(Ordering::Acquire) & libc::TP_STATUS_WRONG_FORMAT != 0
        {
            return Err(self.discard_from(self.tail));
        }
        Ok(())
    }

    /// Advances `tail` over slots the kernel has released.
    fn reclaim(&mut self) {
        while self.in_flight > 0 {
            // Acquire: the kernel is done with the slot before we reuse it.
            let status = self.status(self.tail).load(Ordering::Acquire) & !TP_STATUS_TS_MASK;
            if status != libc::TP_STATUS_AVAILABLE {
                break;
            }
            self.tail = (self.tail + 1) % self.frame_nr;
            self.in_flight -= 1;
            self.sent += 1;
        }
    }

    /// Drops the malformed slot `bad` and every slot queued after it. The
    /// kernel's head stays at `bad` after rejecting it, so rewinding our
    /// write index there keeps the two in step.
    fn discard_from(&mut self, bad: usize) -> TxRingError {
        let discarded = self.in_flight - (bad + self.frame_nr - self.tail) % self.frame_nr;
        for i in 0..discarded {
            self.status((bad + i) % self.frame_nr)
                .store(libc::TP_STATUS_AVAILABLE, Ordering::Release);
        }
        self.head = bad;
        self.in_flight -= discarded;
        TxRingError::WrongFormat {
            interface: self.interface.clone(),
            discarded,
        }
    }
}

impl Drop for TxRing {
    fn drop(&mut self) {
        // SAFETY: `ring`/`ring_len` describe the mapping made in `open`,
        // which nothing else references. The socket closes afterwards when
        // `fd` is dropped.
        unsafe {
            libc::munmap(self.ring.as_ptr().cast::<c_void>(), self.ring_len);
        }
    }
}

/// `setsockopt(SOL_PACKET, opt, &value)` for the integer options nix lacks.
fn set_int_opt(fd: &impl AsFd, opt: libc::c_int, value: libc::c_int) -> Result<(), Errno> {
    // SAFETY: passes a valid c_int with its exact size.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_fd().as_raw_fd(),
            libc::SOL_PACKET,
            opt,
            (&raw const value).cast::<c_void>(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    Errno::result(rc).map(drop)
}

#[cfg(test)]
mod tests;
