//! Where `status` and `explain` take the names of groups and next hops
//! from: the daemon's config, and with `--sonic` SONiC's rows it lays over
//! the config and learns routes from.

use std::path::PathBuf;

use anyhow::Context as _;
use fabriclb::telemetry::counters_db::Address;
use fabriclb::{config, inspect};

#[derive(clap::Args)]
pub struct NameArgs {
    /// The config the daemon runs, for the names of groups and next hops
    /// (without it they go by id).
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// The Redis the daemon runs `--sonic` with: its rows are laid over
    /// the config (and its APPL_DB routes learned) as the daemon does.
    #[arg(long, requires = "config")]
    sonic: Option<Address>,
}

impl NameArgs {
    /// Whether a config was given.
    pub fn has_config(&self) -> bool {
        self.config.is_some()
    }

    /// The config file as written, if one was given.
    pub fn file_config(&self) -> anyhow::Result<Option<config::Config>> {
        let Some(path) = &self.config else {
            return Ok(None);
        };
        config::load(path).context("the config").map(Some)
    }

    /// Names from the config, or none.
    pub fn names(
        &self,
        maps: &dyn inspect::view::MapView,
    ) -> anyhow::Result<inspect::names::Names> {
        let Some(config) = self.file_config()? else {
            return Ok(inspect::names::Names::default());
        };
        // Learned groups are named as the daemon names them.
        let config = fabriclb::daemon::effective_config(&config, self.sonic.as_ref())
            .context("the learned routes, for the names of learned groups")?;
        Ok(inspect::names::Names::from_config(&config, maps)?)
    }
}
