//! Per-QP counts of what the testbed's receiving host gets.

use aya_ebpf::{
    bindings::xdp_action, helpers::bpf_ktime_get_ns, macros::map, maps::HashMap,
    programs::XdpContext,
};
use lb_common::{
    abi::sink::{MAX_SINK_QPS, SinkKey, SinkQp},
    packet::parse::{PacketView, Parsed, parse},
};
use lb_ebpf_frame::Frame;

/// Each QP's packets, bytes and order judgements.
#[map]
static FL_SINK_QPS: HashMap<SinkKey, SinkQp> = HashMap::with_max_entries(MAX_SINK_QPS, 0);

/// Counts each RoCEv2 QP's packets, bytes and out-of-order arrivals, then
/// drops the packet; everything else (ARP, ...) goes to the kernel.
#[inline(always)]
pub fn receive(ctx: &XdpContext) -> u32 {
    let frame = Frame::of(ctx);
    let Ok(Parsed {
        bth: Some(bth),
        flow,
        ..
    }) = parse(&frame)
    else {
        return xdp_action::XDP_PASS;
    };
    let key = SinkKey {
        src: flow.src,
        dest_qp: bth.dest_qp,
    };
    let len = frame.len() as u64;
    // SAFETY: a helper without arguments.
    let now = unsafe { bpf_ktime_get_ns() };
    match FL_SINK_QPS.get_ptr_mut(key) {
        // SAFETY: map value pointer; one sender per QP, so one writer.
        Some(qp) => unsafe {
            (*qp).order.observe(bth.psn);
            (*qp).message.observe(bth.opcode, bth.psn);
            (*qp).bytes += len;
            (*qp).last_ns = now;
        },
        None => {
            let mut qp = SinkQp {
                bytes: len,
                last_ns: now,
                ..SinkQp::default()
            };
            qp.order.observe(bth.psn);
            qp.message.observe(bth.opcode, bth.psn);
            let _ = FL_SINK_QPS.insert(key, qp, 0);
        }
    }
    xdp_action::XDP_DROP
}
