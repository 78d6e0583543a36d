//! What the testbed's receiver program and the testbed agree on.

use crate::packet::roce::{MessageOrder, PsnOrder};

/// Testbed receiver: counts RoCEv2 packets per QP and judges their order.
pub const PROGRAM_SINK: &str = "fabriclb_sink";
/// Hash: [`SinkKey`] -> [`SinkQp`], filled by [`PROGRAM_SINK`].
pub const SINK_QPS: &str = "FL_SINK_QPS";
pub const MAX_SINK_QPS: u32 = 65_536;

/// A QP as a receiver sees it: sender address and destination QP.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SinkKey {
    pub src: [u8; 16],
    pub dest_qp: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SinkQp {
    pub order: PsnOrder,
    pub message: MessageOrder,
    pub bytes: u64,
    /// `bpf_ktime_get_ns` (CLOCK_MONOTONIC) at the latest packet: when a
    /// collective's last packet arrived, on the clock its senders read.
    pub last_ns: u64,
}

#[cfg(feature = "user")]
mod pod {
    // SAFETY: plain `#[repr(C)]` integers and byte arrays, no padding, every
    // bit pattern valid.
    unsafe impl aya::Pod for super::SinkKey {}
    unsafe impl aya::Pod for super::SinkQp {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_have_no_padding() {
        assert_eq!(core::mem::size_of::<SinkKey>(), 20);
        assert_eq!(core::mem::size_of::<SinkQp>(), 64);
    }
}
