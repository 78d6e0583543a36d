//! `run --sonic`: SONiC's settings laid over the config file and applied
//! the way an edited file is (validated, built against the old ids,
//! written as diffs, rolled back on failure, logged with its changes); the
//! next hops' counters published to COUNTERS_DB at the metrics tick.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context, Result};
use tracing::{error, info, warn};

use super::metrics_file::nexthop_samples;
use super::state::Running;
use crate::config::Config;
use crate::dataplane::Dataplane;
use crate::netlink::Netlink;
use crate::sonic::{Follower, NextHopCounters, Overlay, Publisher, Refusal, Rows};
use crate::telemetry::counters_db::Address;

/// How long the start waits for SONiC's rows before it programs the file's
/// config alone (a Redis down at boot does not hold forwarding back).
const FIRST_READ: Duration = Duration::from_secs(2);

pub(super) struct Sonic {
    follower: Follower,
    publisher: Publisher,
    overlay: Overlay,
    /// The config file's, which the overlay lies over.
    base: Config,
    /// What is refused now, each said once while it lasts.
    refused: BTreeSet<Refusal>,
}

impl Sonic {
    /// Starts following SONiC's Redis at `address`: the config to start
    /// on is `base` with what it holds over it.
    pub(super) async fn start(address: &Address, base: Config) -> Result<(Self, Config)> {
        let mut follower = Follower::start(address.clone()).context("starting the SONiC thread")?;
        let publisher = Publisher::start(address.clone()).context("starting the SONiC thread")?;
        let overlay = match tokio::time::timeout(FIRST_READ, follower.next()).await {
            Ok(rows) => Overlay::from_rows(&rows),
            Err(_) => {
                warn!(
                    %address,
                    "sonic: nothing read within {FIRST_READ:?}; starting on the config file \
                     alone, SONiC's settings apply once read"
                );
                Overlay::default()
            }
        };
        let mut sonic = Self {
            follower,
            publisher,
            overlay,
            base: base.clone(),
            refused: BTreeSet::new(),
        };
        let config = sonic.over(base);
        Ok((sonic, config))
    }

    /// The config file's `base` with SONiC's settings over it; what they
    /// cannot set is said once.
    pub(super) fn over(&mut self, base: Config) -> Config {
        let (config, refusals) = self.overlay.apply(&base);
        self.base = base;
        let now: BTreeSet<Refusal> = self
            .overlay
            .refusals
            .iter()
            .cloned()
            .chain(refusals)
            .collect();
        for refusal in now.difference(&self.refused) {
            warn!("sonic: ignored {refusal}");
        }
        self.refused = now;
        config
    }
}

/// The next rows read, never with no `--sonic`.
pub(super) async fn next(sonic: &mut Option<Sonic>) -> Rows {
    match sonic {
        Some(sonic) => sonic.follower.next().await,
        None => std::future::pending().await,
    }
}

impl Running {
    /// SONiC's rows changed: the file's config with them over it is
    /// applied as a reload.
    pub(super) async fn sonic_rows(&mut self, rows: Rows, netlink: &Netlink, dp: &mut Dataplane) {
        let Some(sonic) = &mut self.sonic else {
            return;
        };
        sonic.overlay = Overlay::from_rows(&rows);
        let config = sonic.over(sonic.base.clone());
        info!("sonic: SONiC's settings changed: reloading");
        if let Err(e) = self.apply(config, netlink, dp).await {
            error!("SONiC's settings refused, the running config stays: {e:#}");
        }
    }

    /// Offers the next hops' counters for COUNTERS_DB.
    pub(super) fn sonic_publish(&self, dp: &Dataplane) {
        let Some(sonic) = &self.sonic else {
            return;
        };
        match nexthop_samples(dp, self) {
            Ok(samples) => sonic.publisher.offer(
                samples
                    .into_iter()
                    .map(|s| NextHopCounters {
                        name: NextHopCounters::name(s.group, &s.label),
                        packets: s.stats.packets,
                        bytes: s.stats.bytes,
                        sprayed_packets: s.stats.sprayed,
                        quality: s.quality,
                        quality_band: s.path.map(|p| p.band),
                        usable: s.usable,
                    })
                    .collect(),
            ),
            Err(e) => warn!("sonic: reading the counters to publish: {e:#}"),
        }
    }
}
