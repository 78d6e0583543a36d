//! Flow events: the data plane's report of a flow that changed path (a
//! flowlet moved, a flow failed over, went onto its override, ended a
//! drain) or of an override that could not be followed, through a ring
//! buffer the daemon reads.
//!
//! Events cost a packet only where it changed path, which in a steady
//! collective is one packet in thousands, but a failover moves every flow
//! of a next hop at once. So each CPU admits at most a budget per window
//! (the rest counted, not sent), and the daemon may sample flows by hash:
//! a sampled flow's every move is seen, an unsampled one's none.

use crate::packet::parse::FlowFields;

/// Ring buffer of [`FlowEvent`]s.
pub const FLOW_EVENTS: &str = "FL_FLOW_EVENTS";
/// Array, one slot: [`EventConfig`], written by the daemon.
pub const EVENT_CONFIG: &str = "FL_EVENT_CONFIG";
/// Per-CPU array, one slot: [`EventBudget`].
pub const EVENT_BUDGET: &str = "FL_EVENT_BUDGET";
/// Per-CPU array, one slot: the [`PendingEvent`] of the packet in hand.
pub const EVENT_PENDING: &str = "FL_EVENT_PENDING";
/// The ring's size: about 2,800 events, a tenth of a second of 16 CPUs
/// at the default budget, for a reader that wakes at least that often.
pub const FLOW_EVENTS_BYTES: u32 = 256 * 1024;
/// The window each CPU's budget counts over.
pub const EVENT_WINDOW_NS: u64 = 100_000_000;

/// [`PendingEvent::kind`]: nothing to report.
pub const EVENT_NONE: u32 = 0;
/// [`FlowEvent::kind`]: a flow's new flowlet took another next hop.
pub const EVENT_MOVE: u32 = 1;
/// [`FlowEvent::kind`]: a matched override's member is not usable; the
/// packet went where the group would have sent it.
pub const EVENT_OVERRIDE_FALLBACK: u32 = 2;

/// [`FlowEvent::cause`] of a move: the choice rule, after a gap.
pub const CAUSE_CHOICE: u32 = 0;
/// The next hop the flow was on is not usable; it moved at its next
/// packet, inside a flowlet or after a gap.
pub const CAUSE_FAILOVER: u32 = 1;
/// An override pins the flow; it moved onto its member.
pub const CAUSE_OVERRIDE: u32 = 2;
/// The group went back to ECMP; the flow's flowlet ended on its ECMP
/// next hop.
pub const CAUSE_DRAIN: u32 = 3;

/// Why a flow moved: the first cause that holds, in the order a packet's
/// path is decided. `from_usable`: whether the next hop it left is.
#[inline(always)]
pub fn move_cause(from_usable: bool, pinned: bool, draining: bool) -> u32 {
    if !from_usable {
        CAUSE_FAILOVER
    } else if pinned {
        CAUSE_OVERRIDE
    } else if draining {
        CAUSE_DRAIN
    } else {
        CAUSE_CHOICE
    }
}

/// What the daemon asks of the events. All zeros, as before the daemon
/// writes it: none.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventConfig {
    /// Events each CPU may send per [`EVENT_WINDOW_NS`]; 0 sends none.
    pub per_window: u32,
    /// Flows whose hash is at most this are sampled: `u32::MAX` all of
    /// them.
    pub sample_at_most: u32,
}

impl EventConfig {
    /// `rate` events per second per CPU, of one flow in `one_in`.
    pub fn new(rate: u32, one_in: u32) -> Self {
        let window = u64::from(rate) * EVENT_WINDOW_NS / 1_000_000_000;
        Self {
            // A rate below one per window still sends one per window.
            per_window: if rate == 0 { 0 } else { window.max(1) as u32 },
            sample_at_most: (u64::from(u32::MAX) / u64::from(one_in.max(1))) as u32,
        }
    }
}

/// One CPU's budget and what became of its events.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventBudget {
    pub window_start_ns: u64,
    pub used: u64,
    /// Events sent into the ring.
    pub sent: u64,
    /// Events over the budget, not sent.
    pub over_budget: u64,
    /// Events the ring had no room for (its reader behind).
    pub ring_full: u64,
}

impl EventBudget {
    /// Whether an event of a flow with `hash` is sent at `now_ns`; one
    /// that is not sampled is not counted, one over the budget is.
    #[inline(always)]
    pub fn admit(&mut self, config: &EventConfig, hash: u32, now_ns: u64) -> bool {
        if config.per_window == 0 || hash > config.sample_at_most {
            return false;
        }
        if now_ns.wrapping_sub(self.window_start_ns) >= EVENT_WINDOW_NS {
            self.window_start_ns = now_ns;
            self.used = 0;
        }
        if self.used >= u64::from(config.per_window) {
            self.over_budget += 1;
            return false;
        }
        self.used += 1;
        true
    }
}

/// What a packet's choice found to report, kept until the packet's
/// verdict: reported at the path's end, where little else is live, the
/// verifier checks the report about once, where inside the choice it
/// checked it once for each of the choice's paths.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PendingEvent {
    pub gap_ns: u64,
    /// The CPU's load epoch, which the loads are read at.
    pub epoch: u64,
    /// [`EVENT_NONE`] when there is nothing to report.
    pub kind: u32,
    pub cause: u32,
    pub group: u32,
    pub class: u32,
    pub from: u32,
    pub to: u32,
    /// `from`'s and `to`'s member slots, which a class's loads are kept
    /// by; `NO_NEXTHOP` where not known (the report then gives the next
    /// hop's load).
    pub from_slot: u32,
    pub to_slot: u32,
    /// The flow's hash, which samples it.
    pub hash: u32,
    pub override_index: u32,
}

/// One side of a move as the packet's choice saw it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathSeen {
    /// Next-hop id; `NO_NEXTHOP` for none.
    pub nh_id: u32,
    /// Its path quality toward the packet's destination class.
    pub quality: u32,
    /// Its recent load as the choice weighs it (this CPU's and the
    /// others'), bytes.
    pub load: u64,
}

/// One event, as the ring carries it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowEvent {
    /// `CLOCK_MONOTONIC`, ns.
    pub time_ns: u64,
    /// How long the flow had been idle before this packet, ns.
    pub gap_ns: u64,
    pub from: PathSeen,
    pub to: PathSeen,
    pub flow: FlowFields,
    /// [`EVENT_MOVE`] or [`EVENT_OVERRIDE_FALLBACK`].
    pub kind: u32,
    /// A move's `CAUSE_*`.
    pub cause: u32,
    pub group: u32,
    /// The destination class whose qualities it was steered by.
    pub class: u32,
    /// The override involved (its index in `FL_OVERRIDES`); `NO_NEXTHOP`
    /// for none.
    pub override_index: u32,
    pub cpu: u32,
}

#[cfg(feature = "user")]
mod pod {
    // SAFETY: plain `#[repr(C)]` integers, no padding, every bit pattern
    // valid.
    unsafe impl aya::Pod for super::EventConfig {}
    unsafe impl aya::Pod for super::EventBudget {}
    unsafe impl aya::Pod for super::PendingEvent {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cpu_sends_its_budget_per_window_and_counts_the_rest() {
        let config = EventConfig::new(30, 1);
        assert_eq!(config.per_window, 3);
        let mut budget = EventBudget::default();
        let start = 5 * EVENT_WINDOW_NS;
        let sent = (0..5)
            .filter(|i| budget.admit(&config, 7, start + i))
            .count();
        assert_eq!((sent, budget.over_budget), (3, 2));
        // The next window starts afresh.
        assert!(budget.admit(&config, 7, start + EVENT_WINDOW_NS));
        assert_eq!(budget.used, 1);
    }

    #[test]
    fn a_sample_takes_flows_by_hash_and_zero_rate_sends_nothing() {
        let half = EventConfig::new(1000, 2);
        let mut budget = EventBudget::default();
        assert!(budget.admit(&half, u32::MAX / 2 - 1, 1));
        assert!(!budget.admit(&half, u32::MAX / 2 + 2, 2));
        assert_eq!(EventConfig::new(1000, 1).sample_at_most, u32::MAX);
        // Below one per window still sends one.
        assert_eq!(EventConfig::new(1, 1).per_window, 1);
        let off = EventConfig::new(0, 1);
        assert!(!budget.admit(&off, 0, 3));
        assert!(!budget.admit(&EventConfig::default(), 0, 4));
        assert_eq!(budget.over_budget, 0);
    }

    #[test]
    fn a_move_says_its_first_cause() {
        assert_eq!(move_cause(false, true, true), CAUSE_FAILOVER);
        assert_eq!(move_cause(true, true, true), CAUSE_OVERRIDE);
        assert_eq!(move_cause(true, false, true), CAUSE_DRAIN);
        assert_eq!(move_cause(true, false, false), CAUSE_CHOICE);
    }

    #[test]
    fn the_event_has_no_padding() {
        assert_eq!(core::mem::size_of::<PathSeen>(), 16);
        assert_eq!(core::mem::size_of::<FlowEvent>(), 16 + 32 + 48 + 24);
        assert_eq!(core::mem::size_of::<EventBudget>(), 40);
        assert_eq!(core::mem::size_of::<PendingEvent>(), 56);
    }
}
