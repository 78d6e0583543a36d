//! What every fabriclb object links: the packet as the parser reads it,
//! and the panic handler a `no_std` binary needs.
//!
//! A crate of its own, without maps: bpf-linker keeps every map a linked
//! crate declares, used or not, so the testbed's receiver links this crate
//! rather than `lb-ebpf` and carries no forwarding maps.
#![no_std]

use aya_ebpf::programs::XdpContext;
use lb_common::packet::parse::PacketView;

/// The packet between `data` and `data_end`, read with the explicit end
/// checks the verifier needs.
pub struct Frame {
    pub start: usize,
    pub end: usize,
}

impl Frame {
    /// The packet `ctx` holds now.
    #[inline(always)]
    pub fn of(ctx: &XdpContext) -> Self {
        Self {
            start: ctx.data(),
            end: ctx.data_end(),
        }
    }
}

impl PacketView for Frame {
    #[inline(always)]
    fn len(&self) -> usize {
        self.end - self.start
    }

    #[inline(always)]
    fn bytes<const N: usize>(&self, offset: usize) -> Option<[u8; N]> {
        let at = self.start + offset;
        if at + N > self.end {
            return None;
        }
        // SAFETY: `at..at + N` lies inside the packet, checked above.
        Some(unsafe { core::ptr::read_unaligned(at as *const [u8; N]) })
    }
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}
