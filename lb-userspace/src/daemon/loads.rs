//! What became of the config's loads, for the metrics an operator alerts
//! on: whether the last attempt (the start's, or a reload's) took the
//! config, and since when the config in force has been.

use std::time::{SystemTime, UNIX_EPOCH};

pub(super) struct Loads {
    last_taken: bool,
    in_force_since: SystemTime,
}

impl Loads {
    /// The config the daemon started with, taken now.
    pub(super) fn started() -> Self {
        Self {
            last_taken: true,
            in_force_since: SystemTime::now(),
        }
    }

    /// A reload took its config (changed or not): it is the one in force.
    pub(super) fn taken(&mut self) {
        self.last_taken = true;
        self.in_force_since = SystemTime::now();
    }

    /// A reload was refused: the config before it stays in force.
    pub(super) fn refused(&mut self) {
        self.last_taken = false;
    }

    pub(super) fn last_taken(&self) -> bool {
        self.last_taken
    }

    /// When the config in force was taken, in seconds since the epoch.
    pub(super) fn in_force_since(&self) -> f64 {
        (self.in_force_since.duration_since(UNIX_EPOCH)).map_or(0.0, |d| d.as_secs_f64())
    }
}
