//! Where ECMP puts each flow the tests pin to a group member: recomputed
//! on the host from hash inputs written out by hand, and the data plane
//! held to the bucket rule that recomputation assumes, over every bucket.

use lb_common::{packet::craft::udp, packet::parse::IPPROTO_UDP, verdict::Reason};

use crate::drain;
use crate::expected;
use crate::fixtures::{self, Fixture};
use crate::flowlet;
use crate::harness::Harness;
use crate::packets::{PEER_MAC, ipv4_to};
use crate::switch::{self, LB_MAC};

/// A flow pinned to a member of a group.
pub struct Pin {
    pub what: String,
    pub group: &'static str,
    pub input: Vec<u8>,
    /// The flow's hash input, written out by hand.
    pub hash: Vec<u8>,
    pub member: usize,
}

impl Pin {
    pub fn new(what: &str, group: &'static str, input: Vec<u8>, hash: &str, member: usize) -> Self {
        Self {
            what: what.into(),
            group,
            input,
            hash: expected::bytes(hash),
            member,
        }
    }
}

/// Forwarded fixtures whose group has more than one member.
fn fixture_pins() -> Vec<Pin> {
    fixtures::forwarding::fixtures()
        .into_iter()
        .filter_map(
            |Fixture {
                 name, input, to, ..
             }| {
                let to = to?;
                Some(Pin {
                    what: name,
                    group: to.group,
                    input,
                    hash: to.hash?,
                    member: to.member,
                })
            },
        )
        .collect()
}

#[test]
fn pinned_members_follow_from_the_hash() {
    let pins: Vec<Pin> = fixture_pins()
        .into_iter()
        .chain(flowlet::pins())
        .chain(drain::pins())
        .collect();
    for pin in &pins {
        let group = switch::group(pin.group);
        let what = &pin.what;
        assert_eq!(
            pin.hash,
            expected::hash_input(&pin.input, group.hashes_qp),
            "{what}: the hash input written out differs from etherparse's reading of the frame"
        );
        assert_eq!(
            expected::member(&pin.hash, group.macs.len()),
            pin.member,
            "{what}: pinned member"
        );
    }
    eprintln!("{} pinned members recomputed", pins.len());
}

/// Flows from port 1 up until every one of the group's 512 buckets has
/// been hit: each goes to member `bucket % 4`.
#[test]
fn every_bucket_goes_to_its_round_robin_member() {
    let mut h = Harness::new();
    let mut hit = [false; 512];
    let mut flows = 0;
    for port in 1..=u16::MAX {
        if hit.iter().all(|&b| b) {
            break;
        }
        let [hi, lo] = port.to_be_bytes();
        // src_ip | dst_ip | ip_protocol | src_port | dst_port 9 | no QP
        let hash = [10, 0, 0, 1, 10, 1, 0, 2, 17, hi, lo, 0, 9, 0, 0, 0];
        let mut crc = crc32fast::Hasher::new_with_initial(switch::SEED);
        crc.update(&hash);
        let bucket = (crc.finalize() & 511) as usize;
        hit[bucket] = true;
        flows += 1;

        let frame = ipv4_to([10, 1, 0, 2], IPPROTO_UDP).frame(
            LB_MAC,
            PEER_MAC,
            &[],
            &udp(port, 9, b"sweep"),
        );
        let (verdict, out) = h.run(&frame);
        assert_eq!(verdict, Reason::Forwarded.xdp_action(), "port {port}");
        assert_eq!(
            h.slot_of("spines", &out),
            bucket % 4,
            "port {port}, bucket {bucket}"
        );
    }
    assert!(hit.iter().all(|&b| b), "not every bucket hit");
    eprintln!("{flows} flows covered the 512 buckets");
}
