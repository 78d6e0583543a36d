//! Packets the testbed's links dropped, as the kernel counts them: what a
//! run lost on a loaded machine, so a test can tell the fabric's losses
//! from the testbed's.

use std::collections::BTreeMap;
use std::fmt;
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};
use lb_common::packet::parse::ROCEV2_UDP_PORT;

use super::Testbed;
use super::fabric::Fabric;
use super::topology::SHAPED_DEVICE;

/// Dropped packets by link (`role/device`): received and transmitted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkDrops(BTreeMap<String, (u64, u64)>);

impl LinkDrops {
    /// Every link of every namespace of `bed`.
    pub fn read(bed: &Testbed) -> Result<Self> {
        Self::read_in(bed.roles().into_iter().map(|role| (bed.ns(&role), role)))
    }

    /// Every link of every namespace of `fabric`.
    pub fn read_fabric(fabric: &Fabric) -> Result<Self> {
        Self::read_in(
            fabric
                .roles()
                .into_iter()
                .map(|role| (fabric.ns(&role), role)),
        )
    }

    /// Every link of each namespace, named `role/device`.
    fn read_in(namespaces: impl Iterator<Item = (String, String)>) -> Result<Self> {
        let mut drops = BTreeMap::new();
        for (ns, role) in namespaces {
            let out = Command::new("ip")
                .args(["-n", &ns, "-s", "-o", "link", "show"])
                .output()
                .with_context(|| format!("ip -s link in {ns}"))?;
            if !out.status.success() {
                bail!(
                    "ip -s link in {ns}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                let (device, rx, tx) = parse(line).with_context(|| format!("{ns}: {line}"))?;
                drops.insert(format!("{role}/{device}"), (rx, tx));
            }
        }
        Ok(Self(drops))
    }

    /// What was dropped after `earlier` was read.
    pub fn since(&self, earlier: &Self) -> Self {
        Self(
            self.0
                .iter()
                .map(|(link, &(rx, tx))| {
                    let (rx0, tx0) = earlier.0.get(link).copied().unwrap_or_default();
                    (link.clone(), (rx - rx0, tx - tx0))
                })
                .filter(|(_, (rx, tx))| rx + tx > 0)
                .collect(),
        )
    }

    /// Packets the testbed lost: a veth counts a packet it could not hand
    /// to its peer once, as a transmit drop (one redirected into it by XDP
    /// also as a receive drop of the peer, hence transmit drops only).
    /// Receive drops also count what XDP failed to redirect, e.g. to a port
    /// that is down: the fabric's losses, which a test must not excuse.
    pub fn lost(&self) -> u64 {
        self.0.values().map(|(_, tx)| tx).sum()
    }

    /// Transmit drops on the way from the senders to the receivers past a
    /// leaf running fabriclb: a sender's port, a spine's toward the far
    /// leaf, the far leaf's toward the receivers (on a fabric, where every
    /// host sends and receives: the hosts' ports, the spines' toward the
    /// leaves, the leaves' toward their hosts). The other direction
    /// carries only the namespaces' own ARP and ND. The leaf's ports toward
    /// the spines are left out: what fabriclb's program redirected there
    /// and the kernel failed to send, the leaf counts as its transmit
    /// errors (and a veth as its transmit drop as well), and its own stack
    /// sends only ARP and ND there.
    pub fn lost_on_the_way(&self) -> u64 {
        self.0
            .iter()
            .filter(|(link, _)| on_the_way(link))
            .map(|(_, (_, tx))| tx)
            .sum()
    }

    /// Transmit drops on the links of namespaces whose role starts with
    /// `prefix` (`h` for the senders' ports).
    pub fn lost_in(&self, prefix: &str) -> u64 {
        self.0
            .iter()
            .filter(|(link, _)| link.starts_with(prefix))
            .map(|(_, (_, tx))| tx)
            .sum()
    }
}

impl fmt::Display for LinkDrops {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return write!(f, "no drops");
        }
        let links: Vec<String> = self
            .0
            .iter()
            .map(|(link, (rx, tx))| format!("{link} rx {rx} tx {tx}"))
            .collect();
        write!(f, "{}", links.join(", "))
    }
}

/// Whether `role/device` transmits toward the receivers, apart from the
/// leaf's ports.
fn on_the_way(link: &str) -> bool {
    let Some((role, device)) = link.split_once('/') else {
        return false;
    };
    let numbered = |prefix: &str, name: &str| {
        name.strip_prefix(prefix)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    // On a fabric: `l1h1/eth0` a host's, `s2/l3` a spine's toward a
    // leaf, `l3/h1` a leaf's toward its host.
    let fabric_host = role.split_once('h').is_some_and(|(leaf, host)| {
        numbered("l", leaf) && !host.is_empty() && host.bytes().all(|b| b.is_ascii_digit())
    });
    ((numbered("h", role) || fabric_host) && device == "eth0")
        || (numbered("s", role) && (device == SHAPED_DEVICE || numbered("l", device)))
        || (role == "fleaf" && numbered("r", device))
        || (numbered("l", role) && numbered("h", device))
}

/// What a run sent that neither arrived nor was counted lost: 0 when every
/// loss was counted, negative when some was counted twice.
pub fn unaccounted(sent: u64, received: u64, counted_lost: u64) -> i64 {
    sent as i64 - received as i64 - counted_lost as i64
}

/// Device name and RX/TX drops of one `ip -s -o link` line.
fn parse(line: &str) -> Result<(String, u64, u64)> {
    let device = line
        .split(": ")
        .nth(1)
        .and_then(|d| d.split('@').next())
        .context("no device name")?
        .to_owned();
    let parts: Vec<&str> = line.split('\\').map(str::trim).collect();
    let dropped = |header: &str| -> Result<u64> {
        let at = parts
            .iter()
            .position(|p| p.starts_with(header))
            .with_context(|| format!("no {header} statistics"))?;
        let column = parts[at]
            .split_whitespace()
            .position(|c| c == "dropped")
            .context("no dropped column")?;
        let value = parts
            .get(at + 1)
            .and_then(|v| v.split_whitespace().nth(column - 1))
            .context("no dropped value")?;
        Ok(value.parse()?)
    };
    Ok((device, dropped("RX:")?, dropped("TX:")?))
}

/// The RoCEv2 frames devices drop as addressed to another MAC: sent to a
/// MAC the device no longer has. Counted by an nftables rule on each
/// device's ingress, since the device's own count (`rx_otherhost_dropped`)
/// takes every frame, the sender's BGP and ARP too, which no traffic
/// count explains. The rule goes with the namespace.
pub struct WrongMac {
    /// (namespace, device) of each counting rule.
    devices: Vec<(String, String)>,
}

/// The nftables table and counter the rules count in.
const WRONG_MAC_TABLE: &str = "fabriclb_testbed";
const WRONG_MAC_COUNTER: &str = "wrong_mac_rocev2";

impl WrongMac {
    /// Counts on `device` of each of `roles`' namespaces.
    pub fn count(bed: &Testbed, roles: &[String], device: &str) -> Result<Self> {
        let mut devices = Vec::new();
        for role in roles {
            let ns = bed.ns(role);
            // pkttype `other` is the kernel's PACKET_OTHERHOST, set before
            // ingress hooks run.
            let rules = format!(
                "table netdev {WRONG_MAC_TABLE} {{\n\
                   counter {WRONG_MAC_COUNTER} {{}}\n\
                   chain ingress {{\n\
                     type filter hook ingress device \"{device}\" priority 0;\n\
                     meta pkttype other udp dport {ROCEV2_UDP_PORT} counter name \"{WRONG_MAC_COUNTER}\";\n\
                   }}\n\
                 }}\n"
            );
            nft(&ns, &["-f", "-"], Some(&rules))?;
            devices.push((ns, device.to_owned()));
        }
        Ok(Self { devices })
    }

    /// The frames dropped so far, over every device.
    pub fn dropped(&self) -> Result<u64> {
        let mut total = 0;
        for (ns, device) in &self.devices {
            let listed = nft(
                ns,
                &[
                    "-j",
                    "list",
                    "counter",
                    "netdev",
                    WRONG_MAC_TABLE,
                    WRONG_MAC_COUNTER,
                ],
                None,
            )?;
            let listed: serde_json::Value = serde_json::from_str(&listed)
                .with_context(|| format!("nft's counter on {device} in {ns}: {listed}"))?;
            let packets = listed["nftables"]
                .as_array()
                .and_then(|items| items.iter().find_map(|i| i["counter"]["packets"].as_u64()))
                .with_context(|| format!("no packet count in nft's counter on {device} in {ns}"))?;
            total += packets;
        }
        Ok(total)
    }
}

/// Runs `nft` in namespace `ns` with `input` on its stdin; its stdout.
fn nft(ns: &str, args: &[&str], input: Option<&str>) -> Result<String> {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns, "nft"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("ip netns exec")?;
    if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin.write_all(input.as_bytes())?;
    }
    let output = child.wait_with_output()?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if stderr.contains("exec of \"nft\" failed") {
        bail!("nft is not installed (Debian nftables): `cargo xtask setup` installs it");
    }
    ensure!(
        output.status.success(),
        "nft {} in {ns}: {}",
        args.join(" "),
        stderr.trim()
    );
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ip_s_o_link() {
        let line = "3: s1@if2: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 3000 qdisc noqueue \
            state UP mode DEFAULT group default qlen 1000\\    link/ether ce:61:4f:9e:51:94 \
            brd ff:ff:ff:ff:ff:ff link-netns zq-s1\\    RX:  bytes packets errors dropped  \
            missed   mcast           \\           768      12      0       7       0       0 \
            \\    TX:  bytes packets errors dropped carrier collsns           \\           \
            768      12      0       3       0       0 ";
        assert_eq!(parse(line).unwrap(), ("s1".to_owned(), 7, 3));
    }

    /// Only the forward direction past the leaf counts: the leaf's own
    /// ports (its transmit errors count them) and the replies' direction
    /// do not.
    #[test]
    fn lost_on_the_way_counts_the_forward_links_past_the_leaf() {
        let shaped = format!("s2/{SHAPED_DEVICE}");
        let drops = LinkDrops(BTreeMap::from(
            [
                ("h1/eth0", (0, 1)),
                ("leaf/s2", (0, 20)),
                ("leaf/h1", (300, 40)),
                (shaped.as_str(), (0, 100)),
                ("s2/leaf", (0, 4)),
                ("fleaf/r1", (0, 1000)),
                ("fleaf/s2", (0, 50)),
                ("r1/eth0", (0, 60)),
            ]
            .map(|(link, counts)| (link.to_owned(), counts)),
        ));
        assert_eq!(drops.lost_on_the_way(), 1 + 100 + 1000);
        assert_eq!(drops.lost(), 1 + 20 + 40 + 100 + 4 + 1000 + 50 + 60);
    }

    #[test]
    fn unaccounted_is_what_no_count_explains() {
        assert_eq!(unaccounted(100, 90, 10), 0);
        assert_eq!(unaccounted(100, 90, 6), 4);
        assert_eq!(unaccounted(100, 90, 12), -2);
    }
}
