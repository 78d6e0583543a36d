//! Where a running instance's maps and links are pinned, so that another
//! `fabriclb` process (a restarted daemon, `status`, `explain`, `stop`)
//! finds them: `<bpffs>/fabriclb/<instance>/<MAP_NAME>` for each map of
//! `lb_common::abi`, `<bpffs>/fabriclb/<instance>/link-<interface>` for the
//! program's link on each ingress interface.

use std::path::{Path, PathBuf};

/// Where bpffs is mounted on a stock system.
pub const DEFAULT_BPFFS: &str = "/sys/fs/bpf";
/// The instance name when one box runs one fabriclb.
pub const DEFAULT_INSTANCE: &str = "default";

/// One instance's pin directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PinDir(PathBuf);

impl PinDir {
    pub fn new(bpffs: &Path, instance: &str) -> Self {
        Self(bpffs.join("fabriclb").join(instance))
    }

    pub fn dir(&self) -> &Path {
        &self.0
    }

    /// The pin of map `name` (an `lb_common::abi` map name).
    pub fn map(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// The pin of the program's link on `interface`.
    pub fn link(&self, interface: &str) -> PathBuf {
        self.0.join(format!("link-{interface}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_sit_under_the_instance() {
        let pins = PinDir::new(Path::new("/sys/fs/bpf"), "leaf1");
        assert_eq!(pins.dir(), Path::new("/sys/fs/bpf/fabriclb/leaf1"));
        assert_eq!(
            pins.map("FL_ROUTES_V4"),
            Path::new("/sys/fs/bpf/fabriclb/leaf1/FL_ROUTES_V4")
        );
        assert_eq!(
            pins.link("h1"),
            Path::new("/sys/fs/bpf/fabriclb/leaf1/link-h1")
        );
    }
}
