//! `fabriclb run`: load, program, attach, then react to signals, config
//! changes, address events, link and neighbour refreshes and metric ticks
//! until told to stop; leave the pinned program forwarding on the way out.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::broadcast;
use tracing::{info, warn};

use super::Running;
use super::reload;
use crate::daemon::adopt;
use crate::daemon::config_file;
use crate::daemon::control::{Control, Request};
use crate::daemon::flow_events::{FlowEvents, WATCH_BACKLOG};
use crate::daemon::http::Scrapes;
use crate::daemon::ingress::IngressPorts;
use crate::daemon::kernel_routes::{self, KernelWatch};
use crate::daemon::link_events::{self, LinkWatch};
use crate::daemon::links::{Ongoing, resolve_with_wait};
use crate::daemon::loads::Loads;
use crate::daemon::local::{self, Follower};
use crate::daemon::metrics_file::MetricsTick;
use crate::daemon::notify::ServiceManager;
use crate::daemon::peer_load::{PEER_LOAD_INTERVAL, PeerLoads};
use crate::daemon::sonic::{self, Sonic};
use crate::daemon::telemetry::Telemetry;
use crate::netlink::Netlink;
use crate::sonic::ApplRoutes;
use crate::telemetry::counters_db::Address;

pub struct Options {
    pub config: PathBuf,
    pub metrics_file: Option<PathBuf>,
    pub metrics_interval: Duration,
    /// Where `GET /metrics` is served.
    pub metrics_listen: Option<SocketAddr>,
    /// How often links and neighbours are re-read (besides their events).
    pub refresh_interval: Duration,
    /// How often the neighbours of IP next hops are probed, so that a MAC
    /// changed without an announcement is learnt.
    pub probe_interval: Duration,
    /// Reload when the config file changes, not only on SIGHUP.
    pub watch_config: bool,
    /// Where bpffs is (mounted there if it is not) and the instance whose
    /// maps and links are pinned under it.
    pub bpffs: PathBuf,
    pub instance: String,
    /// Where the control socket (`fabriclb reload`) is made.
    pub run_dir: PathBuf,
    /// SONiC's Redis: its settings over the file's, counters published.
    pub sonic: Option<Address>,
}

/// How often a watched config file is checked for changes.
const WATCH_INTERVAL: Duration = Duration::from_millis(250);
/// How often paths are checked for stale telemetry, also when a source's
/// poller is stuck and sends nothing.
const STALENESS_CHECK: Duration = Duration::from_millis(10);

/// A tick every `period` that, after the loop stalled, fires once and
/// goes on a period later, rather than firing the missed ticks back to
/// back: each tick's work reads the present, and a burst of them only
/// repeats it.
fn every(period: Duration) -> tokio::time::Interval {
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    interval
}

pub async fn run(options: Options) -> Result<()> {
    let (file, version) = config_file::load(&options.config).await?;
    sonic::needs_sonic(&file, options.sonic.is_some())?;
    let (mut sonic, file, appl_routes) = match &options.sonic {
        Some(address) => {
            let (sonic, file, routes) = Sonic::start(address, file).await?;
            (Some(sonic), file, routes)
        }
        None => (None, file, ApplRoutes::default()),
    };
    // Before loading: a port in use fails the start with nothing to undo.
    let mut scrapes = Scrapes::listen(options.metrics_listen).await?;
    let netlink = Netlink::connect()?;
    let flowlets = file.switch.flowlet_table_size;
    let mut dp = adopt::load(&options.bpffs, &options.instance, flowlets)?;
    // With the instance's lock held: a second daemon of it, refused, never
    // touches the first's socket.
    let (watchers, _) = broadcast::channel(WATCH_BACKLOG);
    let mut control = Control::listen(&options.run_dir, &options.instance, watchers.clone());
    // The kernel's routes before the tables: a restart takes over with
    // the routes the kernel has, not without them.
    let (kernel, config) = KernelWatch::start(&file, appl_routes, &netlink).await?;
    let config = sonic::over_learned(&mut sonic, config);

    let mut ongoing = Ongoing::default();
    let link_events = link_events::subscribe();
    let snapshot = resolve_with_wait(&netlink, &config, &mut ongoing).await?;
    let (mut tables, held) = adopt::tables(&dp, &config, |spec| snapshot.resolve(spec))?;
    // Local before attaching: no packet for the box is ever forwarded.
    let follower = Follower::start(&netlink).await?;
    local::program(&follower, &mut tables);
    local::report_shadowed(None, &tables);
    reload::report_override_skips(None, &tables);
    tables
        .write(&mut dp, held.as_ref())
        .context("programming the maps")?;
    snapshot.warn_unusable(&config);

    let telemetry = Telemetry::start(&config, &tables);
    let flow_events = FlowEvents::start(&mut dp, &config.events, watchers);
    let ingress = IngressPorts::attach(&mut dp, &config.switch, &mut ongoing)?;
    // After attaching: forwarding does not wait on them.
    dp.count_tx_errors(ingress.attached())?;
    let mut running = Running {
        watch: config_file::ConfigWatch::new(version),
        tables,
        file,
        kernel,
        local: follower,
        links: LinkWatch::new(link_events, snapshot),
        ingress,
        config,
        telemetry,
        peer_loads: PeerLoads::default(),
        ongoing,
        sonic,
        manager: ServiceManager::from_env(),
        loads: Loads::started(),
        flow_events,
    };
    dp.commit_pins(&running.config.switch.interfaces)?;
    running.sync_ports(&netlink, &mut dp).await;
    running.drop_privileges();
    let mut metrics = MetricsTick::default();
    running.write_metrics(&mut metrics, options.metrics_file.as_deref(), &dp);
    info!(
        version = crate::VERSION,
        config = %options.config.display(),
        groups = running.config.groups.len(),
        routes = running.config.routes.len(),
        learned_routes = running.config.routes.len() - running.file.routes.len(),
        "ready"
    );
    let status = running.in_force(&options.config);
    running.manager.ready(&status);

    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sighup = signal(SignalKind::hangup())?;
    let mut refresh = every(options.refresh_interval);
    let mut probe = every(options.probe_interval);
    let mut metrics_tick = every(options.metrics_interval);
    let mut watch = every(WATCH_INTERVAL);
    let mut staleness = every(STALENESS_CHECK);
    let mut share_loads = every(PEER_LOAD_INTERVAL);
    loop {
        let due = running.kernel.due();
        tokio::select! {
            _ = sigint.recv() => break,
            _ = sigterm.recv() => break,
            _ = sighup.recv() => {
                info!("SIGHUP: reloading {}", options.config.display());
                let _ = running.reload(&options.config, &netlink, &mut dp).await;
            }
            (request, answer) = control.next() => match request {
                Request::Reload => {
                    info!("fabriclb reload: reloading {}", options.config.display());
                    let reloaded = running.reload(&options.config, &netlink, &mut dp).await;
                    // A client that went away has nobody to answer.
                    let _ = answer.send(reloaded);
                }
            },
            _ = watch.tick(), if options.watch_config => {
                running.watch_config(&options.config, &netlink, &mut dp).await;
            }
            batch = running.telemetry.next() => running.telemetry_batch(batch, &mut dp),
            events = running.flow_events.next() => running.flow_events(&events),
            rows = sonic::next(&mut running.sonic) => {
                running.sonic_rows(rows, &netlink, &mut dp).await;
            }
            _ = share_loads.tick() => running.share_loads(&mut dp),
            _ = staleness.tick() => {
                running.telemetry_expire(&mut dp);
                running.end_drains(&mut dp);
            }
            events = running.local.events() => {
                running.address_events(events, &netlink, &mut dp).await;
            }
            events = running.kernel.events() => running.kernel.take(events),
            _ = kernel_routes::until(due) => running.kernel_routes(&netlink, &mut dp).await,
            events = running.links.events() => {
                running.link_events(events, &netlink, &mut dp).await;
            }
            _ = refresh.tick() => {
                if let Err(e) = running.refresh_nexthops(&netlink, &mut dp).await {
                    warn!("refreshing next hops: {e:#}");
                }
                running.refresh_local(&netlink, &mut dp).await;
                running.refresh_kernel_routes(&netlink, &mut dp).await;
                running.ingress.reattach(&mut dp, &mut running.ongoing);
                running.sync_ports(&netlink, &mut dp).await;
            }
            _ = probe.tick() => running.probe_nexthops(&netlink, &mut dp).await,
            _ = metrics_tick.tick() => {
                running.write_metrics(&mut metrics, options.metrics_file.as_deref(), &dp);
            }
            scrape = scrapes.next() => {
                // A client that went away has nobody to answer.
                let _ = scrape.send(running.render_metrics(&dp).map_err(|e| format!("{e:#}")));
            }
        }
    }
    running.write_metrics(&mut metrics, options.metrics_file.as_deref(), &dp);
    // A restarted or upgraded daemon takes over without a gap; `fabriclb
    // stop --detach` removes the program for good.
    info!(
        pins = %options.bpffs.display(),
        instance = options.instance,
        "exiting; the program stays attached with the last tables (fabriclb stop --detach removes it)"
    );
    Ok(())
}
