//! RoCEv2 (RC transport) opcodes and what they say about ordering: which
//! packets open, continue or close a message, which carry their own
//! placement (RETH), and how a receiver judges packet order by PSN.

pub const SEND_FIRST: u8 = 0x00;
pub const SEND_MIDDLE: u8 = 0x01;
pub const SEND_LAST: u8 = 0x02;
pub const SEND_LAST_IMM: u8 = 0x03;
pub const SEND_ONLY: u8 = 0x04;
pub const SEND_ONLY_IMM: u8 = 0x05;
pub const WRITE_FIRST: u8 = 0x06;
pub const WRITE_MIDDLE: u8 = 0x07;
pub const WRITE_LAST: u8 = 0x08;
pub const WRITE_LAST_IMM: u8 = 0x09;
pub const WRITE_ONLY: u8 = 0x0a;
pub const WRITE_ONLY_IMM: u8 = 0x0b;
pub const READ_REQUEST: u8 = 0x0c;
pub const READ_RESPONSE_FIRST: u8 = 0x0d;
pub const READ_RESPONSE_MIDDLE: u8 = 0x0e;
pub const READ_RESPONSE_LAST: u8 = 0x0f;
pub const READ_RESPONSE_ONLY: u8 = 0x10;
pub const ACKNOWLEDGE: u8 = 0x11;

/// RDMA Extended Transport Header: virtual address, R_Key, DMA length.
pub const RETH_LEN: usize = 16;
/// Invariant CRC trailer.
pub const ICRC_LEN: usize = 4;
/// PSNs are 24 bits.
pub const PSN_MASK: u32 = 0x00ff_ffff;
/// Half the PSN space: a PSN less than this far ahead counts as ahead.
const PSN_HALF: u32 = 1 << 23;

/// Where a packet sits in its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Position {
    First,
    Middle,
    Last,
    Only,
    /// Requests, acknowledgements and opcodes outside RC SEND/WRITE/READ.
    Other,
}

pub const fn position(opcode: u8) -> Position {
    match opcode {
        SEND_FIRST | WRITE_FIRST | READ_RESPONSE_FIRST => Position::First,
        SEND_MIDDLE | WRITE_MIDDLE | READ_RESPONSE_MIDDLE => Position::Middle,
        SEND_LAST | SEND_LAST_IMM | WRITE_LAST | WRITE_LAST_IMM | READ_RESPONSE_LAST => {
            Position::Last
        }
        SEND_ONLY | SEND_ONLY_IMM | WRITE_ONLY | WRITE_ONLY_IMM | READ_RESPONSE_ONLY => {
            Position::Only
        }
        _ => Position::Other,
    }
}

/// Packets that carry a RETH after the BTH.
pub const fn has_reth(opcode: u8) -> bool {
    matches!(
        opcode,
        WRITE_FIRST | WRITE_ONLY | WRITE_ONLY_IMM | READ_REQUEST
    )
}

/// Packets a receiver can place without the ones before them: single-packet
/// messages and acknowledgements. FIRST, MIDDLE and LAST packets depend on
/// arrival order (MIDDLE and LAST carry no address), so only these may be
/// sprayed over paths of different delay.
pub const fn self_contained(opcode: u8) -> bool {
    matches!(
        opcode,
        WRITE_ONLY | WRITE_ONLY_IMM | SEND_ONLY | SEND_ONLY_IMM | READ_RESPONSE_ONLY | ACKNOWLEDGE
    )
}

/// The RDMA WRITE opcode of packet `index` of a `count`-packet message.
pub const fn write_opcode(index: u32, count: u32) -> u8 {
    match (index, count) {
        (_, 0 | 1) => WRITE_ONLY,
        (0, _) => WRITE_FIRST,
        (i, n) if i + 1 == n => WRITE_LAST,
        _ => WRITE_MIDDLE,
    }
}

/// Order state of one QP at a receiver: the PSN it expects next.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct PsnOrder {
    /// Zero until the first packet; then 1.
    pub started: u32,
    pub expected: u32,
    pub packets: u64,
    /// Packets that did not carry the expected PSN (early or late).
    pub out_of_order: u64,
    /// Packets behind the expected PSN: a later packet of the QP arrived
    /// first. A lost packet makes the next one early, never one late, so
    /// these count reordering alone where nothing is retransmitted.
    pub late: u64,
}

impl PsnOrder {
    /// Accounts one packet; returns whether it arrived in order. A packet
    /// ahead of the expected PSN (within half the PSN space) moves the
    /// expectation past it; a late one leaves it, as a go-back-N receiver
    /// would see the sequence.
    #[inline(always)]
    pub fn observe(&mut self, psn: u32) -> bool {
        let psn = psn & PSN_MASK;
        self.packets += 1;
        if self.started == 0 {
            self.started = 1;
            self.expected = (psn + 1) & PSN_MASK;
            return true;
        }
        if psn == self.expected {
            self.expected = (psn + 1) & PSN_MASK;
            return true;
        }
        self.out_of_order += 1;
        let ahead = psn.wrapping_sub(self.expected) & PSN_MASK;
        if ahead < PSN_HALF {
            self.expected = (psn + 1) & PSN_MASK;
        } else {
            self.late += 1;
        }
        false
    }
}

/// Order inside multi-packet messages at a receiver: whether each MIDDLE
/// and LAST packet follows the packet before it in its message. Packets
/// between messages (ONLY, ACK) may overtake each other without counting:
/// this is the order that spraying self-contained packets must keep.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct MessageOrder {
    /// 1 between a FIRST and its LAST.
    pub in_message: u32,
    /// The PSN the message's next packet must carry.
    pub next_psn: u32,
    /// MIDDLE/LAST packets that did not follow their predecessor.
    pub out_of_order: u64,
}

impl MessageOrder {
    #[inline(always)]
    pub fn observe(&mut self, opcode: u8, psn: u32) {
        let psn = psn & PSN_MASK;
        match position(opcode) {
            Position::First => {
                self.in_message = 1;
                self.next_psn = (psn + 1) & PSN_MASK;
            }
            Position::Middle | Position::Last => {
                if self.in_message == 0 || psn != self.next_psn {
                    self.out_of_order += 1;
                }
                self.next_psn = (psn + 1) & PSN_MASK;
                self.in_message = u32::from(position(opcode) == Position::Middle);
            }
            Position::Only | Position::Other => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_order_ignores_single_packets_between_messages() {
        let mut o = MessageOrder::default();
        let arrivals = [
            (WRITE_FIRST, 1),
            (WRITE_ONLY, 5), // overtook the LAST: fine
            (WRITE_MIDDLE, 2),
            (WRITE_LAST, 3),
            (WRITE_ONLY, 4),
        ];
        for (op, psn) in arrivals {
            o.observe(op, psn);
        }
        assert_eq!(o.out_of_order, 0);
        // A MIDDLE before its FIRST, and a LAST that skipped a MIDDLE.
        o.observe(WRITE_MIDDLE, 7);
        o.observe(WRITE_FIRST, 6);
        o.observe(WRITE_LAST, 9);
        assert_eq!(o.out_of_order, 2);
    }

    #[test]
    fn positions_cover_rc_send_write_read() {
        use Position::*;
        let expected = [
            (SEND_FIRST, First),
            (SEND_MIDDLE, Middle),
            (SEND_LAST, Last),
            (SEND_LAST_IMM, Last),
            (SEND_ONLY, Only),
            (SEND_ONLY_IMM, Only),
            (WRITE_FIRST, First),
            (WRITE_MIDDLE, Middle),
            (WRITE_LAST, Last),
            (WRITE_LAST_IMM, Last),
            (WRITE_ONLY, Only),
            (WRITE_ONLY_IMM, Only),
            (READ_REQUEST, Other),
            (READ_RESPONSE_FIRST, First),
            (READ_RESPONSE_MIDDLE, Middle),
            (READ_RESPONSE_LAST, Last),
            (READ_RESPONSE_ONLY, Only),
            (ACKNOWLEDGE, Other),
            (0x64, Other),
        ];
        for (op, pos) in expected {
            assert_eq!(position(op), pos, "opcode {op:#04x}");
        }
    }

    #[test]
    fn self_contained_is_only_and_ack() {
        let contained: std::vec::Vec<u8> = (0..=0x11).filter(|&op| self_contained(op)).collect();
        assert_eq!(
            contained,
            [
                SEND_ONLY,
                SEND_ONLY_IMM,
                WRITE_ONLY,
                WRITE_ONLY_IMM,
                READ_RESPONSE_ONLY,
                ACKNOWLEDGE
            ]
        );
    }

    #[test]
    fn reth_on_write_first_and_only() {
        let with: std::vec::Vec<u8> = (0..=0x11).filter(|&op| has_reth(op)).collect();
        assert_eq!(
            with,
            [WRITE_FIRST, WRITE_ONLY, WRITE_ONLY_IMM, READ_REQUEST]
        );
    }

    #[test]
    fn write_opcodes_of_a_message() {
        let ops = |n| {
            (0..n)
                .map(|i| write_opcode(i, n))
                .collect::<std::vec::Vec<_>>()
        };
        assert_eq!(ops(1), [WRITE_ONLY]);
        assert_eq!(ops(2), [WRITE_FIRST, WRITE_LAST]);
        assert_eq!(
            ops(4),
            [WRITE_FIRST, WRITE_MIDDLE, WRITE_MIDDLE, WRITE_LAST]
        );
    }

    #[test]
    fn psn_order_counts_early_and_late_packets() {
        let mut o = PsnOrder::default();
        for psn in [10, 11, 12] {
            assert!(o.observe(psn));
        }
        assert!(!o.observe(14)); // 13 overtaken
        assert!(!o.observe(13)); // late
        assert!(o.observe(15));
        assert_eq!((o.packets, o.out_of_order, o.expected), (6, 2, 16));
        assert_eq!(o.late, 1);
    }

    #[test]
    fn losses_make_no_packet_late() {
        let mut o = PsnOrder::default();
        for psn in [1, 2, 5, 6, 9] {
            o.observe(psn);
        }
        assert_eq!((o.out_of_order, o.late), (2, 0));
        // A path change: 10-11 still queued on the old path, 12-13 first.
        for psn in [12, 13, 10, 11, 14] {
            o.observe(psn);
        }
        assert_eq!((o.out_of_order, o.late), (5, 2));
    }

    #[test]
    fn psn_order_wraps_at_24_bits() {
        let mut o = PsnOrder::default();
        assert!(o.observe(PSN_MASK));
        assert!(o.observe(0));
        assert!(o.observe(1));
        assert_eq!(o.out_of_order, 0);
    }
}
