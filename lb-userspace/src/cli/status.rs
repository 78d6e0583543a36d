//! `fabriclb status`: what a running instance's maps hold and counted.

use fabriclb::dataplane::holder;
use fabriclb::inspect;
use fabriclb::inspect::interfaces::Interfaces;

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
    let pins = args.pins.dir();
    let maps = inspect::maps::MapSet::from_pins(&pins)?;
    let names =
        (args.names.names(&maps)?).with_interfaces(Interfaces::of_process(holder(pins.dir())));
    let status = inspect::status::Status::read(&maps, &names)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&status)?);
    } else {
        print!("{}", status.render(&names));
    }
    Ok(())
}
