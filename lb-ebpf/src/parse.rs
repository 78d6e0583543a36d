//! Stage 1: the packet's headers, parsed into this CPU's scratch.

use lb_common::{
    packet::parse::{Parsed, parse_into},
    verdict::Reason,
};

use lb_ebpf_frame::Frame;

/// Parses the frame `start..end` into `out`.
// Not inlined: the parser's temporaries get a frame of their own, popped
// before `dynamic` pushes its own; the chain stays under 512 bytes. Takes
// the packet bounds rather than the context: LLVM would pass the context's
// 32-bit fields instead and widen them in here, and the verifier refuses
// arithmetic on `data_end`.
#[inline(never)]
pub fn parse_frame(start: usize, end: usize, out: &mut Parsed) -> Result<(), Reason> {
    parse_into(&Frame { start, end }, out)
}
