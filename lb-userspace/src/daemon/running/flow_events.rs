//! The data plane's flow events, named by the tables in force and the
//! paths' telemetry, into the flow-events concern.

use lb_common::abi::events::FlowEvent;

use super::Running;
use crate::daemon::flow_events::{describe, wall_clock_offset};

impl Running {
    pub(super) fn flow_events(&mut self, events: &[FlowEvent]) {
        let offset = wall_clock_offset();
        let paths = &self.telemetry.paths;
        let band = |index| paths.get(&index).map(|p| p.quality.band);
        for raw in events {
            if let Some(event) = describe(raw, &self.tables, band, offset) {
                self.flow_events.publish(event);
            }
        }
    }
}
