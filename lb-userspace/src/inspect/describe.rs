//! Packet descriptions for `explain`, built into the frame they describe
//! with `lb_common::packet::craft`, so the data plane's own parser reads
//! them:
//!
//! ```text
//! udp 10.1.1.2:49152 -> 10.1.2.3:4791 qp 0x1a2b [opcode 0x0a]
//! tcp [fd00::1]:40000 -> [fd00::2]:80 [ttl 1] [vlan 100]
//! ```
//!
//! Numbers are decimal or `0x` hex. A RoCEv2 packet (UDP to port 4791)
//! carries a BTH: `qp` (default 0) and `opcode` (default 0x07, RDMA
//! WRITE MIDDLE: a packet inside a message, which follows its flowlet).

use std::net::{IpAddr, SocketAddr};

use lb_common::packet::craft::{Ipv4, Ipv6, bth, tcp, udp};
use lb_common::packet::parse::{ETH_P_8021Q, IPPROTO_TCP, IPPROTO_UDP, ROCEV2_UDP_PORT};
use lb_common::packet::roce::WRITE_MIDDLE;

/// Frames come from a unicast MAC and are addressed to one: the ingress
/// port's where it is known ([`Description::frame_to`]), else this one.
pub const TO_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
pub const FROM_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];

pub const EXAMPLE: &str = "udp 10.1.1.2:49152 -> 10.1.2.3:4791 qp 0x1a2b";

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum DescribeError {
    #[error("empty packet description; e.g. {EXAMPLE}")]
    Empty,
    #[error("\"{0}\": the protocol is udp or tcp")]
    Protocol(String),
    #[error("\"{0}\": an endpoint is ADDRESS:PORT, [IPV6]:PORT for IPv6")]
    Endpoint(String),
    #[error("expected \"->\" after the source, found {0}")]
    Arrow(String),
    #[error("source {0} and destination {1} are not of one address family")]
    Families(IpAddr, IpAddr),
    #[error("\"{0}\": expected qp, opcode, ttl or vlan")]
    Word(String),
    #[error("{0} needs a value")]
    Missing(&'static str),
    #[error("{what} \"{value}\": not a number from {min} to {max}")]
    Number {
        what: &'static str,
        value: String,
        min: u32,
        max: u32,
    },
    #[error("{0} is RoCEv2's: it needs udp to port 4791")]
    NotRoce(&'static str),
}

/// What a description says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Description {
    pub protocol: u8,
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub qp: u32,
    pub opcode: u8,
    pub ttl: u8,
    pub vlan: Option<u16>,
}

fn number(
    what: &'static str,
    word: Option<&str>,
    min: u32,
    max: u32,
) -> Result<u32, DescribeError> {
    let word = word.ok_or(DescribeError::Missing(what))?;
    crate::config::parse_number(word)
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| DescribeError::Number {
            what,
            value: word.to_owned(),
            min,
            max,
        })
}

fn endpoint(word: Option<&str>) -> Result<SocketAddr, DescribeError> {
    let word = word.ok_or(DescribeError::Missing("an endpoint"))?;
    word.parse()
        .map_err(|_| DescribeError::Endpoint(word.to_owned()))
}

impl Description {
    /// Parses `text`, e.g. [`EXAMPLE`].
    pub fn parse(text: &str) -> Result<Self, DescribeError> {
        let mut words = text.split_whitespace();
        let protocol = match words.next() {
            None => return Err(DescribeError::Empty),
            Some("udp") => IPPROTO_UDP,
            Some("tcp") => IPPROTO_TCP,
            Some(other) => return Err(DescribeError::Protocol(other.to_owned())),
        };
        let src = endpoint(words.next())?;
        match words.next() {
            Some("->") => {}
            Some(other) => return Err(DescribeError::Arrow(format!("\"{other}\""))),
            None => return Err(DescribeError::Arrow("nothing".to_owned())),
        }
        let dst = endpoint(words.next())?;
        if src.is_ipv4() != dst.is_ipv4() {
            return Err(DescribeError::Families(src.ip(), dst.ip()));
        }
        let mut d = Self {
            protocol,
            src,
            dst,
            qp: 0,
            opcode: WRITE_MIDDLE,
            ttl: 64,
            vlan: None,
        };
        let roce = protocol == IPPROTO_UDP && dst.port() == ROCEV2_UDP_PORT;
        while let Some(word) = words.next() {
            match word {
                "qp" | "opcode" if !roce => {
                    return Err(DescribeError::NotRoce(if word == "qp" {
                        "qp"
                    } else {
                        "opcode"
                    }));
                }
                "qp" => d.qp = number("qp", words.next(), 0, 0xff_ffff)?,
                "opcode" => d.opcode = number("opcode", words.next(), 0, 0xff)? as u8,
                "ttl" => d.ttl = number("ttl", words.next(), 0, 0xff)? as u8,
                "vlan" => d.vlan = Some(number("vlan", words.next(), 1, 4094)? as u16),
                other => return Err(DescribeError::Word(other.to_owned())),
            }
        }
        Ok(d)
    }

    /// The Ethernet frame described, addressed to [`TO_MAC`].
    pub fn frame(&self) -> Vec<u8> {
        self.frame_to(TO_MAC)
    }

    /// The Ethernet frame described, addressed to `to`.
    pub fn frame_to(&self, to: [u8; 6]) -> Vec<u8> {
        let (sport, dport) = (self.src.port(), self.dst.port());
        let l4 = match self.protocol {
            IPPROTO_TCP => tcp(sport, dport),
            _ if dport == ROCEV2_UDP_PORT => {
                // Four bytes for the ICRC, which nothing on the path checks.
                udp(sport, dport, &bth(self.opcode, self.qp, 0, &[0; 4]))
            }
            _ => udp(sport, dport, &[0; 16]),
        };
        let tags: Vec<(u16, u16)> = self.vlan.map(|v| (ETH_P_8021Q, v)).into_iter().collect();
        match (self.src.ip(), self.dst.ip()) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => Ipv4 {
                src: src.octets(),
                dst: dst.octets(),
                ttl: self.ttl,
                ..Ipv4::new(self.protocol)
            }
            .frame(to, FROM_MAC, &tags, &l4),
            (src, dst) => Ipv6 {
                src: v6(src),
                dst: v6(dst),
                hop_limit: self.ttl,
                ..Ipv6::new(self.protocol)
            }
            .frame(to, FROM_MAC, &tags, &l4),
        }
    }
}

fn v6(addr: IpAddr) -> [u8; 16] {
    match addr {
        IpAddr::V6(a) => a.octets(),
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
    }
}

#[cfg(test)]
mod tests {
    use lb_common::packet::parse::parse;

    use super::*;

    fn error(text: &str) -> String {
        Description::parse(text).unwrap_err().to_string()
    }

    #[test]
    fn the_example_builds_a_rocev2_frame_the_parser_reads_back() {
        let frame = Description::parse(EXAMPLE).unwrap().frame();
        let parsed = parse(frame.as_slice()).unwrap();
        assert_eq!(&parsed.flow.src[..4], &[10, 1, 1, 2]);
        assert_eq!(&parsed.flow.dst[..4], &[10, 1, 2, 3]);
        assert_eq!(
            (
                parsed.flow.protocol,
                parsed.flow.src_port,
                parsed.flow.dst_port
            ),
            (17, 49152, 4791)
        );
        let bth = parsed.bth.unwrap();
        assert_eq!((bth.dest_qp, bth.opcode), (0x1a2b, WRITE_MIDDLE));
        assert_eq!((parsed.ttl, parsed.vlan_tags), (64, 0));
    }

    #[test]
    fn ipv6_tcp_with_ttl_and_vlan() {
        let d = Description::parse("tcp [fd00::1]:40000 -> [fd00::2]:80 ttl 1 vlan 100").unwrap();
        let parsed = parse(d.frame().as_slice()).unwrap();
        assert!(parsed.flow.is_ipv6);
        assert_eq!(parsed.flow.dst[0..2], [0xfd, 0]);
        assert_eq!(parsed.flow.dst[15], 2);
        assert_eq!(
            (
                parsed.flow.protocol,
                parsed.flow.src_port,
                parsed.flow.dst_port
            ),
            (6, 40000, 80)
        );
        assert_eq!((parsed.ttl, parsed.vlan_tags, parsed.bth), (1, 1, None));
    }

    #[test]
    fn bad_descriptions_say_what_is_wrong() {
        assert_eq!(
            error("  "),
            "empty packet description; e.g. udp 10.1.1.2:49152 -> 10.1.2.3:4791 qp 0x1a2b"
        );
        assert_eq!(
            error("icmp 10.0.0.1:1 -> 10.0.0.2:2"),
            "\"icmp\": the protocol is udp or tcp"
        );
        assert_eq!(
            error("udp 10.0.0.1 -> 10.0.0.2:2"),
            "\"10.0.0.1\": an endpoint is ADDRESS:PORT, [IPV6]:PORT for IPv6"
        );
        assert_eq!(
            error("udp fd00::1:5 -> [fd00::2]:2"),
            "\"fd00::1:5\": an endpoint is ADDRESS:PORT, [IPV6]:PORT for IPv6"
        );
        assert_eq!(
            error("udp 10.0.0.1:1 => 10.0.0.2:2"),
            "expected \"->\" after the source, found \"=>\""
        );
        assert_eq!(
            error("udp 10.0.0.1:1"),
            "expected \"->\" after the source, found nothing"
        );
        assert_eq!(error("udp 10.0.0.1:1 ->"), "an endpoint needs a value");
        assert_eq!(
            error("udp 10.0.0.1:1 -> [fd00::2]:2"),
            "source 10.0.0.1 and destination fd00::2 are not of one address family"
        );
        assert_eq!(
            error("tcp 10.0.0.1:1 -> 10.0.0.2:4791 qp 1"),
            "qp is RoCEv2's: it needs udp to port 4791"
        );
        assert_eq!(
            error("udp 10.0.0.1:1 -> 10.0.0.2:4791 qp 0x1000000"),
            "qp \"0x1000000\": not a number from 0 to 16777215"
        );
        assert_eq!(
            error("udp 10.0.0.1:1 -> 10.0.0.2:2 ttl 256"),
            "ttl \"256\": not a number from 0 to 255"
        );
        assert_eq!(
            error("udp 10.0.0.1:1 -> 10.0.0.2:2 vlan 0"),
            "vlan \"0\": not a number from 1 to 4094"
        );
        assert_eq!(
            error("udp 10.0.0.1:1 -> 10.0.0.2:2 ttl"),
            "ttl needs a value"
        );
        assert_eq!(
            error("udp 10.0.0.1:1 -> 10.0.0.2:2 flags syn"),
            "\"flags\": expected qp, opcode, ttl or vlan"
        );
    }
}
