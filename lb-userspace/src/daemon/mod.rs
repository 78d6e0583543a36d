//! `fabriclb run`: load, program, attach, keep next hops fresh, detach.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use aya::programs::{XdpMode, xdp::XdpLinkId};
use lb_common::abi::{NEXTHOP_USABLE, NextHop};
use tokio::signal::unix::{SignalKind, signal};
use tracing::{error, info, warn};

use crate::config::{self, Config, NextHopAddr, NextHopSpec, XdpModeSetting};
use crate::dataplane::Dataplane;
use crate::dataplane::tables::Tables;
use crate::metrics::{self, GroupSample, NextHopSample};
use crate::netlink::{self, Link, Netlink};

pub struct Options {
    pub config: PathBuf,
    pub metrics_file: Option<PathBuf>,
    pub metrics_interval: Duration,
    /// How often links and neighbours are re-read.
    pub refresh_interval: Duration,
    /// Reload when the config file changes, not only on SIGHUP.
    pub watch_config: bool,
}

/// How long start-up waits for next-hop MACs before going on without them.
const INITIAL_RESOLVE_WAIT: Duration = Duration::from_secs(3);
/// How often a watched config file is checked for changes.
const WATCH_INTERVAL: Duration = Duration::from_millis(250);

/// What the daemon runs on: the config in force, the tables it made and
/// where the program is attached.
struct Running {
    config: Config,
    /// The file's identity when `config` was read from it.
    version: Option<FileVersion>,
    tables: Tables,
    links: Vec<(String, XdpLinkId)>,
}

pub async fn run(options: Options) -> Result<()> {
    let version = FileVersion::of(&options.config);
    let config = config::load(&options.config)?;
    let netlink = Netlink::connect()?;
    let mut dp =
        Dataplane::load(config.switch.flowlet_table_size).context("loading the XDP program")?;

    let snapshot = resolve_with_wait(&netlink, &config).await?;
    let tables = Tables::build(&config, None, |spec| snapshot.resolve(spec))?;
    tables
        .write(&mut dp, None)
        .context("programming the maps")?;
    for group in &tables.groups {
        for (spec, &id) in group.specs.iter().zip(&group.members) {
            if tables.nexthops[id as usize].flags & NEXTHOP_USABLE == 0 {
                warn!(next_hop = %spec, "not usable yet (interface down or MAC unknown); retrying");
            }
        }
    }

    let mut running = Running {
        version,
        tables,
        links: Vec::new(),
        config,
    };
    for interface in running.config.switch.interfaces.clone() {
        let link = attach(&mut dp, &interface, running.config.switch.xdp_mode)?;
        running.links.push((interface, link));
    }
    write_metrics(&options, &dp, &running.tables);
    info!(
        config = %options.config.display(),
        groups = running.config.groups.len(),
        routes = running.config.routes.len(),
        "ready"
    );

    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sighup = signal(SignalKind::hangup())?;
    let mut refresh = tokio::time::interval(options.refresh_interval);
    let mut metrics_tick = tokio::time::interval(options.metrics_interval);
    let mut watch = tokio::time::interval(WATCH_INTERVAL);
    loop {
        tokio::select! {
            _ = sigint.recv() => break,
            _ = sigterm.recv() => break,
            _ = sighup.recv() => {
                info!("SIGHUP: reloading {}", options.config.display());
                running.reload(&options.config, &netlink, &mut dp).await;
            }
            _ = watch.tick(), if options.watch_config => {
                let now = FileVersion::of(&options.config);
                if now.is_some() && now != running.version {
                    info!("{} changed: reloading", options.config.display());
                    running.reload(&options.config, &netlink, &mut dp).await;
                }
            }
            _ = refresh.tick() => {
                if let Err(e) = running.refresh_nexthops(&netlink, &mut dp).await {
                    warn!("refreshing next hops: {e:#}");
                }
            }
            _ = metrics_tick.tick() => write_metrics(&options, &dp, &running.tables),
        }
    }
    write_metrics(&options, &dp, &running.tables);
    for (_, link) in running.links {
        dp.detach(link)?;
    }
    info!("detached; exiting");
    Ok(())
}

/// A file's modification time, size and inode: enough to notice an edit,
/// also one saved by renaming a new file over the old.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileVersion {
    modified: std::time::SystemTime,
    len: u64,
    inode: u64,
}

impl FileVersion {
    fn of(path: &Path) -> Option<Self> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).ok()?;
        Some(Self {
            modified: meta.modified().ok()?,
            len: meta.len(),
            inode: meta.ino(),
        })
    }
}

impl Running {
    /// Reads the config again and, if it is valid, moves the data plane to
    /// it without detaching: maps are rewritten in place, entry by entry.
    /// An invalid config changes nothing.
    async fn reload(&mut self, path: &Path, netlink: &Netlink, dp: &mut Dataplane) {
        self.version = FileVersion::of(path);
        let config = match config::load(path) {
            Ok(config) => config,
            Err(e) => {
                error!("new config refused, the running one stays: {e}");
                return;
            }
        };
        if let Err(e) = self.apply(config, netlink, dp).await {
            error!("new config refused, the running one stays: {e:#}");
        }
    }

    async fn apply(&mut self, config: Config, netlink: &Netlink, dp: &mut Dataplane) -> Result<()> {
        let changes = config::changes(&self.config, &config);
        if changes.is_empty() {
            info!("config unchanged");
            return Ok(());
        }
        let old = &self.config.switch;
        if config.switch.flowlet_table_size != old.flowlet_table_size {
            warn!(
                "switch.flowlet_table_size {} -> {} takes effect at the next start; \
                 the table keeps its size until then",
                old.flowlet_table_size, config.switch.flowlet_table_size
            );
        }
        let snapshot = Snapshot::take(netlink, &config).await?;
        snapshot.solicit_missing(&config);
        let tables = Tables::build(&config, Some(&self.tables), |spec| snapshot.resolve(spec))?;
        if let Err(e) = tables.write(dp, Some(&self.tables)) {
            // Put back what was written so far: the old tables, diffed
            // against the new ones, touch exactly those entries.
            if let Err(undo) = self.tables.write(dp, Some(&tables)) {
                error!("restoring the running tables after a failed reload: {undo}");
            }
            return Err(e).context("programming the maps");
        }
        self.tables = tables;

        let mut attached = Vec::new();
        for (interface, link) in std::mem::take(&mut self.links) {
            if config.switch.interfaces.contains(&interface)
                && config.switch.xdp_mode == old.xdp_mode
            {
                attached.push((interface, link));
            } else {
                match dp.detach(link) {
                    Ok(()) => info!(interface, "detached"),
                    Err(e) => warn!(interface, "detaching: {e}"),
                }
            }
        }
        for interface in &config.switch.interfaces {
            if !attached.iter().any(|(name, _)| name == interface) {
                match attach(dp, interface, config.switch.xdp_mode) {
                    Ok(link) => attached.push((interface.clone(), link)),
                    Err(e) => error!(interface, "not attached: {e:#}"),
                }
            }
        }
        self.links = attached;
        for change in &changes {
            info!("config change: {change}");
        }
        self.config = config;
        info!(changes = changes.len(), "config reloaded");
        Ok(())
    }

    async fn refresh_nexthops(&mut self, netlink: &Netlink, dp: &mut Dataplane) -> Result<()> {
        let snapshot = Snapshot::take(netlink, &self.config).await?;
        snapshot.solicit_missing(&self.config);
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

async fn resolve_with_wait(netlink: &Netlink, config: &Config) -> Result<Snapshot> {
    let deadline = tokio::time::Instant::now() + INITIAL_RESOLVE_WAIT;
    let mut solicited = false;
    loop {
        let snapshot = Snapshot::take(netlink, config).await?;
        let unresolved = specs(config).any(|s| {
            let n = snapshot.resolve(s);
            matches!(s.addr, NextHopAddr::Ip(_)) && n.ifindex != 0 && n.dst_mac == [0; 6]
        });
        if !unresolved || tokio::time::Instant::now() >= deadline {
            return Ok(snapshot);
        }
        if !solicited {
            snapshot.solicit_missing(config);
            solicited = true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn write_metrics(options: &Options, dp: &Dataplane, tables: &Tables) {
    let Some(path) = &options.metrics_file else {
        return;
    };
    let result = (|| -> Result<()> {
        let verdicts = dp.verdict_counts()?;
        let mut nexthops = Vec::new();
        let mut groups = Vec::new();
        for group in &tables.groups {
            groups.push(GroupSample {
                name: &group.name,
                mode: group.entry.mode,
                stats: dp.group_stats(group.id)?,
            });
            for (spec, &id) in group.specs.iter().zip(&group.members) {
                nexthops.push(NextHopSample {
                    group: &group.name,
                    id,
                    label: spec.to_string(),
                    usable: tables.nexthops[id as usize].flags & NEXTHOP_USABLE != 0,
                    stats: dp.nexthop_stats(id)?,
                });
            }
        }
        metrics::write_atomically(path, &metrics::render(&verdicts, &groups, &nexthops))?;
        Ok(())
    })();
    if let Err(e) = result {
        warn!(path = %path.display(), "writing metrics: {e:#}");
    }
}
