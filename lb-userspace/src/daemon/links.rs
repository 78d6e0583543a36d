//! Next hops as the kernel's links and neighbours say they are: resolving
//! them, soliciting missing and stale neighbours, probing known ones so
//! that a changed MAC is learnt, saying why one is unusable, and
//! refreshing the tables when a link or a MAC changes.
//!
//! Traffic that XDP forwards never uses the kernel's neighbour entries, so
//! the kernel's own state machine never asks again about a next hop whose
//! MAC changes while its link stays up (a router swapped behind a media
//! converter, a spine rebooted into another MAC behind an L2 hop). The
//! probe tick asks each one: one ARP request or neighbour solicitation per
//! next hop per tick (50 ms by default, so 20 a second on each uplink).
//! The answer replaces the entry's MAC, and the event it raises rewrites
//! the next hop. A peer that announces its new MAC (gratuitous ARP,
//! unsolicited neighbour advertisement) is taken at once by the kernel,
//! and so by its event, without waiting for a probe. For the same reason
//! the kernel never fails a peer that stops answering: its entry goes
//! STALE and stays so, unless something sends through it
//! ([`Snapshot::solicit_unconfirmed`]).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

use anyhow::Result;
use lb_common::abi::{NEXTHOP_USABLE, NextHop};
use tracing::warn;

use crate::config::{Config, NextHopAddr, NextHopSpec};
use crate::netlink::probe::Prober;
use crate::netlink::{self, Address, Link, LinkEvent, Neighbour, Netlink};

/// How long start-up waits for next-hop MACs before going on without them.
const INITIAL_RESOLVE_WAIT: Duration = Duration::from_secs(3);

fn specs(config: &Config) -> impl Iterator<Item = &NextHopSpec> {
    config.groups.iter().flat_map(|g| &g.next_hops)
}

/// Links and neighbours as the kernel has them now.
pub(super) struct Snapshot {
    links: HashMap<String, Link>,
    pub(super) neighbours: HashMap<(u32, IpAddr), Neighbour>,
}

impl Snapshot {
    pub(super) async fn take(
        netlink: &Netlink,
        config: &Config,
        ongoing: &mut Ongoing,
    ) -> Result<Self> {
        let mut links = HashMap::new();
        for spec in specs(config) {
            if links.contains_key(&spec.interface) {
                continue;
            }
            let key = format!("link {}", spec.interface);
            match netlink.link(&spec.interface).await {
                Ok(link) => {
                    ongoing.ended(&key);
                    links.insert(spec.interface.clone(), link);
                }
                Err(e) => ongoing.started(key, || warn!(interface = %spec.interface, "{e}")),
            }
        }
        Ok(Self {
            links,
            neighbours: netlink.neighbour_entries().await?,
        })
    }

    /// Reads again the links whose index is in `ifindexes`. One that cannot
    /// be read is left as it was: its own event follows.
    pub(super) async fn read_links(&mut self, netlink: &Netlink, ifindexes: &HashSet<u32>) {
        let names: Vec<String> = (self.links.iter())
            .filter(|(_, link)| ifindexes.contains(&link.ifindex))
            .map(|(name, _)| name.clone())
            .collect();
        for name in names {
            if let Ok(link) = netlink.link(&name).await {
                self.links.insert(name, link);
            }
        }
    }

    /// Applies a link or neighbour event, as a read after it would have
    /// found them. Only `config`'s interfaces are kept, as [`Self::take`]
    /// keeps them.
    pub(super) fn apply(&mut self, event: LinkEvent, config: &Config) {
        match event {
            LinkEvent::Link {
                name,
                ifindex,
                link,
            } => {
                // A renamed interface is no longer known by its old name.
                self.links
                    .retain(|known, l| l.ifindex != ifindex || *known == name);
                match link {
                    Some(link) if specs(config).any(|s| s.interface == name) => {
                        self.links.insert(name, link);
                    }
                    _ => {
                        self.links.remove(&name);
                    }
                }
            }
            LinkEvent::Deleted { ifindex, .. } => self.links.retain(|_, l| l.ifindex != ifindex),
            LinkEvent::Neighbour {
                key,
                entry: Some(neighbour),
            } => {
                self.neighbours.insert(key, neighbour);
            }
            LinkEvent::Neighbour { key, entry: None } => {
                self.neighbours.remove(&key);
            }
            LinkEvent::Lost => {}
        }
    }

    /// A next hop as the data plane should see it; not usable while its
    /// interface is missing or down or its MAC is unknown.
    pub(super) fn resolve(&self, spec: &NextHopSpec) -> NextHop {
        let Some(link) = self.links.get(&spec.interface) else {
            return NextHop::default();
        };
        let dst_mac = self.dst_mac(spec, link);
        NextHop {
            ifindex: link.ifindex,
            vlan: spec.vlan.unwrap_or(0),
            flags: if link.up && dst_mac.is_some() {
                NEXTHOP_USABLE
            } else {
                0
            },
            dst_mac: dst_mac.unwrap_or_default(),
            src_mac: link.mac,
        }
    }

    /// Why [`Self::resolve`] finds `spec` unusable; `None` when it is usable.
    pub(super) fn unusable<'a>(&self, spec: &'a NextHopSpec) -> Option<Unusable<'a>> {
        let Some(link) = self.links.get(&spec.interface) else {
            return Some(Unusable::InterfaceMissing(&spec.interface));
        };
        if !link.up {
            return Some(Unusable::InterfaceDown(&spec.interface));
        }
        self.dst_mac(spec, link)
            .is_none()
            .then_some(Unusable::NoMac(spec))
    }

    /// Says, for each next hop that cannot be used yet, why, and for each
    /// group with none usable that its traffic is not forwarded.
    pub(super) fn warn_unusable(&self, config: &Config) {
        for group in &config.groups {
            let mut usable = 0;
            for spec in &group.next_hops {
                match self.unusable(spec) {
                    Some(reason) => warn!(next_hop = %spec, %reason, "not usable yet; retrying"),
                    None => usable += 1,
                }
            }
            if usable == 0 {
                warn!(
                    group = group.name,
                    "no next hop usable: the group's routes go to the kernel \
                     (verdict no_nexthop) until one is"
                );
            }
        }
    }

    fn dst_mac(&self, spec: &NextHopSpec, link: &Link) -> Option<[u8; 6]> {
        match spec.addr {
            NextHopAddr::Mac(mac) => Some(mac),
            NextHopAddr::Ip(ip) => self.neighbour(spec, ip, link).map(|(_, n)| n.mac),
        }
    }

    /// The neighbour entry of IP next hop `spec` (address `ip`, interface
    /// `link`): the interface it is on, and the entry.
    fn neighbour(&self, spec: &NextHopSpec, ip: IpAddr, link: &Link) -> Option<(u32, Neighbour)> {
        if spec.vlan.is_some() {
            // A VLAN next hop's entry sits on the VLAN interface, which
            // fabriclb knows only through the entry.
            self.neighbours
                .iter()
                .find_map(|(&(ifindex, addr), &n)| (addr == ip).then_some((ifindex, n)))
        } else {
            self.neighbours
                .get(&(link.ifindex, ip))
                .map(|&n| (link.ifindex, n))
        }
    }

    /// Probes, once each, the neighbours of the IP next hops whose MAC the
    /// kernel has, on links that are up, from the box's `addresses` (see
    /// [`netlink::probe`]): the answers keep the entries REACHABLE and
    /// replace a MAC that changed. Entries the kernel never asks about
    /// (permanent, no-ARP) are left alone. Returns whether any was probed.
    pub(super) fn probe_neighbours(
        &self,
        prober: &mut Prober,
        addresses: &[Address],
        config: &Config,
        ongoing: &mut Ongoing,
    ) -> bool {
        let mut probed = HashSet::new();
        for spec in specs(config) {
            let NextHopAddr::Ip(ip) = spec.addr else {
                continue;
            };
            let Some(link) = self.links.get(&spec.interface).filter(|link| link.up) else {
                continue;
            };
            let Some((ifindex, neighbour)) = self.neighbour(spec, ip, link) else {
                continue;
            };
            if !neighbour.kernel_confirms || !probed.insert((ifindex, ip)) {
                continue;
            }
            let key = format!("probe {spec}");
            match prober.probe(ifindex, addresses, ip) {
                Ok(()) => ongoing.ended(&key),
                Err(e) => ongoing.started(
                    key,
                    || warn!(next_hop = %spec, "cannot probe the neighbour: {e}"),
                ),
            }
        }
        prober.keep_only(|ifindex| probed.iter().any(|&(i, _)| i == ifindex));
        !probed.is_empty()
    }

    /// Has the kernel check every IP next hop it has no MAC for or no
    /// longer confirms (STALE), as its own traffic through the entry
    /// would: one that has none is resolved, a stale one is probed by
    /// unicast and fails if its peer stays silent. XDP's traffic never
    /// goes through the entry, so without this a peer that stopped
    /// answering with its link up kept its MAC, and its share, for good,
    /// and one that failed was asked again only at the refresh.
    pub(super) fn solicit_unconfirmed(&self, config: &Config, ongoing: &mut Ongoing) {
        for spec in specs(config) {
            let (NextHopAddr::Ip(ip), Some(link)) = (spec.addr, self.links.get(&spec.interface))
            else {
                continue;
            };
            let entry = self.neighbour(spec, ip, link);
            if entry.is_none_or(|(_, n)| n.stale || n.mac == [0; 6]) {
                let bound = spec.vlan.is_none().then_some(spec.interface.as_str());
                // A VLAN next hop's stale entry names its VLAN interface,
                // a link-local address's scope.
                let scope = entry.map_or(link.ifindex, |(ifindex, _)| ifindex);
                let key = format!("solicit {spec}");
                match netlink::solicit(bound, scope, ip) {
                    Ok(()) => ongoing.ended(&key),
                    Err(e) => ongoing.started(
                        key,
                        || warn!(next_hop = %spec, "cannot solicit the neighbour: {e}"),
                    ),
                }
            }
        }
    }
}

pub(super) async fn resolve_with_wait(
    netlink: &Netlink,
    config: &Config,
    ongoing: &mut Ongoing,
) -> Result<Snapshot> {
    let deadline = tokio::time::Instant::now() + INITIAL_RESOLVE_WAIT;
    let mut solicited = false;
    loop {
        let snapshot = Snapshot::take(netlink, config, ongoing).await?;
        let unresolved = specs(config).any(|s| {
            let n = snapshot.resolve(s);
            matches!(s.addr, NextHopAddr::Ip(_)) && n.ifindex != 0 && n.dst_mac == [0; 6]
        });
        if !unresolved || tokio::time::Instant::now() >= deadline {
            return Ok(snapshot);
        }
        if !solicited {
            snapshot.solicit_unconfirmed(config, ongoing);
            solicited = true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Why a next hop is not usable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Unusable<'a> {
    /// No interface of that name (or it could not be read: the refresh
    /// logs why).
    InterfaceMissing(&'a str),
    /// Administratively down or without carrier.
    InterfaceDown(&'a str),
    /// An IP next hop the kernel has no MAC for (yet).
    NoMac(&'a NextHopSpec),
}

impl fmt::Display for Unusable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InterfaceMissing(interface) => write!(f, "interface {interface} missing"),
            Self::InterfaceDown(interface) => write!(f, "interface {interface} down"),
            Self::NoMac(spec) => {
                write!(f, "no MAC for {} on {}", spec.addr, spec.interface)?;
                if let Some(vlan) = spec.vlan {
                    write!(f, " vlan {vlan}")?;
                }
                write!(f, " yet")
            }
        }
    }
}

/// Conditions a refresh finds again and again while they last (a link
/// missing, a neighbour that cannot be solicited): each is logged when it
/// starts, not on every refresh.
#[derive(Debug, Default)]
pub(super) struct Ongoing(HashSet<String>);

impl Ongoing {
    /// Runs `log` if `key` is not already ongoing, and marks it so.
    pub(super) fn started(&mut self, key: String, log: impl FnOnce()) {
        if self.0.insert(key) {
            log();
        }
    }

    /// Ends `key`, so that it is logged again if it comes back.
    pub(super) fn ended(&mut self, key: &str) {
        self.ended_now(key);
    }

    /// [`Ongoing::ended`], saying whether `key` was ongoing (for logging
    /// that it is over).
    pub(super) fn ended_now(&mut self, key: &str) -> bool {
        self.0.remove(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config;

    const PEER: [u8; 6] = [2, 0, 0, 0, 0, 2];
    const NEIGHBOUR: Neighbour = Neighbour {
        mac: PEER,
        kernel_confirms: false,
        stale: false,
    };

    fn spec(interface: &str, addr: &str, vlan: Option<u16>) -> NextHopSpec {
        NextHopSpec {
            interface: interface.into(),
            addr: NextHopAddr::Ip(addr.parse().expect("address")),
            vlan,
        }
    }

    /// `s1` (index 11) and `s2` (12) up, `s3` (13) down; 198.18.1.2
    /// resolved on s1, fe80::2 on s1's VLAN interface (index 40).
    fn snapshot() -> Snapshot {
        let link = |ifindex, up| Link {
            ifindex,
            mac: [2, 0, 0, 0, 0, ifindex as u8],
            up,
        };
        Snapshot {
            links: HashMap::from([
                ("s1".into(), link(11, true)),
                ("s2".into(), link(12, true)),
                ("s3".into(), link(13, false)),
            ]),
            neighbours: HashMap::from([
                ((11, "198.18.1.2".parse().expect("ip")), NEIGHBOUR),
                ((40, "fe80::2".parse().expect("ip")), NEIGHBOUR),
            ]),
        }
    }

    fn reason(spec: &NextHopSpec) -> Option<String> {
        snapshot().unusable(spec).map(|r| r.to_string())
    }

    #[test]
    fn an_unusable_next_hop_says_whether_its_interface_or_its_mac_is_missing() {
        let missing = spec("s9", "198.18.9.2", None);
        assert_eq!(reason(&missing).as_deref(), Some("interface s9 missing"));
        let down = spec("s3", "198.18.3.2", None);
        assert_eq!(reason(&down).as_deref(), Some("interface s3 down"));
        let unresolved = spec("s2", "198.18.2.2", None);
        assert_eq!(
            reason(&unresolved).as_deref(),
            Some("no MAC for 198.18.2.2 on s2 yet")
        );
        // Resolved, but on another interface than the next hop's.
        let elsewhere = spec("s2", "198.18.1.2", None);
        assert_eq!(
            reason(&elsewhere).as_deref(),
            Some("no MAC for 198.18.1.2 on s2 yet")
        );
        let vlan = spec("s2", "fe80::9", Some(100));
        assert_eq!(
            reason(&vlan).as_deref(),
            Some("no MAC for fe80::9 on s2 vlan 100 yet")
        );
        for s in [&missing, &down, &unresolved, &elsewhere, &vlan] {
            assert_eq!(snapshot().resolve(s).flags & NEXTHOP_USABLE, 0, "{s}");
        }
    }

    #[test]
    fn a_usable_next_hop_has_no_reason() {
        let by_ip = spec("s1", "198.18.1.2", None);
        let on_vlan = spec("s1", "fe80::2", Some(100));
        let by_mac = NextHopSpec {
            addr: NextHopAddr::Mac(PEER),
            ..spec("s2", "198.18.2.2", None)
        };
        for s in [&by_ip, &on_vlan, &by_mac] {
            assert_eq!(reason(s), None, "{s}");
            let resolved = snapshot().resolve(s);
            assert_eq!(resolved.flags & NEXTHOP_USABLE, NEXTHOP_USABLE, "{s}");
            assert_eq!(resolved.dst_mac, PEER, "{s}");
        }
    }

    /// s1 198.18.1.2 and s2 198.18.2.2 (not resolved in [`snapshot`]).
    fn config() -> Config {
        let text = "[switch]\ninterfaces = [\"h1\"]\n[[group]]\nname = \"spines\"\n\
                    next_hops = [{ interface = \"s1\", ip = \"198.18.1.2\" }, \
                    { interface = \"s2\", ip = \"198.18.2.2\" }]\n\
                    [[route]]\nprefix = \"198.19.0.0/16\"\ngroup = \"spines\"\n";
        config::parse(text, std::path::Path::new("links.toml")).expect("config")
    }

    #[test]
    fn events_change_what_next_hops_resolve_to_as_a_read_would() {
        let config = config();
        let s1 = spec("s1", "198.18.1.2", None);
        let s2 = spec("s2", "198.18.2.2", None);
        let mut view = snapshot();
        let reason = |view: &Snapshot, s| view.unusable(s).map(|r| r.to_string());
        let link = |name: &str, ifindex, up| LinkEvent::Link {
            name: name.into(),
            ifindex,
            link: Some(Link {
                ifindex,
                mac: [2, 0, 0, 0, 0, ifindex as u8],
                up,
            }),
        };
        assert_eq!(reason(&view, &s1), None);
        view.apply(link("s1", 11, false), &config);
        assert_eq!(reason(&view, &s1).as_deref(), Some("interface s1 down"));
        view.apply(link("s1", 11, true), &config);
        assert_eq!(reason(&view, &s1), None);
        // The neighbour fails, then comes back with a new MAC.
        let key = (11, "198.18.1.2".parse().expect("ip"));
        view.apply(LinkEvent::Neighbour { key, entry: None }, &config);
        assert_eq!(
            reason(&view, &s1).as_deref(),
            Some("no MAC for 198.18.1.2 on s1 yet")
        );
        let new_mac = [2, 0, 0, 0, 0, 0x99];
        let entry = Some(Neighbour {
            mac: new_mac,
            kernel_confirms: false,
            stale: false,
        });
        view.apply(LinkEvent::Neighbour { key, entry }, &config);
        assert_eq!(view.resolve(&s1).dst_mac, new_mac);
        assert_eq!(view.resolve(&s1).flags, NEXTHOP_USABLE);
        // s2 resolved by an event alone.
        let key = (12, "198.18.2.2".parse().expect("ip"));
        view.apply(LinkEvent::Neighbour { key, entry }, &config);
        assert_eq!(reason(&view, &s2), None);
        // Deleted, and renamed away: missing either way.
        view.apply(
            LinkEvent::Deleted {
                name: "s2".into(),
                ifindex: 12,
            },
            &config,
        );
        assert_eq!(reason(&view, &s2).as_deref(), Some("interface s2 missing"));
        view.apply(link("uplink1", 11, true), &config);
        assert_eq!(reason(&view, &s1).as_deref(), Some("interface s1 missing"));
        // An interface no next hop uses is not kept.
        assert!(!view.links.contains_key("uplink1"));
    }

    #[test]
    fn an_ongoing_condition_logs_once_until_it_ends() {
        let mut ongoing = Ongoing::default();
        let mut logged = 0;
        for _ in 0..3 {
            ongoing.started("link s2".into(), || logged += 1);
        }
        ongoing.started("link s3".into(), || logged += 1);
        assert_eq!(logged, 2);
        ongoing.ended("link s2");
        ongoing.started("link s2".into(), || logged += 1);
        assert_eq!(logged, 3);
    }
}
