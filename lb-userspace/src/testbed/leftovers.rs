//! What a testbed run leaves in the file system while it runs: scratch
//! directories, the logs of the servers it starts and the bpffs mounts
//! its daemons pin their programs and maps into. Each is held here while
//! it lives, so that a run stopped by SIGINT or SIGTERM removes it too
//! ([`remove_all`], from [`super::tear_down_on_signal`]): the signal ends
//! the process with `exit`, which runs no drop, and a bpffs left mounted
//! keeps what is pinned in it, programs and maps, in the kernel.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

static HELD: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn held() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    HELD.lock().unwrap_or_else(|e| e.into_inner())
}

/// Holds `path` (a directory, a file, or a bpffs mount point) until
/// [`remove`].
pub fn hold(path: &Path) {
    held().push(path.to_owned());
}

/// Unmounts `path` if something is mounted there, removes it, and lets it
/// go.
pub fn remove(path: &Path) {
    remove_path(path);
    held().retain(|p| p != path);
}

/// Removes everything held, the latest first (a bpffs mounted inside a
/// scratch directory goes before the directory).
pub fn remove_all() {
    let paths = std::mem::take(&mut *held());
    for path in paths.iter().rev() {
        remove_path(path);
    }
}

/// How often a directory's removal is tried, [`REMOVE_PAUSE`] apart.
const REMOVE_TRIES: u32 = 20;
const REMOVE_PAUSE: std::time::Duration = std::time::Duration::from_millis(10);

fn remove_path(path: &Path) {
    if !path.is_dir() {
        let _ = std::fs::remove_file(path);
        return;
    }
    // A run stopped by a signal removes its directories while its daemons
    // still run (the process's exit takes them down), and a daemon that
    // writes its metrics file (a temporary file, renamed) while
    // `remove_dir_all` walks the directory leaves it behind, not empty:
    // the scenario's scratch directory outlived a Ctrl-C once in a
    // fresh-clone run of the suite.
    for _ in 0..REMOVE_TRIES {
        // EINVAL where nothing is mounted: a plain directory.
        let _ = nix::mount::umount2(path, nix::mount::MntFlags::MNT_DETACH);
        if std::fs::remove_dir_all(path).is_ok() || !path.exists() {
            return;
        }
        std::thread::sleep(REMOVE_PAUSE);
    }
}
