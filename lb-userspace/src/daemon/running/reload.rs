//! Live reload: a new config is validated, then written into the maps in
//! place, entry by entry, without detaching; an invalid one changes nothing.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use tracing::{error, info, warn};

use super::Running;
use crate::config::{self, Config};
use crate::daemon::config_file::{self, FileVersion};
use crate::daemon::control::Answer;
use crate::daemon::flow_events::{DRAIN_ENDED, WatchEvent};
use crate::daemon::links::Snapshot;
use crate::daemon::local;
use crate::dataplane::Dataplane;
use crate::dataplane::tables::Tables;
use crate::netlink::Netlink;

/// Says each override that takes no effect in `after` and did in
/// `before` (or each, at start), and each that takes effect again.
pub(super) fn report_override_skips(before: Option<&Tables>, after: &Tables) {
    for (name, why) in &after.override_skips {
        let said =
            before.is_some_and(|b| b.override_skips.iter().any(|(n, w)| n == name && w == why));
        if !said {
            warn!(override_name = name, "override takes no effect: {why}");
        }
    }
    for (name, _) in before.map_or(&[][..], |b| &b.override_skips[..]) {
        if !after.override_skips.iter().any(|(n, _)| n == name) {
            info!(override_name = name, "override takes effect again");
        }
    }
}

impl Running {
    /// One look at the watched config file: a version that differs from
    /// the one in force is reloaded once it held still (see
    /// [`ConfigWatch`]).
    pub(super) async fn watch_config(
        &mut self,
        path: &Path,
        netlink: &Netlink,
        dp: &mut Dataplane,
    ) {
        if self.watch.check(path, std::time::Instant::now()) {
            info!("{} changed: reloading", path.display());
            let _ = self.reload(path, netlink, dp).await;
        }
    }

    /// Reads the config again and, if it is valid, moves the data plane to
    /// it without detaching: maps are rewritten in place, entry by entry.
    /// An invalid config changes nothing; the answer says why, and so does
    /// the log. The service manager sees the reload begin and end.
    pub(super) async fn reload(
        &mut self,
        path: &Path,
        netlink: &Netlink,
        dp: &mut Dataplane,
    ) -> Answer {
        self.manager.reloading();
        let answer = match self.reload_from(path, netlink, dp).await {
            Ok(0) => Ok(format!("{} unchanged", path.display())),
            Ok(changes) => Ok(format!("{} reloaded: {changes} changes", path.display())),
            Err(e) => {
                error!("new config refused, the running one stays: {e:#}");
                Err(format!("{e:#}"))
            }
        };
        match &answer {
            Ok(_) => self.loads.taken(),
            Err(_) => self.loads.refused(),
        }
        let status = match &answer {
            Ok(_) => self.in_force(path),
            Err(why) => format!("reload refused, the running config stays: {why}"),
        };
        self.manager.ready(&status);
        answer
    }

    async fn reload_from(
        &mut self,
        path: &Path,
        netlink: &Netlink,
        dp: &mut Dataplane,
    ) -> Result<usize> {
        let config = match config_file::load(path).await {
            Ok((config, version)) => {
                self.watch.read_as(Some(version));
                config
            }
            Err(e) => {
                // Also a file that cannot be read: not read again until
                // it changes.
                self.watch.read_as(FileVersion::of(path).ok());
                return Err(e);
            }
        };
        let config = match &mut self.sonic {
            Some(sonic) => sonic.over(config),
            None => config,
        };
        self.apply(config, netlink, dp).await
    }

    /// The service manager's STATUS while `path`'s config is in force.
    pub(super) fn in_force(&self, path: &Path) -> String {
        format!(
            "forwarding: {} in force, {} groups, {} routes ({} learned)",
            path.display(),
            self.config.groups.len(),
            self.config.routes.len(),
            self.config.routes.len() - self.file.routes.len()
        )
    }

    /// Moves the data plane to `file` (the config file's, with SONiC's
    /// settings over it under `--sonic`).
    pub(super) async fn apply(
        &mut self,
        file: Config,
        netlink: &Netlink,
        dp: &mut Dataplane,
    ) -> Result<usize> {
        let changes = config::changes(&self.file, &file);
        if changes.is_empty() {
            info!("config unchanged");
            return Ok(0);
        }
        let old = &self.file.switch;
        if file.switch.flowlet_table_size != old.flowlet_table_size {
            warn!(
                "switch.flowlet_table_size {} -> {} takes effect at the next start; \
                 the table keeps its size until then",
                old.flowlet_table_size, file.switch.flowlet_table_size
            );
        }
        crate::daemon::sonic::needs_sonic(&file, self.sonic.is_some())?;
        // The routes learned from the kernel and SONiC stay, under the new
        // file's groups.
        let learned = self.kernel.follow(&file, netlink).await?;
        let config = self.effective(&file);
        let snapshot = Snapshot::take(netlink, &config, &mut self.ongoing).await?;
        snapshot.solicit_unconfirmed(&config, &mut self.ongoing);
        let view = std::mem::replace(&mut self.links.view, snapshot);
        let tables = match self.switch_tables(&config, dp, &learned.splits) {
            Ok(tables) => tables,
            Err(e) => {
                self.links.view = view;
                return Err(e);
            }
        };
        if let Err(e) = self.ingress.move_to(dp, &config.switch, &mut self.ongoing) {
            if let Err(undo) = self.tables.write(dp, Some(&tables)) {
                error!("restoring the running tables after a failed reload: {undo}");
            }
            self.links.view = view;
            return Err(e);
        }
        let old_tables = std::mem::replace(&mut self.tables, tables);
        local::report_shadowed(Some(&old_tables), &self.tables);
        for change in &changes {
            info!("config change: {change}");
        }
        self.config = config;
        self.file = file;
        self.sync_ports(netlink, dp).await;
        self.telemetry_follow(dp);
        self.flow_events.configure(dp, &self.config.events);
        info!(changes = changes.len(), "config reloaded");
        Ok(changes.len())
    }

    /// Builds `config`'s tables against the running ones, resolving next
    /// hops against the links as last heard (each new group of `splits`
    /// starting from the buckets of the group it split off), and writes
    /// what differs. On a failed write the running tables are put back in
    /// the maps: the old tables, diffed against the new ones, touch
    /// exactly the entries written so far.
    pub(super) fn switch_tables(
        &mut self,
        config: &Config,
        dp: &mut Dataplane,
        splits: &[(String, String)],
    ) -> Result<Tables> {
        let view = &self.links.view;
        let mut tables = Tables::build(config, Some(&self.tables), |spec| view.resolve(spec))?;
        for (name, from) in splits {
            let weights = config.groups.iter().find(|g| g.name == *name);
            let weights = weights.map_or(&[][..], |g| &g.weights);
            tables.inherit(&self.tables, name, from, weights);
        }
        if let Err(e) = tables.write(dp, Some(&self.tables)) {
            if let Err(undo) = self.tables.write(dp, Some(&tables)) {
                error!("restoring the running tables after a failed write: {undo}");
            }
            return Err(e).context("programming the maps");
        }
        report_override_skips(Some(&self.tables), &tables);
        Ok(tables)
    }

    /// Flips the ECMP groups whose changed overrides waited a gap for
    /// flowlet state to them, then ends the drains that are due (of groups
    /// switched to ECMP or flipped): from then on they hash every packet,
    /// flowlet state unread. A failed write is said once and retried.
    pub(super) fn end_drains(&mut self, dp: &mut Dataplane) {
        match self.tables.flip_pins(dp, Instant::now()) {
            Ok(flipped) => {
                self.ongoing.ended("flipping overrides");
                for group in flipped {
                    info!(
                        group,
                        "overrides in the maps: flows move onto and off pins at their flowlets"
                    );
                }
            }
            Err(e) => self.ongoing.started("flipping overrides".into(), || {
                error!("flipping a group to its changed overrides: {e}; retrying");
            }),
        }
        match self.tables.end_drains(dp, Instant::now()) {
            Ok(ended) => {
                self.ongoing.ended("ending a drain");
                for group in ended {
                    info!(group, "drained: flows left their flowlets for ecmp");
                    self.flow_events
                        .publish(WatchEvent::of_group(DRAIN_ENDED, "ecmp", group));
                }
            }
            Err(e) => self.ongoing.started("ending a drain".into(), || {
                error!("ending a group's drain to ecmp: {e}; retrying");
            }),
        }
    }
}
