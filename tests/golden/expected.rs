//! What the data plane must produce, worked out on the host: the frame a
//! next hop gets and which next hop that is. Nothing here asks the kernel.

use fabriclb::dataplane::tables::GroupTable;
use lb_common::{
    abi::NextHop,
    limits::{BUCKETS_PER_GROUP, NO_NEXTHOP},
    packet::craft::{Ipv4, Ipv6},
    packet::parse::{ETH_P_8021Q, parse},
    select::hash::{HashFields, hash_input},
};

use crate::packets::Ip;
use crate::switch::SEED;

/// The next hop `group` sends `frame` to, with crc32fast standing in for
/// the data plane's CRC.
pub fn nexthop(group: &GroupTable, frame: &[u8]) -> u32 {
    let parsed = parse(frame).expect("forwardable fixture");
    let mut crc = crc32fast::Hasher::new_with_initial(SEED);
    crc.update(hash_input(&parsed.flow, HashFields(group.entry.hash_fields)).as_bytes());
    let bucket = crc.finalize() & (BUCKETS_PER_GROUP - 1);
    let id = group.buckets[bucket as usize];
    assert_ne!(id, NO_NEXTHOP);
    id
}

fn egress_tags(nh: &NextHop) -> Vec<(u16, u16)> {
    if nh.vlan == 0 {
        vec![]
    } else {
        vec![(ETH_P_8021Q, nh.vlan)]
    }
}

/// What `ip` carrying `body` leaves as for next hop `nh`: TTL or hop
/// limit - 1, the next hop's L2 header.
pub fn forwarded(ip: &Ip, body: &[u8], nh: &NextHop) -> Vec<u8> {
    let out = match ip {
        Ip::V4(ip) => Ip::V4(Ipv4 {
            ttl: ip.ttl - 1,
            ..ip.clone()
        }),
        Ip::V6(ip) => Ip::V6(Ipv6 {
            hop_limit: ip.hop_limit - 1,
            ..ip.clone()
        }),
    };
    out.frame(nh.dst_mac, nh.src_mac, &egress_tags(nh), body)
}
