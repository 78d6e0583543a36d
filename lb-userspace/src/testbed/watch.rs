//! `fabriclb watch --json` of a testbed daemon for the length of a run:
//! what the scenarios report of the leaf's flow events. Stop the daemon
//! first: the watch then ends by itself with every event read.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};

use super::Daemon;
use crate::daemon::flow_events::{WatchEvent, WatchLine};

/// How long [`EventWatch::stop`] waits for the watch to end.
const STOP_WAIT: Duration = Duration::from_secs(2);

/// A watch running; [`Self::stop`] ends it and hands over its events.
pub struct EventWatch {
    child: Child,
    reader: Option<JoinHandle<Vec<WatchEvent>>>,
}

impl EventWatch {
    /// `fabriclb watch --json` of `daemon`, once it says it is watching
    /// (every event after that is seen), its lines read as they come.
    pub fn start(fabriclb: &Path, daemon: &Daemon) -> Result<Self> {
        let mut child = Command::new(fabriclb)
            .arg("watch")
            .args(&daemon.reload_args()[1..])
            .arg("--json")
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
        let reader = std::thread::spawn(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(std::io::Result::ok)
                .filter_map(|line| match serde_json::from_str(&line) {
                    Ok(WatchLine::Event(event)) => Some(*event),
                    _ => None,
                })
                .collect()
        });
        Ok(Self {
            child,
            reader: Some(reader),
        })
    }

    /// Every event the watch printed, once it ended: by itself, after
    /// its daemon stopped (it prints what it had read first), or killed
    /// after [`STOP_WAIT`].
    pub fn stop(mut self) -> Vec<WatchEvent> {
        let deadline = Instant::now() + STOP_WAIT;
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.end();
        (self.reader.take())
            .and_then(|reader| reader.join().ok())
            .unwrap_or_default()
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
