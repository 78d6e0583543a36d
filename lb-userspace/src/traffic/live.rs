//! The live-frames generator: `fabriclb_gen` run by BPF_PROG_TEST_RUN with
//! `BPF_F_TEST_XDP_LIVE_FRAMES`, each run's frames transmitted out of a
//! host's port as if a NIC had sent them, at millions of packets per second
//! from one core (the AF_PACKET TX ring tops out near 0.3 Mpps here). The
//! frames are a workload's flows (each connection's QPs, round-robin, each
//! QP's PSNs in order), one packet size. A veth peer runs what it receives
//! on the sending CPU, so a run measures the generator and everything
//! downstream together.
//!
//! A veth takes redirected frames only with an XDP program on it or GRO
//! on (its NAPI); with GRO on, as on every testbed veth, frames no program
//! takes go up its kernel's stack as any received packet does.
//!
//! [`DropCounter`] is where such a run ends: `fabriclb_gen_drop` counting
//! and dropping RoCEv2 frames on an interface.

use std::io::ErrorKind;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use aya::{
    Ebpf,
    maps::{Array, MapData, PerCpuArray},
    programs::{ProgramError, TestRun, TestRunAttrs, TestRunOptions, Xdp, XdpMode},
    sys::SyscallError,
};
use lb_common::abi::generator::{
    GEN_BUILT, GEN_DROPPED, GEN_FLOWS, GEN_HEADER_LEN, GEN_HEADERS, GenDropped, GenHeader,
    MAX_GEN_FLOWS, PROGRAM_GEN, PROGRAM_GEN_DROP,
};

use super::{Generator, Sender, Workload};

/// The generator's object, built from lb-ebpf by the build script: the
/// production object does not carry it.
static OBJECT: &[u8] = aya::include_bytes_aligned!(env!("FABRICLB_BPF_GEN_OBJECT"));

/// Frames per batch: what the kernel allocates, runs and flushes at once.
/// A veth's ring holds 256 frames; a batch of 64 leaves room for the
/// receiving side to fall behind by a few batches.
const BATCH: u32 = 64;

/// Runs a send may take when signals interrupt them; more is a signal
/// storm, not a pending child's exit.
const MAX_INTERRUPTIONS: u32 = 8;

/// What a [`LiveGenerator::send`] sent.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LiveReport {
    /// Frames the program built and returned XDP_TX for: the test run's
    /// repeat, checked against the program's own count (live-frames mode
    /// reports no verdict).
    pub packets: u64,
    pub frame_bytes: usize,
    /// Wall time of the run, downstream processing included.
    pub elapsed: Duration,
    /// Test runs a pending signal cut short, the rest sent in another.
    pub interrupted: u32,
}

impl LiveReport {
    pub fn pps(&self) -> f64 {
        self.packets as f64 / self.elapsed.as_secs_f64()
    }
}

/// `fabriclb_gen`, loaded with a workload's flows.
pub struct LiveGenerator {
    ebpf: Ebpf,
    /// The first flow's whole frame: every page starts as a copy of it.
    frame: Vec<u8>,
    /// `xdp_md` for the runs: the frame's length, the sending port.
    ctx: [u8; 24],
}

impl LiveGenerator {
    /// Loads the generator with every flow of `workload` from `sender`,
    /// to send out of `ifindex` (in the network namespace of the thread
    /// that calls [`Self::send`]). Each packet is a single-packet message
    /// of the exchange's `mtu` bytes.
    pub fn new(workload: Workload, sender: Sender, ifindex: u32) -> Result<Self> {
        let frames = flow_frames(workload, sender);
        let first = frames.first().context("the workload has no flows")?.clone();
        ensure!(
            frames.len() <= MAX_GEN_FLOWS as usize,
            "{} flows, the generator holds {MAX_GEN_FLOWS}",
            frames.len()
        );
        let mut ebpf = Ebpf::load(OBJECT)?;
        let mut headers: Array<_, GenHeader> = Array::try_from(
            ebpf.map_mut(GEN_HEADERS)
                .with_context(|| format!("{GEN_HEADERS} missing from the object"))?,
        )?;
        for (i, frame) in frames.iter().enumerate() {
            let mut header = GenHeader {
                bytes: [0; GEN_HEADER_LEN],
            };
            header.bytes.copy_from_slice(&frame[..GEN_HEADER_LEN]);
            headers.set(i as u32, header, 0)?;
        }
        let mut flows: Array<_, u32> = Array::try_from(
            ebpf.map_mut(GEN_FLOWS)
                .with_context(|| format!("{GEN_FLOWS} missing from the object"))?,
        )?;
        flows.set(0, frames.len() as u32, 0)?;
        let program: &mut Xdp = ebpf
            .program_mut(PROGRAM_GEN)
            .with_context(|| format!("{PROGRAM_GEN} missing from the object"))?
            .try_into()?;
        program.load()?;
        let mut ctx = [0u8; 24];
        ctx[4..8].copy_from_slice(&(first.len() as u32).to_ne_bytes());
        ctx[12..16].copy_from_slice(&ifindex.to_ne_bytes());
        Ok(Self {
            ebpf,
            frame: first,
            ctx,
        })
    }

    /// Sends `packets` frames, the next ones of every flow's sequence, out
    /// of the port, from the calling thread's network namespace and CPU.
    pub fn send(&mut self, packets: u32) -> Result<LiveReport> {
        let before = self.built()?;
        let program: &Xdp = self
            .ebpf
            .program(PROGRAM_GEN)
            .with_context(|| format!("{PROGRAM_GEN} missing from the object"))?
            .try_into()?;
        let start = Instant::now();
        let mut left = packets;
        let mut interrupted = 0;
        while left > 0 {
            let run = program.test_run(TestRunOptions {
                data_in: Some(&self.frame),
                ctx_in: Some(&self.ctx),
                repeat: left,
                attrs: TestRunAttrs::new().xdp_live_frames(BATCH),
                ..TestRunOptions::default()
            });
            match run {
                Ok(_) => break,
                // The kernel ends a run early with EINTR when a signal is
                // pending for the thread (once in a CI run), after sending
                // what it built: the rest is sent in another run.
                Err(ProgramError::SyscallError(SyscallError { io_error, .. }))
                    if io_error.kind() == ErrorKind::Interrupted
                        && interrupted < MAX_INTERRUPTIONS =>
                {
                    interrupted += 1;
                    let sent = self.built()? - before;
                    left = packets.saturating_sub(u32::try_from(sent).unwrap_or(u32::MAX));
                }
                Err(e) => {
                    return Err(e).context("a live-frames test run (needs Linux 5.18 or later)");
                }
            }
        }
        let elapsed = start.elapsed();
        let built = self.built()? - before;
        ensure!(
            built == u64::from(packets),
            "the generator built {built} frames in a run of {packets}"
        );
        Ok(LiveReport {
            packets: built,
            frame_bytes: self.frame.len(),
            elapsed,
            interrupted,
        })
    }

    fn built(&self) -> Result<u64> {
        let built: PerCpuArray<_, u64> = PerCpuArray::try_from(
            self.ebpf
                .map(GEN_BUILT)
                .with_context(|| format!("{GEN_BUILT} missing from the object"))?,
        )?;
        Ok(built.get(&0, 0)?.iter().sum())
    }
}

/// One frame per flow of `workload` (every connection's QPs in the order
/// its rounds use them), each a single-packet WRITE ONLY message of
/// the exchange's `mtu` bytes, PSN 0.
pub fn flow_frames(mut workload: Workload, sender: Sender) -> Vec<Vec<u8>> {
    let exchange = &mut workload.exchange;
    exchange.message_bytes = exchange.mtu;
    exchange.messages = exchange.qps_per_connection.max(1);
    exchange.small_messages = 0;
    Generator::new(workload, sender).frames()
}

/// `fabriclb_gen_drop` on an interface: counts the RoCEv2 frames that
/// reach it and drops them. Attached while it lives.
pub struct DropCounter {
    _ebpf: Ebpf,
    dropped: PerCpuArray<MapData, GenDropped>,
}

impl DropCounter {
    /// Attaches in driver mode to `interface` in the calling thread's
    /// network namespace.
    pub fn attach(interface: &str) -> Result<Self> {
        let mut ebpf = Ebpf::load(OBJECT)?;
        let program: &mut Xdp = ebpf
            .program_mut(PROGRAM_GEN_DROP)
            .with_context(|| format!("{PROGRAM_GEN_DROP} missing from the object"))?
            .try_into()?;
        program.load()?;
        program
            .attach(interface, XdpMode::Driver)
            .with_context(|| format!("attaching {PROGRAM_GEN_DROP} to {interface}"))?;
        let map = ebpf
            .take_map(GEN_DROPPED)
            .with_context(|| format!("{GEN_DROPPED} missing from the object"))?;
        Ok(Self {
            dropped: PerCpuArray::try_from(map)?,
            _ebpf: ebpf,
        })
    }

    /// RoCEv2 packets taken so far.
    pub fn packets(&self) -> Result<u64> {
        Ok(self.dropped.get(&0, 0)?.iter().map(|d| d.packets).sum())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use lb_common::abi::generator::GEN_PSN_OFFSET;
    use lb_common::packet::parse::parse;

    use super::*;
    use crate::dataplane::declared;
    use crate::traffic::{Exchange, Pattern};
    use crate::workload::tests::{SENDER, workload};

    /// The generator's object carries its own programs and maps, none of
    /// the forwarding path's.
    #[test]
    fn generator_object_holds_only_the_generator() {
        let (programs, maps) = declared(OBJECT);
        assert_eq!(
            programs,
            BTreeSet::from([PROGRAM_GEN.to_owned(), PROGRAM_GEN_DROP.to_owned()])
        );
        assert_eq!(
            maps,
            BTreeSet::from([GEN_HEADERS, GEN_FLOWS, GEN_BUILT, GEN_DROPPED].map(str::to_owned))
        );
    }

    #[test]
    fn every_qp_of_every_connection_once_with_its_psn_where_the_program_writes_it() {
        let mut workload = workload(Pattern::AllToAll, 0);
        workload.exchange = Exchange {
            message_bytes: 1 << 20,
            mtu: 256,
            messages: 1000,
            source_port_per_qp: true,
            small_messages: 3,
            ..workload.exchange
        };
        let frames = flow_frames(workload, SENDER);
        // Rank 1 of 4: three connections of 4 QPs.
        assert_eq!(frames.len(), 3 * 4);
        let mut flows = BTreeSet::new();
        for frame in &frames {
            assert_eq!(frame.len(), frames[0].len());
            let parsed = parse(&frame[..]).expect("parses");
            let bth = parsed.bth.expect("RoCEv2");
            assert_eq!(bth.opcode, lb_common::packet::roce::WRITE_ONLY);
            assert_eq!(bth.psn, 0);
            let mut later = frame.clone();
            later[GEN_PSN_OFFSET..GEN_PSN_OFFSET + 3].copy_from_slice(&[1, 2, 3]);
            let psn = parse(&later[..]).expect("parses").bth.expect("RoCEv2").psn;
            assert_eq!(psn, 0x01_0203, "the PSN is where the generator writes it");
            flows.insert((parsed.flow.dst, bth.dest_qp, parsed.flow.src_port));
        }
        assert_eq!(flows.len(), 12, "each frame a flow of its own");
    }
}
