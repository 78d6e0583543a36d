//! What the live-frames generator's object and the testbed agree on: the
//! generator (run through BPF_PROG_TEST_RUN in live-frames mode, it builds
//! each frame from one of its flows' headers and transmits it) and the
//! counting drop that takes those frames wherever a run ends.

use crate::packet::roce::PSN_MASK;

/// The generator: writes the next flow's header over the frame, returns
/// XDP_TX.
pub const PROGRAM_GEN: &str = "fabriclb_gen";
/// Counts RoCEv2 frames in [`GEN_DROPPED`] and drops them; passes the rest
/// (ARP, ...), so neighbours still resolve through it.
pub const PROGRAM_GEN_DROP: &str = "fabriclb_gen_drop";
/// Array: [`GenHeader`] per flow, `MAX_GEN_FLOWS` entries.
pub const GEN_HEADERS: &str = "FL_GEN_HEADERS";
/// Array, one entry: how many of [`GEN_HEADERS`] are in use (u32).
pub const GEN_FLOWS: &str = "FL_GEN_FLOWS";
/// Per-CPU array, one entry: frames the generator built (u64).
pub const GEN_BUILT: &str = "FL_GEN_BUILT";
/// Per-CPU array, one entry: [`GenDropped`].
pub const GEN_DROPPED: &str = "FL_GEN_DROPPED";
pub const MAX_GEN_FLOWS: u32 = 1024;

/// Bytes of each frame the generator writes: Ethernet, IPv4, UDP and BTH
/// (54) and two more, a whole number of 8-byte words. Live-frames mode
/// copies the packet into a page only when the page is first used; a
/// recycled page comes back as the last hop left it (MACs and TTL
/// rewritten, another flow's header), so the generator writes every field
/// a hop may change, every time.
pub const GEN_HEADER_LEN: usize = 56;
/// Where the BTH's 24-bit PSN sits in an IPv4 RoCEv2 frame without VLAN.
pub const GEN_PSN_OFFSET: usize = 14 + 20 + 8 + 9;
const _: () = assert!(GEN_HEADER_LEN.is_multiple_of(8) && GEN_PSN_OFFSET + 3 <= GEN_HEADER_LEN);

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GenHeader {
    pub bytes: [u8; GEN_HEADER_LEN],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GenDropped {
    pub packets: u64,
    pub bytes: u64,
}

/// Frame `n` of a run over `flows` flows: the flow (round-robin, as the
/// collective's rounds take one QP after another) and its PSN (each flow's
/// own sequence, so a receiver sees every QP in order). `flows` 0 counts
/// as one.
#[inline(always)]
pub fn frame(n: u64, flows: u32) -> (u32, u32) {
    let flows = u64::from(flows.max(1));
    ((n % flows) as u32, (n / flows) as u32 & PSN_MASK)
}

#[cfg(feature = "user")]
mod pod {
    // SAFETY: `repr(C)` byte arrays and integers without padding, every bit
    // pattern valid.
    unsafe impl aya::Pod for super::GenHeader {}
    unsafe impl aya::Pod for super::GenDropped {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_take_turns_and_each_counts_its_own_psns() {
        let frames: Vec<_> = (0..7).map(|n| frame(n, 3)).collect();
        assert_eq!(
            frames,
            [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1), (0, 2)]
        );
        assert_eq!(frame(5, 0), (0, 5));
        // PSNs wrap at 24 bits, as the BTH's do.
        assert_eq!(frame(u64::from(PSN_MASK) + 1, 1), (0, 0));
    }
}
