//! The `[events]` table.

use crate::config::diagnostics::{ConfigError, Ctx};
use crate::config::raw::RawEvents;
use crate::config::schema::{EVENT_RATE_MAX, EVENT_SAMPLE_MAX, EventLog, Events};

impl Ctx<'_> {
    pub(super) fn events(&self, raw: Option<RawEvents>) -> Result<Events, ConfigError> {
        let defaults = Events::default();
        let Some(raw) = raw else {
            return Ok(defaults);
        };
        let rate = raw.rate.map_or(Ok(defaults.rate), |n| {
            self.in_range(
                &n,
                0..=EVENT_RATE_MAX,
                "events.rate",
                " (events per second per CPU; 0 sends none)",
            )
        })?;
        let sample = raw.sample.map_or(Ok(defaults.sample), |n| {
            self.in_range(
                &n,
                1..=EVENT_SAMPLE_MAX,
                "events.sample",
                " (one flow in that many is reported)",
            )
        })?;
        let log = self.lookup_or_default(
            raw.log,
            &EventLog::NAMES,
            "unknown events.log level",
            "valid levels",
        )?;
        Ok(Events { rate, sample, log })
    }
}
