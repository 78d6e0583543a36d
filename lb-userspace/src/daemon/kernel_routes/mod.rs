//! Groups that learn their routes: the kernel's routes of a table and
//! protocol (`kernel_routes`), learned from a dump at start and route and
//! next-hop events after it ([`kernel`]), and APPL_DB's routes under `run
//! --sonic` (`sonic_routes`, [`appl_db`], as the SONiC thread last read
//! them), become fabriclb routes and groups ([`learned`]), written to the
//! maps a burst at a time. Lost events or a failed stream make the daemon
//! dump the kernel's again.

mod appl_db;
mod kernel;
mod learned;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::time::Instant;
use tracing::{info, warn};

use crate::config::{Config, KernelRoutes};
use crate::netlink::{Netlink, RouteEvent, RouteEvents};
use crate::sonic::ApplRoutes;
use kernel::KernelTable;
use learned::{Learned, Report};

/// A burst of route events (a session going down: one message per prefix)
/// is written once it has been quiet this long...
const QUIET: Duration = Duration::from_millis(2);
/// ...or this long after its first event, whichever is first: the bound
/// on an event's wait before its write.
const MAX_WAIT: Duration = Duration::from_millis(10);

/// The kernel's and APPL_DB's routes as the groups that follow them see
/// them.
#[derive(Default)]
pub(super) struct KernelWatch {
    /// `None` while no group follows the kernel, or after the stream
    /// failed (the refresh subscribes again).
    events: Option<RouteEvents>,
    table: KernelTable,
    /// APPL_DB's routes as last read (none without `--sonic`).
    appl: ApplRoutes,
    learned: Learned,
    /// The first event not yet written: when it came, and when the burst
    /// it is part of is written.
    pending: Option<(Instant, Instant)>,
    /// Events were lost, or the stream or a dump failed: dump again.
    stale: bool,
}

fn follows(config: &Config) -> bool {
    config.groups.iter().any(|g| g.kernel_routes.is_some())
}

fn learns(config: &Config) -> bool {
    config.groups.iter().any(|g| g.learns_routes())
}

/// The kernel routes `config`'s groups follow.
fn filters(config: &Config) -> Vec<KernelRoutes> {
    config
        .groups
        .iter()
        .filter_map(|g| g.kernel_routes)
        .collect()
}

impl KernelWatch {
    /// Follows the kernel's routes if a group of `file` does: subscribes,
    /// then dumps, and learns (APPL_DB's routes from `appl`). `file` with
    /// what was learned is what the tables are built from.
    pub(super) async fn start(
        file: &Config,
        appl: ApplRoutes,
        netlink: &Netlink,
    ) -> Result<(Self, Config)> {
        let mut watch = Self {
            appl,
            ..Self::default()
        };
        watch.follow(file, netlink).await?;
        let config = watch.effective(file);
        Ok((watch, config))
    }

    /// `file` with what was learned.
    pub(super) fn effective(&self, file: &Config) -> Config {
        self.learned.effective(file)
    }

    /// Subscribes and dumps if `file` has a group that follows the kernel
    /// and nothing is followed yet (or no longer what `file` follows),
    /// then learns anew for `file`; logs what changed.
    pub(super) async fn follow(&mut self, file: &Config, netlink: &Netlink) -> Result<Report> {
        if !follows(file) {
            *self = Self {
                appl: std::mem::take(&mut self.appl),
                learned: std::mem::take(&mut self.learned),
                ..Self::default()
            };
        }
        if !learns(file) {
            self.learned = Learned::default();
            return Ok(Report::default());
        }
        let filters = filters(file);
        if follows(file) && (self.events.is_none() || self.stale || self.table.filters != filters) {
            if self.events.is_none() {
                let events = RouteEvents::subscribe().context("following the kernel's routes")?;
                self.events = Some(events);
            }
            let dump = self.dump().await.context("reading the kernel's routes")?;
            self.table = KernelTable::from_dump(filters, dump);
            self.stale = false;
        }
        let report = self.learn(file, netlink).await?;
        log(&report);
        Ok(report)
    }

    async fn dump(&self) -> Result<Vec<RouteEvent>> {
        match &self.events {
            Some(events) => Ok(events.dump().await?),
            None => Ok(Vec::new()),
        }
    }

    /// The first event not yet written, and when it came: the burst it
    /// starts is being written.
    pub(super) fn take_pending(&mut self) -> Option<Instant> {
        self.pending.take().map(|(first, _)| first)
    }

    /// Whether the routes must be dumped again (events lost, the stream or
    /// a dump failed).
    pub(super) fn stale(&self) -> bool {
        self.stale
    }

    /// A write of what was learned failed: dump again at the next event or
    /// refresh.
    pub(super) fn mark_stale(&mut self) {
        self.stale = true;
    }

    /// Learns the groups' routes again: dumped anew when stale, else from
    /// the events since; said when anything was learned.
    pub(super) async fn relearn(&mut self, file: &Config, netlink: &Netlink) -> Result<Report> {
        if self.stale {
            return self.follow(file, netlink).await;
        }
        let report = self.learn(file, netlink).await?;
        log(&report);
        Ok(report)
    }

    async fn learn(&mut self, file: &Config, netlink: &Netlink) -> Result<Report> {
        let ports = netlink.ports().await.context("reading the ports")?;
        let port = |ifindex| ports.get(&ifindex).cloned();
        let is_port = |name: &str| ports.values().any(|p| p == name);
        let selected: BTreeMap<_, _> = file
            .groups
            .iter()
            .filter_map(|g| {
                let routes = match (&g.kernel_routes, &g.sonic_routes) {
                    (Some(kernel), _) => self.table.select(kernel, &port),
                    (None, Some(sonic)) => appl_db::select(&self.appl, sonic, &is_port),
                    (None, None) => return None,
                };
                Some((g.name.clone(), routes))
            })
            .collect();
        Ok(self.learned.update(file, &selected))
    }

    /// APPL_DB's routes as just read; returns whether they changed.
    pub(super) fn take_appl(&mut self, routes: ApplRoutes) -> bool {
        let changed = self.appl != routes;
        self.appl = routes;
        changed
    }

    /// The events that have arrived; never returns while there is no
    /// stream, `None` when the stream just failed.
    pub(super) async fn events(&mut self) -> Option<Vec<RouteEvent>> {
        match &mut self.events {
            Some(stream) => stream.batch().await,
            None => std::future::pending().await,
        }
    }

    /// Takes events in: applied to the kernel's routes as known, written
    /// when their burst ends.
    pub(super) fn take(&mut self, events: Option<Vec<RouteEvent>>) {
        match events {
            None => {
                warn!("kernel route events stopped; reading the routes again");
                self.events = None;
                self.stale = true;
            }
            Some(events) => {
                let mut relevant = false;
                for event in events {
                    if event == RouteEvent::Lost && !self.stale {
                        warn!("kernel route events lost; reading the routes again");
                        self.stale = true;
                    }
                    relevant |= self.table.apply(event);
                }
                if !relevant && !self.stale {
                    return;
                }
            }
        }
        self.schedule();
    }

    /// Port `ifindex` went down or lost its carrier: what the kernel
    /// deleted with it, silently, deleted here too and written with the
    /// burst.
    pub(super) fn port_down(&mut self, ifindex: u32) {
        if self.table.port_down(ifindex) {
            self.schedule();
        }
    }

    /// A burst of changes to write: when it ends, or at the latest
    /// [`MAX_WAIT`] after it began.
    fn schedule(&mut self) {
        let now = Instant::now();
        self.pending = Some(match self.pending {
            None => (now, now + QUIET),
            Some((first, _)) => (first, (now + QUIET).min(first + MAX_WAIT)),
        });
    }

    /// When the burst of events taken in is due to be written.
    pub(super) fn due(&self) -> Option<Instant> {
        self.pending.map(|(_, deadline)| deadline)
    }
}

/// Waits until `deadline`; forever without one.
pub(super) async fn until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// `file` with what its groups that learn their routes learn from the
/// kernel's routes now and from `appl` (APPL_DB's), numbered as a daemon
/// starting now numbers them: the names `status` and `explain` give a
/// daemon's learned groups.
pub fn with_learned_routes(file: &Config, appl: ApplRoutes) -> Result<Config> {
    if !learns(file) {
        return Ok(file.clone());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let netlink = Netlink::connect()?;
        let mut watch = KernelWatch {
            appl,
            ..KernelWatch::default()
        };
        if follows(file) {
            watch.events = Some(RouteEvents::subscribe()?);
            watch.table = KernelTable::from_dump(filters(file), watch.dump().await?);
        }
        watch.learn(file, &netlink).await?;
        Ok(watch.effective(file))
    })
}

fn log(report: &Report) {
    for (prefix, skip) in &report.skipped {
        warn!(%prefix, reason = %skip, "route not learned: its packets go to the kernel");
    }
    for prefix in &report.unskipped {
        info!(%prefix, "route no longer skipped");
    }
    for line in &report.groups {
        info!("learned routes: {line}");
    }
}
