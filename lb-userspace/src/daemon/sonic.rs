//! `run --sonic`: SONiC's settings laid over the config file and applied
//! the way an edited file is (validated, built against the old ids,
//! written as diffs, rolled back on failure, logged with its changes);
//! APPL_DB's routes handed to the groups that follow them
//! (`super::kernel_routes`); the next hops' counters published to
//! COUNTERS_DB at the metrics tick.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tracing::warn;

use super::kernel_routes::with_learned_routes;
use crate::config::Config;
use crate::metrics::NextHopSample;
use crate::sonic::{
    ApplRoutes, Follower, NextHopCounters, Overlay, OverrideRows, Publisher, Refusal, Rows,
};
use crate::telemetry::counters_db::Address;

/// How long the start waits for SONiC's rows before it programs the file's
/// config alone (a Redis down at boot does not hold forwarding back).
const FIRST_READ: Duration = Duration::from_secs(2);

pub(super) struct Sonic {
    follower: Follower,
    publisher: Publisher,
    overlay: Overlay,
    /// A controller's overrides, laid after the file's.
    overrides: OverrideRows,
    /// The config file's, which the overlay lies over.
    base: Config,
    /// APPL_DB's route and override rows refused, as last read.
    row_refusals: Vec<Refusal>,
    /// What is refused now, each said once while it lasts.
    refused: BTreeSet<Refusal>,
    /// What is refused of the learned groups' ARS objects now, alike.
    refused_learned: BTreeSet<Refusal>,
}

impl Sonic {
    /// Starts following SONiC's Redis at `address`: the config to start
    /// on is `base` with what it holds over it; APPL_DB's routes as read.
    pub(super) async fn start(
        address: &Address,
        base: Config,
    ) -> Result<(Self, Config, ApplRoutes)> {
        let mut follower = Follower::start(address.clone()).context("starting the SONiC thread")?;
        let publisher = Publisher::start(address.clone()).context("starting the SONiC thread")?;
        let rows = match tokio::time::timeout(FIRST_READ, follower.next()).await {
            Ok(rows) => rows,
            Err(_) => {
                warn!(
                    %address,
                    "sonic: nothing read within {FIRST_READ:?}; starting on the config file \
                     alone, SONiC's settings and routes apply once read"
                );
                Rows::default()
            }
        };
        let mut sonic = Self {
            follower,
            publisher,
            overlay: Overlay::default(),
            overrides: OverrideRows::default(),
            base: base.clone(),
            row_refusals: Vec::new(),
            refused: BTreeSet::new(),
            refused_learned: BTreeSet::new(),
        };
        let routes = sonic.take(&rows);
        let config = sonic.over(base);
        Ok((sonic, config, routes))
    }

    /// Takes newly read `rows`: their settings become the overlay and
    /// their overrides are kept to lay over the file's, their refused
    /// route and override rows are kept to be said; their routes are
    /// returned.
    pub(super) fn take(&mut self, rows: &Rows) -> ApplRoutes {
        let mut routes = ApplRoutes::from_rows(rows);
        self.overlay = Overlay::from_rows(rows);
        self.overrides = OverrideRows::from_rows(rows);
        self.row_refusals = std::mem::take(&mut routes.refusals);
        self.row_refusals
            .extend(self.overrides.refusals.iter().cloned());
        routes
    }

    /// The config file's `base` with SONiC's settings and the controller's
    /// overrides over it; what they cannot set is said once.
    pub(super) fn over(&mut self, base: Config) -> Config {
        let (mut config, mut refusals) = self.overlay.apply(&base);
        refusals.extend(self.overrides.apply(&mut config));
        self.base = base;
        let now = self
            .overlay
            .refusals
            .iter()
            .chain(&self.row_refusals)
            .cloned()
            .chain(refusals)
            .collect();
        say_new(now, &mut self.refused);
        config
    }

    /// `config`, the effective one (the learned groups in place of the
    /// groups that learn them), with SONiC's settings laid over again: a
    /// learned group takes the ARS object its learned next hops lead to,
    /// as SONiC gives one to a next-hop group. The file's groups come out
    /// as [`Self::over`] made them.
    /// The config file's config with SONiC's rows over it.
    pub(super) fn overlaid(&mut self) -> Config {
        self.over(self.base.clone())
    }

    /// Offers the next hops' counters for COUNTERS_DB.
    pub(super) fn publish(&self, samples: &[NextHopSample<'_>]) {
        self.publisher.offer(
            samples
                .iter()
                .map(|s| NextHopCounters {
                    name: NextHopCounters::name(s.group, &s.spec.to_string()),
                    packets: s.stats.packets,
                    bytes: s.stats.bytes,
                    sprayed_packets: s.stats.sprayed,
                    quality: s.quality,
                    quality_band: s.path.as_ref().map(|p| p.band),
                    usable: s.usable,
                })
                .collect(),
        );
    }

    pub(super) fn over_learned(&mut self, config: Config) -> Config {
        let (config, refusals) = self.overlay.apply(&config);
        let now = refusals
            .into_iter()
            .filter(|r| !self.refused.contains(r))
            .collect();
        say_new(now, &mut self.refused_learned);
        config
    }
}

/// Says each refusal of `now` that `said` lacks, then keeps `now` as said:
/// each is said once while it lasts.
fn say_new(now: BTreeSet<Refusal>, said: &mut BTreeSet<Refusal>) {
    for refusal in now.difference(said) {
        warn!("sonic: ignored {refusal}");
    }
    *said = now;
}

/// `config`, the effective one, with SONiC's settings laid over its
/// learned groups under `--sonic` ([`Sonic::over_learned`]).
pub(super) fn over_learned(sonic: &mut Option<Sonic>, config: Config) -> Config {
    match sonic {
        Some(sonic) => sonic.over_learned(config),
        None => config,
    }
}

/// The config a daemon starting now on `file` builds its tables from:
/// with `sonic`, SONiC's rows read once and laid over it as `run --sonic`
/// lays them; the learned groups in place. For the names `status` and
/// `explain` give.
pub fn effective_config(file: &Config, sonic: Option<&Address>) -> Result<Config> {
    let Some(address) = sonic else {
        return with_learned_routes(file, ApplRoutes::default());
    };
    let rows = crate::sonic::follow::read_once(address)
        .with_context(|| format!("reading SONiC's rows from {address}"))?;
    let overlay = Overlay::from_rows(&rows);
    let (mut base, _) = overlay.apply(file);
    OverrideRows::from_rows(&rows).apply(&mut base);
    let learned = with_learned_routes(&base, ApplRoutes::from_rows(&rows))?;
    Ok(overlay.apply(&learned).0)
}

/// A group that follows APPL_DB's routes needs `--sonic` to read them.
pub(super) fn needs_sonic(config: &Config, sonic: bool) -> Result<()> {
    match config.groups.iter().find(|g| g.sonic_routes.is_some()) {
        Some(group) if !sonic => bail!(
            "group {:?} follows SONiC's routes (sonic_routes), which only `fabriclb run \
             --sonic <Redis>` reads",
            group.name
        ),
        _ => Ok(()),
    }
}

/// The next rows read, never with no `--sonic`.
pub(super) async fn next(sonic: &mut Option<Sonic>) -> Rows {
    match sonic {
        Some(sonic) => sonic.follower.next().await,
        None => std::future::pending().await,
    }
}
