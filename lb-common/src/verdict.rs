//! Verdict reasons: why the program returned what it did, one per-CPU
//! counter each. A leaf module: the parser reports its errors as reasons,
//! and the map ABI counts them.

/// Why the program returned what it did; one per-CPU counter each.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// Rewritten and redirected to a next hop (XDP_REDIRECT).
    Forwarded = 0,
    /// Not IPv4/IPv6 (ARP, LLDP, ...): XDP_PASS.
    NotIp,
    /// Destination MAC is multicast or broadcast: XDP_PASS.
    NotUnicast,
    /// No configured prefix covers the destination: XDP_PASS.
    NoRoute,
    /// TTL / hop limit <= 1; the kernel sends the ICMP error: XDP_PASS.
    TtlExpired,
    /// The group has no usable next hop, or its port left the devmap: XDP_PASS.
    NoNextHop,
    /// Valid but beyond what the fast path handles (three or more VLAN
    /// tags, long IPv6 extension chains, jumbograms): XDP_PASS.
    Unsupported,
    /// IP header fine but the TCP/UDP/BTH header is cut short: XDP_PASS, so
    /// the kernel forwards or drops it by its own rules.
    L4Truncated,
    /// Frame ends inside the Ethernet header or a VLAN tag: XDP_DROP.
    L2Truncated,
    /// IP header cut short or inconsistent (version, header length, total
    /// length beyond the frame): XDP_DROP, as the kernel's `ip_rcv` would.
    L3Malformed,
    /// For the box itself, whatever the routes say: one of its own
    /// addresses or subnet broadcasts, or a destination no router forwards
    /// (multicast, limited broadcast, link-local): XDP_PASS.
    Local,
    /// Addressed to another host: the destination MAC is neither the
    /// ingress port's nor the switch's DLB MAC (a port in promiscuous
    /// mode, or on a shared segment). XDP_PASS: the kernel takes it for
    /// what it is (drops it, or a bridge forwards it).
    OtherHost,
}

/// XDP return codes (kernel ABI, `enum xdp_action`).
pub const XDP_DROP: u32 = 1;
pub const XDP_PASS: u32 = 2;
pub const XDP_REDIRECT: u32 = 4;

impl Reason {
    /// The verdict for this reason: forward, hand to the kernel, or drop
    /// what the kernel would drop anyway.
    pub const fn xdp_action(self) -> u32 {
        match self {
            Reason::Forwarded => XDP_REDIRECT,
            Reason::L2Truncated | Reason::L3Malformed => XDP_DROP,
            _ => XDP_PASS,
        }
    }

    pub const COUNT: u32 = 12;
    pub const ALL: [Reason; Self::COUNT as usize] = [
        Reason::Forwarded,
        Reason::NotIp,
        Reason::NotUnicast,
        Reason::NoRoute,
        Reason::TtlExpired,
        Reason::NoNextHop,
        Reason::Unsupported,
        Reason::L4Truncated,
        Reason::L2Truncated,
        Reason::L3Malformed,
        Reason::Local,
        Reason::OtherHost,
    ];

    /// Metric label.
    pub const fn name(self) -> &'static str {
        match self {
            Reason::Forwarded => "forwarded",
            Reason::NotIp => "not_ip",
            Reason::NotUnicast => "not_unicast",
            Reason::NoRoute => "no_route",
            Reason::TtlExpired => "ttl_expired",
            Reason::NoNextHop => "no_nexthop",
            Reason::Unsupported => "unsupported",
            Reason::L4Truncated => "l4_truncated",
            Reason::L2Truncated => "l2_truncated",
            Reason::L3Malformed => "l3_malformed",
            Reason::Local => "local",
            Reason::OtherHost => "other_host",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_dense_and_named_uniquely() {
        for (i, r) in Reason::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i);
        }
        for a in Reason::ALL {
            assert_eq!(
                Reason::ALL.iter().filter(|b| b.name() == a.name()).count(),
                1
            );
        }
    }
}
