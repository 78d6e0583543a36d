//! Targets for next hops a group learns (from the kernel's routes or
//! APPL_DB's): no next hop is written in the config, so each one's
//! target is made from the group's templates when it is learned.

use std::net::IpAddr;

use super::{Target, check_url};

/// The group's `telemetry_url` and `telemetry_device`, in which `{ip}`
/// stands for the next hop's address (in brackets in a URL when it is
/// IPv6) and `{interface}` for this box's port toward it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TargetTemplate {
    pub url: String,
    pub device: String,
}

/// What a template may name.
const IP: &str = "{ip}";
const INTERFACE: &str = "{interface}";

/// The longest values the placeholders take: an IPv6 address in
/// brackets, and an interface name (`IFNAMSIZ` - 1).
const LONGEST_IP: &str = "[ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255]";
const LONGEST_INTERFACE: &str = "interface-15-ch";

impl TargetTemplate {
    /// The target of the next hop at `ip` (none for one known by MAC
    /// alone) through `interface`.
    pub fn target(&self, ip: Option<IpAddr>, interface: &str) -> Target {
        Target {
            url: fill(&self.url, true, ip, interface),
            device: Self::device(&self.device, ip, interface),
        }
    }

    /// Device template `device` filled for the next hop at `ip` through
    /// `interface`.
    pub fn device(device: &str, ip: Option<IpAddr>, interface: &str) -> String {
        fill(device, false, ip, interface)
    }

    /// Why `text` (a URL template when `in_url`, else a device template)
    /// cannot make a target: a brace that opens no known placeholder, or
    /// a URL that is none with the placeholders filled. Every target it
    /// makes then passes `check_url`.
    pub fn check(text: &str, in_url: bool) -> Result<(), String> {
        let mut rest = text;
        while let Some(at) = rest.find(['{', '}']) {
            let tail = &rest[at..];
            let Some(known) = [IP, INTERFACE].into_iter().find(|p| tail.starts_with(p)) else {
                return Err(format!(
                    "{text:?}: only {IP} (the next hop's address) and {INTERFACE} (the port \
                     toward it) may be written in braces"
                ));
            };
            rest = &tail[known.len()..];
        }
        if in_url {
            // The placeholders' values are checked where they come from;
            // what is around them must make a URL with any of them.
            let sample = text.replace(IP, "192.0.2.1").replace(INTERFACE, "eth0");
            check_url(&sample).map_err(|why| format!("{text:?} with {IP} = 192.0.2.1: {why}"))?;
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

/// `text` with the placeholders filled; an IPv6 address in brackets in a
/// URL.
fn fill(text: &str, in_url: bool, ip: Option<IpAddr>, interface: &str) -> String {
    let ip = match ip {
        Some(IpAddr::V6(v6)) if in_url => format!("[{v6}]"),
        Some(ip) => ip.to_string(),
        None => String::new(),
    };
    text.replace(IP, &ip).replace(INTERFACE, interface)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(url: &str, device: &str) -> TargetTemplate {
        TargetTemplate {
            url: url.to_owned(),
            device: device.to_owned(),
        }
    }

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
    fn a_template_names_known_placeholders_and_makes_a_url() {
        assert_eq!(
            TargetTemplate::check("http://{ip}:9100/metrics", true),
            Ok(())
        );
        assert_eq!(TargetTemplate::check("fleaf", false), Ok(()));
        assert_eq!(TargetTemplate::check("{interface}", false), Ok(()));
        let unknown = TargetTemplate::check("http://{host}:9100/", true).expect_err("unknown");
        assert!(unknown.contains("only {ip}"), "{unknown}");
        let unbalanced = TargetTemplate::check("dev}", false).expect_err("a lone brace");
        assert!(unbalanced.contains("only {ip}"), "{unbalanced}");
        let no_port = TargetTemplate::check("http://{ip}/metrics", true).expect_err("no port");
        assert!(no_port.contains("has no port"), "{no_port}");
        assert_eq!(
            TargetTemplate::longest("{interface}-{ip}").len(),
            15 + 1 + LONGEST_IP.len()
        );
    }
}
