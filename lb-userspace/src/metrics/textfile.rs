//! The snapshot written for node_exporter's textfile collector: whole or
//! not at all, never through a planted symlink.

use std::path::Path;

/// Writes `text` to `path` through a temporary file and a rename, so a
/// reader never sees half a snapshot.
///
/// The directory is often writable by others (node_exporter's textfile
/// directory): a fixed temporary name there could be a planted symlink,
/// and the daemon, as root, would write through it. So the temporary file
/// gets a name nobody can guess, and is created new, never opened if
/// anything (a symlink included) already has that name.
pub fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};

    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    const ATTEMPTS: u32 = 16;
    for attempt in 0..ATTEMPTS {
        let tmp = dir.join(format!(
            ".{name}.{}.{attempt}.{:x}.tmp",
            std::process::id(),
            unguessable()
        ));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp);
        let mut file = match file {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        };
        // Readable by the exporter whatever the daemon's umask.
        let written = file
            .set_permissions(std::fs::Permissions::from_mode(0o644))
            .and_then(|()| file.write_all(text.as_bytes()))
            .and_then(|()| std::fs::rename(&tmp, path));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        return written;
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        format!(
            "{ATTEMPTS} temporary names beside {} were all taken",
            path.display()
        ),
    ))
}

/// 64 bits an attacker cannot predict: the kernel's random bytes, or the
/// clock's nanoseconds should those be unavailable.
fn unguessable() -> u64 {
    let mut bytes = [0u8; 8];
    // SAFETY: the kernel writes at most `bytes.len()` bytes into `bytes`.
    let got = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    match got {
        8 => u64::from_ne_bytes(bytes),
        _ => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
    }
}
