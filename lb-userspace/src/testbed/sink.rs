//! The testbed's receiver: `fabriclb_sink` attached to a receiving host's
//! port, counting RoCEv2 packets, bytes and out-of-order arrivals per QP.

use aya::{
    Ebpf,
    maps::{HashMap, MapData},
    programs::{Xdp, XdpMode},
};
use lb_common::abi::sink::{PROGRAM_SINK, SINK_QPS, SinkKey, SinkQp};

/// The sink's own XDP object, built from lb-ebpf by the build script: the
/// production object does not carry it.
static OBJECT: &[u8] = aya::include_bytes_aligned!(env!("FABRICLB_BPF_SINK_OBJECT"));

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SinkTotals {
    pub qps: u64,
    pub packets: u64,
    pub bytes: u64,
    /// Packets that broke their QP's PSN order.
    pub out_of_order: u64,
    /// Packets that arrived after a later packet of their QP: reordering,
    /// which losses never cause.
    pub late: u64,
    /// MIDDLE/LAST packets that did not follow their message's previous
    /// packet: reordering a receiver cannot place.
    pub message_out_of_order: u64,
    /// CLOCK_MONOTONIC nanoseconds at the latest packet of any QP; 0 before
    /// the first.
    pub last_ns: u64,
}

impl std::ops::Add for SinkTotals {
    type Output = Self;

    fn add(self, other: Self) -> Self {
        Self {
            qps: self.qps + other.qps,
            packets: self.packets + other.packets,
            bytes: self.bytes + other.bytes,
            out_of_order: self.out_of_order + other.out_of_order,
            late: self.late + other.late,
            message_out_of_order: self.message_out_of_order + other.message_out_of_order,
            last_ns: self.last_ns.max(other.last_ns),
        }
    }
}

/// Attached while it lives; dropping it detaches.
pub struct Sink {
    _ebpf: Ebpf,
    qps: HashMap<MapData, SinkKey, SinkQp>,
}

impl Sink {
    /// Loads the sink and attaches it in driver mode to `interface` in the
    /// calling thread's network namespace.
    pub fn attach(interface: &str) -> anyhow::Result<Self> {
        let mut ebpf = Ebpf::load(OBJECT)?;
        let program: &mut Xdp = ebpf
            .program_mut(PROGRAM_SINK)
            .ok_or_else(|| anyhow::anyhow!("{PROGRAM_SINK} missing from the object"))?
            .try_into()?;
        program.load()?;
        program.attach(interface, XdpMode::Driver)?;
        let map = ebpf
            .take_map(SINK_QPS)
            .ok_or_else(|| anyhow::anyhow!("{SINK_QPS} missing from the object"))?;
        Ok(Self {
            qps: HashMap::try_from(map)?,
            _ebpf: ebpf,
        })
    }

    /// Every QP seen so far.
    pub fn qps(&self) -> anyhow::Result<Vec<(SinkKey, SinkQp)>> {
        Ok(self.qps.iter().collect::<Result<_, _>>()?)
    }

    pub fn totals(&self) -> anyhow::Result<SinkTotals> {
        Ok(self
            .qps()?
            .iter()
            .fold(SinkTotals::default(), |t, (_, qp)| {
                t + SinkTotals {
                    qps: 1,
                    packets: qp.order.packets,
                    bytes: qp.bytes,
                    out_of_order: qp.order.out_of_order,
                    late: qp.order.late,
                    message_out_of_order: qp.message.out_of_order,
                    last_ns: qp.last_ns,
                }
            }))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use lb_common::abi::sink::{PROGRAM_SINK, SINK_QPS};

    use super::OBJECT;
    use crate::dataplane::declared;

    /// The sink's object carries none of the forwarding maps: a receiver
    /// has no use for them, and loading it would create them all.
    #[test]
    fn sink_object_holds_only_the_sink() {
        let (programs, maps) = declared(OBJECT);
        assert_eq!(programs, BTreeSet::from([PROGRAM_SINK.to_owned()]));
        assert_eq!(maps, BTreeSet::from([SINK_QPS.to_owned()]));
    }
}
