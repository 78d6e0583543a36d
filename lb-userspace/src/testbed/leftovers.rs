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

fn remove_path(path: &Path) {
    if !path.is_dir() {
        let _ = std::fs::remove_file(path);
        return;
    }
    // EINVAL where nothing is mounted: a plain directory.
    let _ = nix::mount::umount2(path, nix::mount::MntFlags::MNT_DETACH);
    let _ = std::fs::remove_dir_all(path);
}
