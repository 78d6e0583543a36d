//! Paths for next hops a group learns (from the kernel's routes or
//! APPL_DB's): no next hop is written in the config, so where each one's
//! switch is read, and what is read there, are made from the group's
//! templates when it is learned. Both sources that read the next switch
//! use them: `remote` (`telemetry_url`, `telemetry_device`) and
//! `counters-db` (`counters_db`, `sonic_port`).

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::remote::{Target, check_url};

/// A group's two templates, in which `{ip}` stands for the next hop's
/// address (in brackets in a URL or address when it is IPv6) and
/// `{interface}` for this box's port toward it; in the first, `{switch}`
/// stands for the management address the group's `switch_addresses`
/// gives that port, or the next hop's address for a port it does not
/// list. A switch read at its address on the link is read across the port
/// whose queue it reports: a full queue delays or drops the request, and
/// a dropped segment waits out TCP's retransmission timeout (200 ms),
/// which freezes the reading when it matters most.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TargetTemplate {
    /// Where the switch is read: a `remote` scrape's URL, or a
    /// `counters-db` Redis address.
    pub url: String,
    /// What is read there: the exporter's qdisc device, or the SONiC port.
    pub device: String,
    /// Port -> management address (or host name) of the switch behind it.
    pub switches: BTreeMap<String, String>,
}

/// What a template may name.
pub const IP: &str = "{ip}";
pub const INTERFACE: &str = "{interface}";
pub const SWITCH: &str = "{switch}";

/// The longest values the placeholders take: an IPv6 address in
/// brackets, and an interface name (`IFNAMSIZ` - 1).
const LONGEST_IP: &str = "[ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255]";
const LONGEST_INTERFACE: &str = "interface-15-ch";

impl TargetTemplate {
    /// The target of the next hop at `ip` (none for one known by MAC
    /// alone) through `interface`.
    pub fn target(&self, ip: Option<IpAddr>, interface: &str) -> Target {
        let in_url = address(ip, true);
        let switch = self.switches.get(interface).unwrap_or(&in_url);
        Target {
            url: fill(&self.url.replace(SWITCH, switch), &in_url, interface),
            device: Self::device(&self.device, ip, interface),
        }
    }

    /// Device template `device` filled for the next hop at `ip` through
    /// `interface`.
    pub fn device(device: &str, ip: Option<IpAddr>, interface: &str) -> String {
        fill(device, &address(ip, false), interface)
    }

    /// Why `text` (a URL template when `in_url`, else a device template)
    /// cannot make a target: a brace that opens no placeholder it may
    /// name, or a URL that is none with the placeholders filled by
    /// `192.0.2.1` or, for `{switch}`, by each of `switches`. Every target
    /// it makes then passes `check_url`.
    pub fn check<'a>(
        text: &str,
        in_url: bool,
        switches: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), String> {
        Self::check_with(text, in_url, switches, check_url)
    }

    /// [`Self::check`] with `valid` judging what the first template makes
    /// (a Redis address, say) instead of `check_url`.
    pub fn check_with<'a>(
        text: &str,
        in_url: bool,
        switches: impl IntoIterator<Item = &'a str>,
        valid: impl Fn(&str) -> Result<(), String>,
    ) -> Result<(), String> {
        let known: &[&str] = if in_url {
            &[IP, INTERFACE, SWITCH]
        } else {
            &[IP, INTERFACE]
        };
        let mut rest = text;
        while let Some(at) = rest.find(['{', '}']) {
            let tail = &rest[at..];
            let Some(placeholder) = known.iter().find(|p| tail.starts_with(**p)) else {
                let (ip, interface) = (
                    format!("{IP} (the next hop's address)"),
                    format!("{INTERFACE} (the port toward it)"),
                );
                let names = if in_url {
                    format!(
                        "{ip}, {interface} and {SWITCH} (the address switch_addresses gives \
                         the port)"
                    )
                } else {
                    format!("{ip} and {interface}")
                };
                return Err(format!("{text:?}: only {names} may be written in braces"));
            };
            rest = &tail[placeholder.len()..];
        }
        if in_url {
            // The placeholders' values are checked where they come from;
            // what is around them must make a URL with any of them.
            let sample = "192.0.2.1";
            let filled = |switch: &str| {
                let url = fill(&text.replace(SWITCH, switch), sample, "eth0");
                valid(&url).map_err(|why| format!("{text:?} with {IP} = {sample}: {why}"))
            };
            filled(sample)?;
            for switch in switches {
                filled(switch).map_err(|why| format!("{why} and {SWITCH} = {switch:?}"))?;
            }
        }
        Ok(())
    }

    /// `text` filled with the longest values its placeholders take: what
    /// a length limit is checked against.
    pub fn longest(text: &str) -> String {
        text.replace(IP, LONGEST_IP)
            .replace(INTERFACE, LONGEST_INTERFACE)
    }
}

/// How `ip` is written in a template: in brackets in a URL when IPv6,
/// empty for none.
fn address(ip: Option<IpAddr>, in_url: bool) -> String {
    match ip {
        Some(IpAddr::V6(v6)) if in_url => format!("[{v6}]"),
        Some(ip) => ip.to_string(),
        None => String::new(),
    }
}

/// `text` with `{ip}` and `{interface}` filled.
fn fill(text: &str, ip: &str, interface: &str) -> String {
    text.replace(IP, ip).replace(INTERFACE, interface)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(url: &str, device: &str) -> TargetTemplate {
        TargetTemplate {
            url: url.to_owned(),
            device: device.to_owned(),
            switches: BTreeMap::new(),
        }
    }

    const NONE: [&str; 0] = [];

    #[test]
    fn a_target_is_the_template_with_the_next_hops_address_and_port() {
        let t = template("http://{ip}:9100/metrics", "to-{interface}");
        let v4 = t.target(Some("198.18.2.2".parse().expect("ip")), "s2");
        assert_eq!(v4.url, "http://198.18.2.2:9100/metrics");
        assert_eq!(v4.device, "to-s2");
        let v6 = template("http://{ip}:9100/metrics", "{ip}");
        let target = v6.target(Some("fd00::2".parse().expect("ip")), "s2");
        assert_eq!(target.url, "http://[fd00::2]:9100/metrics");
        assert_eq!(target.device, "fd00::2");
        check_url(&target.url).expect("a URL");
    }

    #[test]
    fn a_switch_is_scraped_at_its_listed_address_else_at_the_next_hops() {
        let mut t = template("http://{switch}:9100/metrics", "{interface}");
        t.switches = [("s1", "192.0.2.11"), ("s2", "spine-2.mgmt")]
            .map(|(port, host)| (port.to_owned(), host.to_owned()))
            .into();
        let on_link = |ip: &str, port: &str| t.target(Some(ip.parse().expect("ip")), port).url;
        assert_eq!(on_link("10.0.1.1", "s1"), "http://192.0.2.11:9100/metrics");
        assert_eq!(
            on_link("10.0.2.1", "s2"),
            "http://spine-2.mgmt:9100/metrics"
        );
        assert_eq!(on_link("fd00::3", "s3"), "http://[fd00::3]:9100/metrics");
        assert_eq!(t.target(None, "s1").device, "s1");
    }

    #[test]
    fn a_template_names_known_placeholders_and_makes_a_url() {
        assert_eq!(
            TargetTemplate::check("http://{ip}:9100/metrics", true, NONE),
            Ok(())
        );
        assert_eq!(TargetTemplate::check("fleaf", false, NONE), Ok(()));
        assert_eq!(TargetTemplate::check("{interface}", false, NONE), Ok(()));
        let unknown =
            TargetTemplate::check("http://{host}:9100/", true, NONE).expect_err("unknown");
        assert!(unknown.contains("only {ip}"), "{unknown}");
        let unbalanced = TargetTemplate::check("dev}", false, NONE).expect_err("a lone brace");
        assert!(unbalanced.contains("only {ip}"), "{unbalanced}");
        let no_port =
            TargetTemplate::check("http://{ip}/metrics", true, NONE).expect_err("no port");
        assert!(no_port.contains("has no port"), "{no_port}");
        assert_eq!(
            TargetTemplate::longest("{interface}-{ip}").len(),
            15 + 1 + LONGEST_IP.len()
        );
    }

    #[test]
    fn switch_is_a_url_placeholder_whose_every_address_must_make_a_url() {
        let url = "http://{switch}:9100/metrics";
        assert_eq!(TargetTemplate::check(url, true, ["192.0.2.11"]), Ok(()));
        let in_device = TargetTemplate::check("{switch}", false, NONE).expect_err("URL only");
        assert_eq!(
            in_device,
            "\"{switch}\": only {ip} (the next hop's address) and {interface} (the port \
             toward it) may be written in braces"
        );
        let bad = TargetTemplate::check(url, true, ["192.0.2.11", "a b"]).expect_err("no host");
        assert!(
            bad.starts_with(
                "\"http://{switch}:9100/metrics\" with {ip} = 192.0.2.1: \"http://a b:9100/metrics\" is not a URL"
            ) && bad.ends_with("and {switch} = \"a b\""),
            "{bad}"
        );
    }
}
