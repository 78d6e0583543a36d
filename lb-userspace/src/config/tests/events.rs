//! The `[events]` table.

use super::{err, ok, route_prefix};
use crate::config::{EventLog, Events};

/// A valid config with `[events]` holding `keys`, the table's first key
/// on line 10.
fn with_events(keys: &str) -> String {
    format!("{}[events]\n{keys}", route_prefix("10.0.0.0/8"))
}

#[test]
fn events_default_to_a_thousand_a_second_of_every_flow_unlogged() {
    assert_eq!(ok(&route_prefix("10.0.0.0/8")).events, Events::default());
    assert_eq!(
        Events::default(),
        Events {
            rate: 1000,
            sample: 1,
            log: EventLog::Off
        }
    );
    let events = ok(&with_events("rate = 0\nsample = 64\nlog = \"debug\"\n")).events;
    assert_eq!(
        events,
        Events {
            rate: 0,
            sample: 64,
            log: EventLog::Debug
        }
    );
}

#[test]
fn events_out_of_range_are_refused_where_they_are() {
    assert_eq!(
        err(&with_events("rate = 100001\n")),
        "configs/x.toml:10:8: events.rate 100001 is out of range 0..=100000 (events per \
         second per CPU; 0 sends none)"
    );
    assert_eq!(
        err(&with_events("sample = 0\n")),
        "configs/x.toml:10:10: events.sample 0 is out of range 1..=1048576 (one flow in that \
         many is reported)"
    );
    assert_eq!(
        err(&with_events("log = \"loud\"\n")),
        "configs/x.toml:10:7: unknown events.log level \"loud\" (valid levels: \"off\", \
         \"error\", \"warn\", \"info\", \"debug\")"
    );
    assert_eq!(
        err(&with_events("rates = 5\n")),
        "configs/x.toml:10:1: unknown field `rates`, expected one of `rate`, `sample`, `log`"
    );
}
