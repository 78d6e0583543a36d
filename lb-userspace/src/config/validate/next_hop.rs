//! One next hop of a group.

use std::net::{IpAddr, Ipv4Addr};

use toml::Spanned;

use crate::config::diagnostics::{ConfigError, Ctx};
use crate::config::raw::RawNextHop;
use crate::config::schema::{NextHopAddr, NextHopSpec, VLAN_MAX, VLAN_MIN, format_mac, parse_mac};

impl Ctx<'_> {
    pub(super) fn next_hop(&self, nh: Spanned<RawNextHop>) -> Result<NextHopSpec, ConfigError> {
        let span = nh.span();
        let nh = nh.into_inner();
        let interface = self.ifname(nh.interface)?;
        let addr = match (nh.mac, nh.ip) {
            (Some(_), Some(_)) => {
                return Err(self.error(span, "next hop has both `mac` and `ip`; give exactly one"));
            }
            (None, None) => {
                return Err(self.error(
                    span,
                    "next hop has neither `mac` nor `ip`; give exactly one",
                ));
            }
            (Some(mac), None) => NextHopAddr::Mac(self.mac(&mac, "a next hop")?),
            (None, Some(ip)) => NextHopAddr::Ip(self.neighbour_ip(&ip)?),
        };
        let vlan = nh
            .vlan
            .map(|vlan| {
                let id = self.in_range(
                    &vlan,
                    VLAN_MIN..=VLAN_MAX,
                    "vlan",
                    " (omit vlan to send untagged)",
                )?;
                self.not_double_tagged(&interface, id, vlan.span())?;
                Ok(id)
            })
            .transpose()?;
        Ok(NextHopSpec {
            interface,
            addr,
            vlan,
        })
    }

    /// fabriclb pushes the tag itself; on a VLAN subinterface (Linux names
    /// them `parent.id`) the kernel would push a second one.
    fn not_double_tagged(
        &self,
        interface: &str,
        vlan: u16,
        span: std::ops::Range<usize>,
    ) -> Result<(), ConfigError> {
        let Some((parent, id)) = interface.rsplit_once('.') else {
            return Ok(());
        };
        if parent.is_empty() || id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
            return Ok(());
        }
        Err(self.error(
            span,
            format!(
                "vlan = {vlan} on VLAN subinterface {interface:?} would leave double-tagged: \
                 name the parent port (interface = {parent:?}, vlan = {vlan}); fabriclb \
                 pushes the tag itself"
            ),
        ))
    }

    /// A unicast, non-zero MAC, for `what`.
    pub(super) fn mac(&self, text: &Spanned<String>, what: &str) -> Result<[u8; 6], ConfigError> {
        let Some(mac) = parse_mac(text.get_ref()) else {
            return Err(self.error(
                text.span(),
                format!(
                    "invalid MAC address {:?}: expected 6 hex octets separated by ':', \
                     e.g. \"02:00:00:00:01:02\"",
                    text.get_ref()
                ),
            ));
        };
        let kind = if mac == [0xff; 6] {
            "broadcast"
        } else if mac[0] & 1 != 0 {
            "multicast"
        } else if mac == [0; 6] {
            "all-zero"
        } else {
            return Ok(mac);
        };
        Err(self.error(
            text.span(),
            format!(
                "MAC address {} is {kind}; {what} needs a unicast MAC",
                format_mac(mac)
            ),
        ))
    }

    fn neighbour_ip(&self, text: &Spanned<String>) -> Result<IpAddr, ConfigError> {
        let Ok(ip) = text.get_ref().parse::<IpAddr>() else {
            return Err(self.error(
                text.span(),
                format!("invalid IP address {:?}", text.get_ref()),
            ));
        };
        // An IPv4-mapped address names an IPv4 neighbour, if any: judge that.
        let canonical = ip.to_canonical();
        let kind = match canonical {
            _ if canonical.is_unspecified() => "unspecified",
            _ if canonical.is_loopback() => "loopback",
            _ if canonical.is_multicast() => "multicast",
            IpAddr::V4(v4) if v4 == Ipv4Addr::BROADCAST => "broadcast",
            // Reserved (RFC 1112, RFC 6890): no host is given one.
            IpAddr::V4(v4) if v4.octets()[0] >= 240 => "reserved (240.0.0.0/4)",
            IpAddr::V4(v4) if ip.is_ipv6() => {
                return Err(self.error(
                    text.span(),
                    format!(
                        "next-hop IP {ip} is IPv4-mapped IPv6, which no neighbour has: \
                         write the IPv4 address {v4}"
                    ),
                ));
            }
            _ => return Ok(ip),
        };
        Err(self.error(
            text.span(),
            format!("next-hop IP {ip} is {kind}; a next hop needs a unicast neighbour address"),
        ))
    }
}
