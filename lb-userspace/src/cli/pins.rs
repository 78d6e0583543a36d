//! Where an instance's pins are: shared by every subcommand that finds a
//! running instance (`run`, `status`, `explain`, `stop`).

use std::path::PathBuf;

use fabriclb::dataplane::pins::{DEFAULT_BPFFS, DEFAULT_INSTANCE, PinDir};

#[derive(clap::Args)]
pub struct PinArgs {
    /// Where bpffs is mounted.
    #[arg(long, default_value = DEFAULT_BPFFS)]
    pub bpffs: PathBuf,
    /// The instance's name, when one box runs several.
    #[arg(long, default_value = DEFAULT_INSTANCE)]
    pub instance: String,
}

impl PinArgs {
    pub fn dir(&self) -> PinDir {
        PinDir::new(&self.bpffs, &self.instance)
    }
}
