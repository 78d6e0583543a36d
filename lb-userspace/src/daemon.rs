//! `fabriclb run`: load, program, attach, keep next hops fresh, detach.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use aya::programs::{XdpMode, xdp::XdpLinkId};
use lb_common::maps::{NEXTHOP_USABLE, NextHop};
use tokio::signal::unix::{SignalKind, signal};
use tracing::{info, warn};

use crate::config::{self, Config, NextHopAddr, NextHopSpec, XdpModeSetting};
use crate::dataplane::Dataplane;
use crate::metrics::{self, NextHopSample};
use crate::netlink::{self, Link, Netlink};
use crate::tables::Tables;

pub struct Options {
    pub config: PathBuf,
    pub metrics_file: Option<PathBuf>,
    pub metrics_interval: Duration,
    /// How often links and neighbours are re-read.
    pub refresh_interval: Duration,
}

/// How long start-up waits for next-hop MACs before going on without them.
const INITIAL_RESOLVE_WAIT: Duration = Duration::from_secs(3);

pub async fn run(options: Options) -> Result<()> {
    let config = config::load(&options.config)?;
    let netlink = Netlink::connect()?;
    let mut dp = Dataplane::load().context("loading the XDP program")?;

    let nexthops = resolve_with_wait(&netlink, &config).await?;
    let mut tables = Tables::build(&config, nexthops);
    tables
        .write(&mut dp, None)
        .context("programming the maps")?;
    for (spec, nexthop) in specs(&config).zip(&tables.nexthops) {
        if nexthop.flags & NEXTHOP_USABLE == 0 {
            warn!(next_hop = %spec, "not usable yet (interface down or MAC unknown); retrying");
        }
    }

    let mut links = Vec::new();
    for interface in &config.switch.interfaces {
        let link = attach(&mut dp, interface, config.switch.xdp_mode)?;
        links.push(link);
    }
    write_metrics(&options, &dp, &config, &tables);
    info!(
        config = %options.config.display(),
        groups = config.groups.len(),
        routes = config.routes.len(),
        "ready"
    );

    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut refresh = tokio::time::interval(options.refresh_interval);
    let mut metrics_tick = tokio::time::interval(options.metrics_interval);
    loop {
        tokio::select! {
            _ = sigint.recv() => break,
            _ = sigterm.recv() => break,
            _ = refresh.tick() => {
                if let Err(e) = refresh_nexthops(&netlink, &config, &mut tables, &mut dp).await {
                    warn!("refreshing next hops: {e:#}");
                }
            }
            _ = metrics_tick.tick() => write_metrics(&options, &dp, &config, &tables),
        }
    }
    write_metrics(&options, &dp, &config, &tables);
    for link in links {
        dp.detach(link)?;
    }
    info!("detached; exiting");
    Ok(())
}

fn attach(dp: &mut Dataplane, interface: &str, setting: XdpModeSetting) -> Result<XdpLinkId> {
    let (link, mode) = match setting {
        XdpModeSetting::Driver => (dp.attach(interface, XdpMode::Driver)?, "driver"),
        XdpModeSetting::Generic => (dp.attach(interface, XdpMode::Skb)?, "generic"),
        XdpModeSetting::Auto => match dp.attach(interface, XdpMode::Driver) {
            Ok(link) => (link, "driver"),
            Err(e) => {
                warn!(
                    interface,
                    "driver mode refused ({e}); falling back to generic mode, which is much slower"
                );
                (dp.attach(interface, XdpMode::Skb)?, "generic")
            }
        },
    };
    info!(interface, mode, "attached");
    Ok(link)
}

fn specs(config: &Config) -> impl Iterator<Item = &NextHopSpec> {
    config.groups.iter().flat_map(|g| &g.next_hops)
}

/// Links and neighbours as the kernel has them now.
struct Snapshot {
    links: HashMap<String, Link>,
    neighbours: HashMap<(u32, IpAddr), [u8; 6]>,
}

impl Snapshot {
    async fn take(netlink: &Netlink, config: &Config) -> Result<Self> {
        let mut links = HashMap::new();
        for spec in specs(config) {
            if links.contains_key(&spec.interface) {
                continue;
            }
            match netlink.link(&spec.interface).await {
                Ok(link) => {
                    links.insert(spec.interface.clone(), link);
                }
                Err(e) => warn!(interface = %spec.interface, "{e}"),
            }
        }
        Ok(Self {
            links,
            neighbours: netlink.neighbours().await?,
        })
    }

    /// A next hop as the data plane should see it; not usable while its
    /// interface is missing or down or its MAC is unknown.
    fn resolve(&self, spec: &NextHopSpec) -> NextHop {
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
    fn solicit_missing(&self, config: &Config) {
        for spec in specs(config) {
            let (NextHopAddr::Ip(ip), Some(link)) = (spec.addr, self.links.get(&spec.interface))
            else {
                continue;
            };
            if self.resolve(spec).dst_mac == [0; 6] {
                let bound = spec.vlan.is_none().then_some(spec.interface.as_str());
                if let Err(e) = netlink::solicit(bound, link.ifindex, ip) {
                    warn!(next_hop = %spec, "cannot solicit the neighbour: {e}");
                }
            }
        }
    }
}

async fn resolve_with_wait(netlink: &Netlink, config: &Config) -> Result<Vec<NextHop>> {
    let deadline = tokio::time::Instant::now() + INITIAL_RESOLVE_WAIT;
    let mut solicited = false;
    loop {
        let snapshot = Snapshot::take(netlink, config).await?;
        let nexthops: Vec<NextHop> = specs(config).map(|s| snapshot.resolve(s)).collect();
        let unresolved = specs(config).zip(&nexthops).any(|(s, n)| {
            matches!(s.addr, NextHopAddr::Ip(_)) && n.ifindex != 0 && n.dst_mac == [0; 6]
        });
        if !unresolved || tokio::time::Instant::now() >= deadline {
            return Ok(nexthops);
        }
        if !solicited {
            snapshot.solicit_missing(config);
            solicited = true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn refresh_nexthops(
    netlink: &Netlink,
    config: &Config,
    tables: &mut Tables,
    dp: &mut Dataplane,
) -> Result<()> {
    let snapshot = Snapshot::take(netlink, config).await?;
    snapshot.solicit_missing(config);
    let previous = tables.clone();
    let mut changed = false;
    for ((id, spec), old) in (0u32..).zip(specs(config)).zip(&previous.nexthops) {
        let new = snapshot.resolve(spec);
        if tables.update_nexthop(id, new) {
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
    if changed {
        tables.write(dp, Some(&previous))?;
    }
    Ok(())
}

fn write_metrics(options: &Options, dp: &Dataplane, config: &Config, tables: &Tables) {
    let Some(path) = &options.metrics_file else {
        return;
    };
    let result = (|| -> Result<()> {
        let verdicts = dp.verdict_counts()?;
        let mut samples = Vec::new();
        for (group, table) in config.groups.iter().zip(&tables.groups) {
            for (spec, &id) in group.next_hops.iter().zip(&table.members) {
                samples.push(NextHopSample {
                    group: &group.name,
                    id,
                    label: spec.to_string(),
                    usable: tables.nexthops[id as usize].flags & NEXTHOP_USABLE != 0,
                    stats: dp.nexthop_stats(id)?,
                });
            }
        }
        metrics::write_atomically(path, &metrics::render(&verdicts, &samples))?;
        Ok(())
    })();
    if let Err(e) = result {
        warn!(path = %path.display(), "writing metrics: {e:#}");
    }
}
