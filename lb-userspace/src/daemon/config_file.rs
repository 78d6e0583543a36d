//! The config file as the daemon follows it: read only once it holds
//! still, watched for edits, and a file that goes away said once while the
//! running config stays.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use tracing::{info, warn};

use crate::config::{self, Config};

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

/// How long a changed file must hold still before it is reloaded.
pub(super) const SETTLE: Duration = Duration::from_millis(250);

/// The watched file: the version in force and a changed one waiting to
/// hold still. Keyed on the time each version was first seen, not on a
/// count of looks: after the loop stalls, missed ticks fire back to back,
/// and two looks microseconds apart would otherwise pass for a file that
/// held still, so a file written in place in pieces would be reloaded
/// half written.
#[derive(Debug)]
pub(super) struct ConfigWatch {
    in_force: Option<FileVersion>,
    settling: Option<(FileVersion, Instant)>,
    /// The file could not be read at the last look: said once.
    unreadable: bool,
}

impl ConfigWatch {
    /// Follows the file from `in_force`, the version its config was read from.
    pub(super) fn new(in_force: FileVersion) -> Self {
        Self {
            in_force: Some(in_force),
            settling: None,
            unreadable: false,
        }
    }

    /// The file was read (or refused) as `version`: it is not read again
    /// until it changes from that.
    pub(super) fn read_as(&mut self, version: Option<FileVersion>) {
        self.in_force = version;
        self.settling = None;
    }

    /// One look at the file at `path`: whether to reload it now (see
    /// [`Self::look`]). A file that cannot be read (deleted, a symlink
    /// loop) is said once and changes nothing; its return is said.
    pub(super) fn check(&mut self, path: &Path, at: Instant) -> bool {
        let seen = match FileVersion::of(path) {
            Ok(seen) => {
                if std::mem::take(&mut self.unreadable) {
                    info!(file = %path.display(), "config file readable again");
                }
                Some(seen)
            }
            Err(e) => {
                if !std::mem::replace(&mut self.unreadable, true) {
                    warn!(
                        file = %path.display(),
                        "config file unreadable ({e}); the running config stays until it is back"
                    );
                }
                None
            }
        };
        self.look(seen, at)
    }

    /// One look at the file, as `seen` at `at`: whether to reload it now,
    /// because it differs from the version in force and has held still
    /// for [`SETTLE`] since it was first seen so.
    fn look(&mut self, seen: Option<FileVersion>, at: Instant) -> bool {
        let Some(seen) = seen.filter(|&seen| Some(seen) != self.in_force) else {
            self.settling = None;
            return false;
        };
        match self.settling {
            Some((settling, since)) if settling == seen => at.duration_since(since) >= SETTLE,
            _ => {
                self.settling = Some((seen, at));
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(len: u64) -> FileVersion {
        FileVersion {
            modified: std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(len),
            len,
            inode: 7,
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_changed_file_is_reloaded_once_it_held_still_for_the_settle_time() {
        let t0 = Instant::now();
        let mut watch = ConfigWatch::new(version(1));
        assert!(!watch.look(Some(version(1)), t0), "the version in force");
        assert!(!watch.look(Some(version(2)), t0 + ms(250)));
        assert!(!watch.look(Some(version(2)), t0 + ms(499)));
        assert!(watch.look(Some(version(2)), t0 + ms(500)));
        watch.read_as(Some(version(2)));
        assert!(!watch.look(Some(version(2)), t0 + ms(750)));
    }

    /// The loop stalls while an editor writes the file in place in
    /// pieces; the missed ticks then fire microseconds apart. Counting
    /// looks, the second would reload the first piece.
    #[test]
    fn looks_bunched_after_a_stall_do_not_pass_for_a_file_that_held_still() {
        let t0 = Instant::now();
        let mut watch = ConfigWatch::new(version(1));
        let first_piece = Some(version(2));
        let whole = Some(version(3));
        for tick in 0..4 {
            let at = t0 + ms(600) + Duration::from_micros(tick);
            assert!(!watch.look(first_piece, at), "tick {tick} after the stall");
        }
        // The rest is written before the settle time is up: it starts again.
        assert!(!watch.look(whole, t0 + ms(800)));
        assert!(!watch.look(whole, t0 + ms(800) + Duration::from_micros(1)));
        assert!(!watch.look(whole, t0 + ms(1049)));
        assert!(watch.look(whole, t0 + ms(1050)));
    }

    #[test]
    fn an_unreadable_file_forgets_a_version_that_was_settling() {
        let t0 = Instant::now();
        let mut watch = ConfigWatch::new(version(1));
        assert!(!watch.look(Some(version(2)), t0));
        assert!(!watch.look(None, t0 + ms(100)));
        assert!(!watch.look(Some(version(2)), t0 + ms(300)), "seen anew");
        assert!(watch.look(Some(version(2)), t0 + ms(550)));
        // A refused file is not read again until it changes.
        watch.read_as(Some(version(2)));
        assert!(!watch.look(Some(version(2)), t0 + ms(2000)));
    }
}
