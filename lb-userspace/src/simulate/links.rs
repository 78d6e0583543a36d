//! Each next hop as a link of one rate, first in first out: a packet
//! leaves when the link has sent what came before it. Delivered in the
//! order they leave, the packets of each QP are checked for in-message
//! order as the testbed's receiver checks them
//! (`lb_common::packet::roce::MessageOrder`).

use std::collections::{BTreeMap, HashMap};

use lb_common::packet::parse::Parsed;
use lb_common::packet::roce::MessageOrder;

/// Each next hop's link rate, bits per second: `default`, or its
/// interface's in `by_interface`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PathRates {
    pub default: u64,
    pub by_interface: BTreeMap<String, u64>,
}

pub struct Links {
    /// Next hop -> its link's rate, where not the default.
    rates: HashMap<u32, u64>,
    default_rate: u64,
    /// Next hop -> when its link has sent everything it was given, ns.
    free_at: HashMap<u32, u64>,
    /// Next hop -> packets and bytes.
    carried: HashMap<u32, (u64, u64)>,
    deliveries: Vec<Delivery>,
}

/// A RoCEv2 packet as its receiver sees it.
struct Delivery {
    at_ns: u64,
    /// Destination address and QP.
    qp: ([u8; 16], u32),
    opcode: u8,
    psn: u32,
}

impl Links {
    /// Links of `default_rate`, but next hop `id`'s of `rate` for each
    /// `(id, rate)` of `rates`.
    pub fn new(default_rate: u64, rates: impl IntoIterator<Item = (u32, u64)>) -> Self {
        Self {
            rates: rates
                .into_iter()
                .map(|(id, rate)| (id, rate.max(1)))
                .collect(),
            default_rate: default_rate.max(1),
            free_at: HashMap::new(),
            carried: HashMap::new(),
            deliveries: Vec::new(),
        }
    }

    /// Puts a packet of `len` bytes that arrived at `at_ns` on next hop
    /// `nh_id`'s link.
    pub fn send(&mut self, nh_id: u32, at_ns: u64, len: u64, parsed: &Parsed) {
        let rate = self.rates.get(&nh_id).copied().unwrap_or(self.default_rate);
        let serialisation = (u128::from(len) * 8 * 1_000_000_000 / u128::from(rate)) as u64;
        let free = self.free_at.entry(nh_id).or_default();
        let done = (*free).max(at_ns) + serialisation;
        *free = done;
        let carried = self.carried.entry(nh_id).or_default();
        carried.0 += 1;
        carried.1 += len;
        if let Some(bth) = parsed.bth {
            self.deliveries.push(Delivery {
                at_ns: done,
                qp: (parsed.flow.dst, bth.dest_qp),
                opcode: bth.opcode,
                psn: bth.psn,
            });
        }
    }

    /// Packets and bytes next hop `nh_id` carried.
    pub fn carried(&self, nh_id: u32) -> (u64, u64) {
        self.carried.get(&nh_id).copied().unwrap_or_default()
    }

    pub fn last_delivery_ns(&self) -> u64 {
        self.free_at.values().copied().max().unwrap_or(0)
    }

    /// Packets inside multi-packet messages that did not follow their
    /// predecessor at the receiver.
    pub fn reorders(&mut self) -> u64 {
        // Stable: packets delivered at the same instant keep send order.
        self.deliveries.sort_by_key(|d| d.at_ns);
        let mut orders: HashMap<([u8; 16], u32), MessageOrder> = HashMap::new();
        for d in &self.deliveries {
            orders.entry(d.qp).or_default().observe(d.opcode, d.psn);
        }
        orders.values().map(|o| o.out_of_order).sum()
    }
}
