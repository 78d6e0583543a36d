//! Where the logs go: natively to journald when systemd connected stderr
//! to the journal (`JOURNAL_STREAM` names stderr's file), so each entry
//! carries its priority (`journalctl -p warning`) and every tracing field
//! as a field of its own; plain text on stderr elsewhere, in colour at a
//! terminal only. `RUST_LOG` filters both (default `info`).

use std::io::IsTerminal as _;
use std::os::unix::fs::MetadataExt as _;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

pub fn init() {
    let filter = || EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    if stderr_is_the_journal() {
        match tracing_journald::layer() {
            Ok(journal) => {
                tracing_subscriber::registry()
                    .with(filter())
                    .with(journal)
                    .init();
                return;
            }
            Err(e) => eprintln!("fabriclb: journald's socket: {e}; logging to stderr"),
        }
    }
    tracing_subscriber::fmt()
        .with_env_filter(filter())
        .with_writer(std::io::stderr)
        // Colours for a person at a terminal only: in a file or a pipe
        // they are escape codes in the way of grep.
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

/// Whether `JOURNAL_STREAM`'s `DEVICE:INODE` is stderr's: the variable
/// alone is inherited by whatever the service starts, whose stderr may
/// have been sent elsewhere.
fn stderr_is_the_journal() -> bool {
    let Some(stream) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Ok(stderr) = std::fs::metadata("/proc/self/fd/2") else {
        return false;
    };
    names_file(&stream.to_string_lossy(), stderr.dev(), stderr.ino())
}

fn names_file(stream: &str, dev: u64, ino: u64) -> bool {
    stream.split_once(':').is_some_and(|(d, i)| {
        d.parse::<u64>().is_ok_and(|d| d == dev) && i.parse::<u64>().is_ok_and(|i| i == ino)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_stream_names_a_device_and_an_inode() {
        assert!(names_file("64769:1234", 64769, 1234));
        assert!(!names_file("64769:1235", 64769, 1234));
        assert!(!names_file("64769", 64769, 1234));
        assert!(!names_file("x:1234", 64769, 1234));
    }
}
