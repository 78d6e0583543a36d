//! Which bpffs an instance's pins go into, so that they outlive the
//! daemon: the point of pinning is that a killed or upgraded daemon leaves
//! forwarding running.
//!
//! A bpffs lives as long as a mount of it does, and a mount as long as its
//! mount namespace. `ip netns exec` runs the daemon in a mount namespace
//! of its own with a fresh `/sys`: a bpffs mounted at `/sys/fs/bpf` there
//! dies with the process, pins and program along, and the host's is out
//! of sight. So when the daemon runs in a mount namespace other than the
//! one it came from ([`Outside`]: PID 1's, or where that cannot be read,
//! its parent's), a bpffs counts as persistent only if that namespace has
//! it too; otherwise the pins go into the same path in that namespace,
//! reached through `/proc/PID/root` (a bpffs mounted there first if there
//! is none, as systemd does at boot), and where that cannot be done the
//! start is refused, naming the fix.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use tracing::info;

use super::PinningError;

/// The bpffs to pin `requested`'s instance into, mounted if need be: the
/// requested one when it persists, else the same path in the namespace
/// this process came from.
pub fn persistent(requested: &Path) -> Result<PathBuf, PinningError> {
    let requested = std::path::absolute(requested).map_err(io(requested))?;
    let Some(outside) = Outside::find() else {
        ensure_bpffs(&requested)?;
        return Ok(requested);
    };
    if is_bpffs(&requested)? && outside.has_mount_of(&requested) != Some(false) {
        return Ok(requested);
    }
    let there = outside.path(&requested);
    if !is_bpffs(&there).unwrap_or(false) {
        std::fs::create_dir_all(&there).map_err(io(&there))?;
        outside
            .mount_bpffs(&requested)
            .map_err(|cause| PinningError::Ephemeral {
                root: requested.display().to_string(),
                cause,
            })?;
        info!(root = %requested.display(), namespace = %outside.proc.display(), "mounted bpffs");
    }
    info!(
        pins = %there.display(),
        "this process runs in a mount namespace of its own (as under ip netns exec), \
         where a bpffs dies with it: pinning in the one it came from"
    );
    Ok(there)
}

/// Where the instance that [`persistent`] would place under `requested`
/// is, for reading: the requested bpffs, unless it is this process's own
/// and the namespace it came from has one at the same path.
pub fn visible(requested: &Path) -> PathBuf {
    let Ok(requested) = std::path::absolute(requested) else {
        return requested.to_path_buf();
    };
    let Some(outside) = Outside::find() else {
        return requested;
    };
    if is_bpffs(&requested).unwrap_or(false) && outside.has_mount_of(&requested) != Some(false) {
        return requested;
    }
    let there = outside.path(&requested);
    match is_bpffs(&there) {
        Ok(true) => there,
        _ => requested,
    }
}

/// The mount namespace this process came from, when it differs from its
/// own: PID 1's, or, where PID 1 cannot be looked into (a sandbox, a
/// process without CAP_SYS_PTRACE), the parent's, the shell or service
/// manager that ran `ip netns exec`.
struct Outside {
    /// `/proc/PID` of a process in it.
    proc: PathBuf,
}

impl Outside {
    fn find() -> Option<Self> {
        let own = namespace(Path::new("/proc/self"))?;
        let parent = nix::unistd::getppid();
        for proc in [
            PathBuf::from("/proc/1"),
            PathBuf::from(format!("/proc/{parent}")),
        ] {
            if let Some(theirs) = namespace(&proc) {
                return (theirs != own).then_some(Self { proc });
            }
        }
        None
    }

    /// `path` (absolute) as that namespace sees it.
    fn path(&self, path: &Path) -> PathBuf {
        self.proc
            .join("root")
            .join(path.strip_prefix("/").unwrap_or(path))
    }

    /// Whether the file system at `path` is mounted in that namespace too
    /// (by device number, in its `mountinfo`); `None` when that cannot be
    /// read.
    fn has_mount_of(&self, path: &Path) -> Option<bool> {
        let dev = std::fs::metadata(path).ok()?.dev();
        let mountinfo = std::fs::read_to_string(self.proc.join("mountinfo")).ok()?;
        let device = format!(
            "{}:{}",
            nix::sys::stat::major(dev),
            nix::sys::stat::minor(dev)
        );
        Some(mountinfo_has(&mountinfo, &device))
    }

    /// Mounts a bpffs at `path` in that namespace, from a child that
    /// enters it: a process with threads may not change its own.
    fn mount_bpffs(&self, path: &Path) -> nix::Result<()> {
        let namespace = std::fs::File::open(self.proc.join("ns/mnt"))
            .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
        let target = CString::new(path.as_os_str().as_bytes()).map_err(|_| Errno::EINVAL)?;
        // SAFETY: the child only makes system calls (setns, mount, _exit)
        // on values prepared before the fork: it allocates nothing and
        // takes no lock another thread may hold.
        match unsafe { nix::unistd::fork() }? {
            nix::unistd::ForkResult::Child => {
                let mounted = nix::sched::setns(&namespace, nix::sched::CloneFlags::CLONE_NEWNS)
                    .and_then(|()| {
                        nix::mount::mount(
                            Some(c"bpf"),
                            target.as_c_str(),
                            Some(c"bpf"),
                            nix::mount::MsFlags::empty(),
                            None::<&std::ffi::CStr>,
                        )
                    });
                // SAFETY: ends the child without running the parent's
                // destructors or atexit handlers.
                unsafe { libc::_exit(mounted.map_or_else(|e| e as i32, |()| 0)) }
            }
            nix::unistd::ForkResult::Parent { child } => {
                match nix::sys::wait::waitpid(child, None)? {
                    nix::sys::wait::WaitStatus::Exited(_, 0) => Ok(()),
                    nix::sys::wait::WaitStatus::Exited(_, code) => Err(Errno::from_raw(code)),
                    _ => Err(Errno::ECHILD),
                }
            }
        }
    }
}

/// The mount namespace of process `proc` (`/proc/PID`); `None` when it
/// cannot be looked into.
fn namespace(proc: &Path) -> Option<(u64, u64)> {
    let meta = std::fs::metadata(proc.join("ns/mnt")).ok()?;
    Some((meta.dev(), meta.ino()))
}

/// Mounts bpffs at `root` unless one is there.
pub fn ensure_bpffs(root: &Path) -> Result<(), PinningError> {
    std::fs::create_dir_all(root).map_err(io(root))?;
    if is_bpffs(root)? {
        return Ok(());
    }
    mount_bpffs(root).map_err(|cause| PinningError::NotBpffs {
        root: root.display().to_string(),
        cause,
    })?;
    info!(root = %root.display(), "mounted bpffs");
    Ok(())
}

/// `mount -t bpf bpf dir`: a bpffs of its own, whose pins go when it is
/// unmounted.
pub fn mount_bpffs(dir: &Path) -> nix::Result<()> {
    nix::mount::mount(
        Some("bpf"),
        dir,
        Some("bpf"),
        nix::mount::MsFlags::empty(),
        None::<&str>,
    )
}

fn is_bpffs(path: &Path) -> Result<bool, PinningError> {
    let fs = nix::sys::statfs::statfs(path).map_err(|e| PinningError::Io {
        path: path.display().to_string(),
        cause: e.into(),
    })?;
    Ok(fs.filesystem_type() == nix::sys::statfs::BPF_FS_MAGIC)
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> PinningError + '_ {
    move |cause| PinningError::Io {
        path: path.display().to_string(),
        cause,
    }
}

/// Whether `mountinfo` lists a mount of device `major:minor`.
fn mountinfo_has(mountinfo: &str, device: &str) -> bool {
    mountinfo
        .lines()
        .any(|line| line.split(' ').nth(2) == Some(device))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mount_is_found_by_its_device_number() {
        let mountinfo = "\
22 1 0:21 / /sys rw,nosuid - sysfs sysfs rw
40 22 0:35 / /sys/fs/bpf rw,nosuid - bpf bpf rw,mode=700
";
        assert!(mountinfo_has(mountinfo, "0:35"));
        assert!(!mountinfo_has(mountinfo, "0:3"));
        assert!(!mountinfo_has(mountinfo, "0:36"));
    }

    #[test]
    fn a_path_in_another_namespace_is_under_its_processs_root() {
        let outside = Outside {
            proc: PathBuf::from("/proc/1"),
        };
        assert_eq!(
            outside.path(Path::new("/sys/fs/bpf")),
            Path::new("/proc/1/root/sys/fs/bpf")
        );
    }
}
