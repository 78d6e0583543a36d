//! `fabriclb watch --json` of a testbed daemon: what the scenarios report
//! of the leaf's flow events, and what the tests of `watch` read as they
//! come. Stop the daemon first: the watch then ends by itself with every
//! event read.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};

use super::Daemon;
use crate::daemon::flow_events::{WatchEvent, WatchLine};

/// How long [`EventWatch::stop`] waits for the watch to end.
const STOP_WAIT: Duration = Duration::from_secs(2);

/// A line the watch printed: an event, or the line itself when it is
/// none (a client told it lost some, or garbage).
pub type Watched = std::result::Result<WatchEvent, String>;

/// A watch running; [`Self::stop`] ends it and hands over its events.
pub struct EventWatch {
    child: Child,
    lines: mpsc::Receiver<Watched>,
    reader: Option<JoinHandle<()>>,
}

impl EventWatch {
    /// `fabriclb watch --json` of `daemon` with `args`, once it says it
    /// is watching (every event after that is seen), its lines read as
    /// they come.
    pub fn start(fabriclb: &Path, daemon: &Daemon, args: &[&str]) -> Result<Self> {
        let mut child = Command::new(fabriclb)
            .arg("watch")
            .args(&daemon.reload_args()[1..])
            .arg("--json")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting fabriclb watch")?;
        let stdout = child.stdout.take().context("watch's stdout")?;
        let mut said = String::new();
        let stderr = child.stderr.take().context("watch's stderr")?;
        BufReader::new(stderr).read_line(&mut said)?;
        ensure!(
            said.starts_with("watching "),
            "fabriclb watch did not start: {said}"
        );
        let (tx, lines) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout)
                .lines()
                .map_while(std::io::Result::ok)
            {
                let watched = match serde_json::from_str(&line) {
                    Ok(WatchLine::Event(event)) => Ok(*event),
                    _ => Err(line),
                };
                if tx.send(watched).is_err() {
                    return;
                }
            }
        });
        Ok(Self {
            child,
            lines,
            reader: Some(reader),
        })
    }

    /// The next line within `wait`; `None` if none came.
    pub fn next_within(&self, wait: Duration) -> Option<Watched> {
        self.lines.recv_timeout(wait).ok()
    }

    /// Every event the watch printed and nobody took, once it ended: by
    /// itself, after its daemon stopped (it prints what it had read
    /// first), or killed after [`STOP_WAIT`].
    pub fn stop(mut self) -> Vec<WatchEvent> {
        let deadline = Instant::now() + STOP_WAIT;
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.end();
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        self.lines.try_iter().filter_map(Result::ok).collect()
    }

    fn end(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for EventWatch {
    fn drop(&mut self) {
        self.end();
    }
}
