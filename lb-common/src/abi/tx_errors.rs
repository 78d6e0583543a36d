//! The transmit-error tracepoints: their programs' and maps' names, the
//! arguments they read, and what they count.
//!
//! A redirect the program asked for can still fail after it returned: the
//! kernel refuses the target (`xdp:xdp_redirect_err`, e.g. the egress
//! device is down) or the egress driver's bulk transmit drops frames
//! (`xdp:xdp_devmap_xmit`, e.g. its ring is full or its veth peer is
//! down). Neither shows in the forwarding path's counters. Both are raw
//! tracepoints: their arguments are the kernel's `TP_PROTO`, which the
//! daemon checks against the running kernel's BTF before attaching.

/// Raw tracepoint program on `xdp_redirect_err`.
pub const REDIRECT_ERR_PROGRAM: &str = "fabriclb_redirect_err";
/// Raw tracepoint program on `xdp_devmap_xmit`.
pub const DEVMAP_XMIT_PROGRAM: &str = "fabriclb_devmap_xmit";

/// Per-CPU hash: egress ifindex (`u32`) -> [`TxErrors`].
pub const TX_ERRORS: &str = "FL_TX_ERRORS";
/// Array, one slot: [`TxWatch`], written by the daemon.
pub const TX_WATCH: &str = "FL_TX_WATCH";
/// Hash: ingress ifindex (`u32`) the forwarding program is attached to ->
/// 1 (`u8`).
pub const INGRESS_PORTS: &str = "FL_INGRESS_PORTS";

/// `xdp_redirect_err(dev, xdp, tgt, err, map_type, map_id, index)`: the
/// arguments read.
pub mod redirect_err {
    pub const EVENT: &str = "xdp_redirect_err";
    /// The map redirected through: `FL_DEVMAP` is the forwarding
    /// program's.
    pub const MAP_ID: usize = 5;
    /// The map's key: `FL_DEVMAP` keys ports by egress ifindex.
    pub const INDEX: usize = 6;
}

/// `xdp_devmap_xmit(from_dev, to_dev, sent, drops, err)`: the arguments
/// read.
pub mod devmap_xmit {
    pub const EVENT: &str = "xdp_devmap_xmit";
    pub const FROM_DEV: usize = 0;
    pub const TO_DEV: usize = 1;
    pub const DROPS: usize = 3;
}

/// What tells the forwarding program's losses from others', and where the
/// running kernel keeps what the programs read of a `struct net_device`.
/// All zeros (nothing counted) until the daemon writes it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxWatch {
    /// The daemon's network namespace: ifindexes are only unique within
    /// one.
    pub netns_cookie: u64,
    /// `FL_DEVMAP`'s map id.
    pub devmap_id: u32,
    /// `struct net_device`'s `ifindex`, bytes.
    pub ifindex_offset: u32,
    /// `struct net_device`'s `nd_net.net`, bytes.
    pub net_offset: u32,
    /// `struct net`'s `net_cookie`, bytes.
    pub net_cookie_offset: u32,
}

/// Frames lost on one egress device after the program redirected them.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxErrors {
    /// Redirects the kernel refused (`xdp_redirect_err`).
    pub refused: u64,
    /// Frames the driver's transmit dropped (`xdp_devmap_xmit`'s `drops`).
    pub dropped: u64,
}

/// Sums CPUs' counters, or interfaces'.
impl core::ops::AddAssign for TxErrors {
    fn add_assign(&mut self, other: Self) {
        self.refused += other.refused;
        self.dropped += other.dropped;
    }
}

#[cfg(feature = "user")]
mod pod {
    // SAFETY: plain `#[repr(C)]` integers, no padding, every bit pattern
    // valid.
    unsafe impl aya::Pod for super::TxErrors {}
    unsafe impl aya::Pod for super::TxWatch {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_have_no_padding() {
        assert_eq!(core::mem::size_of::<TxErrors>(), 16);
        assert_eq!(core::mem::size_of::<TxWatch>(), 24);
    }

    #[test]
    fn counters_add_per_cause() {
        let mut sum = TxErrors {
            refused: 1,
            dropped: 2,
        };
        sum += TxErrors {
            refused: 10,
            dropped: 20,
        };
        assert_eq!(
            sum,
            TxErrors {
                refused: 11,
                dropped: 22
            }
        );
    }
}
