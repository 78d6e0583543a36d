//! Next hops as the kernel's links and neighbours say they are: resolving
//! them, soliciting missing MACs, and refreshing the tables when a link or
//! a MAC changes.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::time::Duration;

use anyhow::Result;
use lb_common::abi::{NEXTHOP_USABLE, NextHop};
use tracing::{info, warn};

use super::state::Running;
use crate::config::{self, Config, NextHopAddr, NextHopSpec};
use crate::dataplane::Dataplane;
use crate::netlink::{self, Link, Netlink};

/// How long start-up waits for next-hop MACs before going on without them.
const INITIAL_RESOLVE_WAIT: Duration = Duration::from_secs(3);
impl Running {
    pub(super) async fn refresh_nexthops(
        &mut self,
        netlink: &Netlink,
        dp: &mut Dataplane,
    ) -> Result<()> {
        let snapshot = Snapshot::take(netlink, &self.config, &mut self.ongoing).await?;
        snapshot.solicit_missing(&self.config, &mut self.ongoing);
        let previous = self.tables.clone();
        let mut changed = false;
        for group in &previous.groups {
            for (spec, &id) in group.specs.iter().zip(&group.members) {
                let old = previous.nexthops[id as usize];
                let new = snapshot.resolve(spec);
                if self.tables.update_nexthop(id, new) {
                    changed = true;
                    info!(
                        next_hop = %spec,
                        usable = new.flags & NEXTHOP_USABLE != 0,
                        was_usable = old.flags & NEXTHOP_USABLE != 0,
                        mac = %config::format_mac(new.dst_mac),
                        "next hop changed"
                    );
                }
            }
        }
        if changed {
            self.tables.write(dp, Some(&previous))?;
        }
        Ok(())
    }
}

fn specs(config: &Config) -> impl Iterator<Item = &NextHopSpec> {
    config.groups.iter().flat_map(|g| &g.next_hops)
}

/// Links and neighbours as the kernel has them now.
pub(super) struct Snapshot {
    links: HashMap<String, Link>,
    neighbours: HashMap<(u32, IpAddr), [u8; 6]>,
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
            neighbours: netlink.neighbours().await?,
        })
    }

    /// A next hop as the data plane should see it; not usable while its
    /// interface is missing or down or its MAC is unknown.
    pub(super) fn resolve(&self, spec: &NextHopSpec) -> NextHop {
        let Some(link) = self.links.get(&spec.interface) else {
            return NextHop::default();
        };
        let dst_mac = match spec.addr {
            NextHopAddr::Mac(mac) => Some(mac),
            // A VLAN next hop's neighbour entry sits on the VLAN interface.
            NextHopAddr::Ip(ip) if spec.vlan.is_some() => self
                .neighbours
                .iter()
                .find_map(|((_, addr), mac)| (*addr == ip).then_some(*mac)),
            NextHopAddr::Ip(ip) => self.neighbours.get(&(link.ifindex, ip)).copied(),
        };
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

    /// Asks the kernel to resolve every IP next hop it has no MAC for.
    pub(super) fn solicit_missing(&self, config: &Config, ongoing: &mut Ongoing) {
        for spec in specs(config) {
            let (NextHopAddr::Ip(ip), Some(link)) = (spec.addr, self.links.get(&spec.interface))
            else {
                continue;
            };
            if self.resolve(spec).dst_mac == [0; 6] {
                let bound = spec.vlan.is_none().then_some(spec.interface.as_str());
                let key = format!("solicit {spec}");
                match netlink::solicit(bound, link.ifindex, ip) {
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
            snapshot.solicit_missing(config, ongoing);
            solicited = true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
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
