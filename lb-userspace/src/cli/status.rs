//! `fabriclb status`: what a running instance's maps hold and counted.

use std::path::PathBuf;

use anyhow::Context as _;
use fabriclb::{config, inspect};

use super::pins::PinArgs;

#[derive(clap::Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pins: PinArgs,
    /// The config the daemon runs, for the names of groups and next hops
    /// (without it they go by id).
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// JSON for scripts instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: StatusArgs) -> anyhow::Result<()> {
    let maps = inspect::maps::MapSet::from_pins(&args.pins.dir())?;
    let names = names(args.config.as_deref(), &maps)?;
    let status = inspect::status::Status::read(&maps, &names)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&status)?);
    } else {
        print!("{}", status.render(&names));
    }
    Ok(())
}

/// Names from the config at `path`, or none.
pub fn names(
    path: Option<&std::path::Path>,
    maps: &inspect::maps::MapSet,
) -> anyhow::Result<inspect::names::Names> {
    let Some(path) = path else {
        return Ok(inspect::names::Names::default());
    };
    let config = config::load(path).context("the config for names")?;
    // Groups learned from the kernel are named as the daemon names them.
    let config = fabriclb::daemon::with_kernel_routes(&config)
        .context("the kernel's routes, for the names of learned groups")?;
    Ok(inspect::names::Names::from_config(&config, maps)?)
}
