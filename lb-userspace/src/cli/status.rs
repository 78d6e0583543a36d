//! `fabriclb status`: what a running instance's maps hold and counted.

use fabriclb::inspect;

use super::names::NameArgs;
use super::pins::PinArgs;

#[derive(clap::Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pins: PinArgs,
    #[command(flatten)]
    names: NameArgs,
    /// JSON for scripts instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: StatusArgs) -> anyhow::Result<()> {
    let maps = inspect::maps::MapSet::from_pins(&args.pins.dir())?;
    let names = args.names.names(&maps)?;
    let status = inspect::status::Status::read(&maps, &names)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&status)?);
    } else {
        print!("{}", status.render(&names));
    }
    Ok(())
}
