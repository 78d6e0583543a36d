//! Where an instance is pinned, as `run`, `status`, `explain` and `stop`
//! take it.

use std::path::PathBuf;

use fabriclb::dataplane::pins::{DEFAULT_BPFFS, DEFAULT_INSTANCE, PinDir};

#[derive(clap::Args, Clone, Debug)]
pub struct PinArgs {
    /// Where bpffs is mounted; `run` mounts one there if it is not. In a
    /// private mount namespace (`ip netns exec`), the same path in PID 1's.
    #[arg(long, default_value = DEFAULT_BPFFS)]
    pub bpffs: PathBuf,
    /// The instance's name: its maps and links are pinned under
    /// BPFFS/fabriclb/INSTANCE.
    #[arg(long, default_value = DEFAULT_INSTANCE)]
    pub instance: String,
}

impl PinArgs {
    pub fn dir(&self) -> PinDir {
        PinDir::new(
            &fabriclb::dataplane::bpffs::visible(&self.bpffs),
            &self.instance,
        )
    }
}
