//! The config file as the daemon follows it: read only once it holds
//! still, watched for edits, and a file that goes away said once while the
//! running config stays.

use std::path::Path;
use std::time::Duration;

use anyhow::{Result, bail};
use tracing::{info, warn};

use super::state::Running;
use crate::config::{self, Config};
use crate::dataplane::Dataplane;
use crate::netlink::Netlink;

/// A file's modification time, size and inode: enough to notice an edit,
/// also one saved by renaming a new file over the old.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct FileVersion {
    modified: std::time::SystemTime,
    len: u64,
    inode: u64,
}

impl FileVersion {
    pub(super) fn of(path: &Path) -> std::io::Result<Self> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path)?;
        Ok(Self {
            modified: meta.modified()?,
            len: meta.len(),
            inode: meta.ino(),
        })
    }
}

/// Reads of a file that changed while it was read, before giving up.
const READ_TRIES: u32 = 5;
/// The pause between such reads: a writer in the middle of a file is
/// given time to finish it.
const READ_RETRY: Duration = Duration::from_millis(50);

/// Reads and validates the config at `path` and logs its warnings, only from a read the file did
/// not change under: a file being written in place is otherwise read half
/// written, and a valid prefix of it (a route table cut short) applied.
pub(super) async fn load(path: &Path) -> Result<(Config, FileVersion)> {
    for _ in 0..READ_TRIES {
        let before = FileVersion::of(path);
        let text = config::read(path)?;
        match (before, FileVersion::of(path)) {
            (Ok(before), Ok(after)) if before == after => {
                let config = config::parse(&text, path)?;
                for warning in &config.warnings {
                    warn!("{warning}");
                }
                return Ok((config, after));
            }
            _ => tokio::time::sleep(READ_RETRY).await,
        }
    }
    bail!(
        "{}: the file kept changing while it was read ({READ_TRIES} tries); \
         write a new file and rename it over the old",
        path.display()
    )
}

/// The key under which an unreadable config file is said once.
const UNREADABLE: &str = "config file unreadable";

impl Running {
    /// One look at the watched config file: a version that differs from
    /// the one in force is reloaded once it stayed the same for a whole
    /// tick, so that a file written in place in several writes is taken
    /// whole. A file that cannot be read (deleted, a symlink loop) is said
    /// once and changes nothing; its return is said and reloaded.
    pub(super) async fn watch_config(
        &mut self,
        path: &Path,
        netlink: &Netlink,
        dp: &mut Dataplane,
    ) {
        let now = match FileVersion::of(path) {
            Ok(now) => now,
            Err(e) => {
                self.ongoing.started(UNREADABLE.into(), || {
                    warn!(
                        file = %path.display(),
                        "config file unreadable ({e}); the running config stays until it is back"
                    )
                });
                self.settling = None;
                return;
            }
        };
        if self.ongoing.ended_now(UNREADABLE) {
            info!(file = %path.display(), "config file readable again");
        }
        if Some(now) == self.version {
            self.settling = None;
            return;
        }
        if self.settling != Some(now) {
            self.settling = Some(now);
            return;
        }
        self.settling = None;
        info!("{} changed: reloading", path.display());
        self.reload(path, netlink, dp).await;
    }
}
