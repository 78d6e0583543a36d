//! The counters out: the metrics tick's textfile and SONiC's COUNTERS_DB,
//! and each scrape of the HTTP endpoint, named by the tables in force.

use std::path::Path;

use anyhow::Result;

use super::Running;
use crate::daemon::metrics_file::{MetricsTick, Sources, render_metrics};
use crate::dataplane::Dataplane;

impl Running {
    fn metrics_sources(&self) -> Sources<'_> {
        Sources {
            tables: &self.tables,
            telemetry: &self.telemetry,
            loads: &self.loads,
            flow_events: self.flow_events.counts(),
        }
    }

    /// One metrics tick: the textfile at `file`, if any, and the counters
    /// offered to SONiC.
    pub(super) fn write_metrics(
        &self,
        tick: &mut MetricsTick,
        file: Option<&Path>,
        dp: &Dataplane,
    ) {
        tick.run(file, dp, self.metrics_sources(), |samples| {
            self.sonic_publish(samples)
        });
    }

    /// The exposition for one scrape.
    pub(super) fn render_metrics(&self, dp: &Dataplane) -> Result<String> {
        render_metrics(dp, self.metrics_sources())
    }
}
