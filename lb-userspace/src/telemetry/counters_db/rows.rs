//! The pure half of the source: which COUNTERS_DB rows belong to a port,
//! and what Redis's answers for them mean. No I/O, so the host tests
//! below cover every choice without a server.
//!
//! SONiC's layout (orchagent's portsorch writes the maps, syncd's flex
//! counter thread writes the `COUNTERS:<oid>` rows, all values decimal
//! strings in hashes):
//!
//! ```text
//! COUNTERS_PORT_NAME_MAP   Ethernet4      -> oid:0x1000000000002
//! COUNTERS_QUEUE_NAME_MAP  Ethernet4:3    -> oid:0x15000000000013
//! COUNTERS_QUEUE_TYPE_MAP  oid:0x15...13  -> SAI_QUEUE_TYPE_UNICAST
//! COUNTERS:oid:0x15...13   SAI_QUEUE_STAT_CURR_OCCUPANCY_BYTES -> "1500"
//! COUNTERS:oid:0x10...02   SAI_PORT_STAT_IF_OUT_OCTETS         -> "123456"
//! ```
//!
//! and in STATE_DB (portsorch; Mbit/s, absent until the port is up):
//!
//! ```text
//! PORT_TABLE|Ethernet4     speed -> "100000"
//! ```

use std::collections::HashMap;

use redis::Value;

use crate::config::BYTES_PER_SEC_PER_MBIT;
use crate::telemetry::Reading;

pub(super) const PORT_NAME_MAP: &str = "COUNTERS_PORT_NAME_MAP";
pub(super) const QUEUE_NAME_MAP: &str = "COUNTERS_QUEUE_NAME_MAP";
pub(super) const QUEUE_TYPE_MAP: &str = "COUNTERS_QUEUE_TYPE_MAP";
pub(super) const OCCUPANCY: &str = "SAI_QUEUE_STAT_CURR_OCCUPANCY_BYTES";
pub(super) const OUT_OCTETS: &str = "SAI_PORT_STAT_IF_OUT_OCTETS";
/// A port's operational speed in its STATE_DB row, Mbit/s.
pub(super) const SPEED: &str = "speed";

/// Queue types whose occupancy is unicast traffic toward the path.
/// `ALL` queues carry unicast too (platforms without a unicast/multicast
/// split list only those), so leaving them out would read such a port as
/// having no queues. Multicast and any other type (fabric, VoQ) do not
/// hold the traffic this load balancer sprays.
const COUNTED_TYPES: [&str; 2] = ["SAI_QUEUE_TYPE_UNICAST", "SAI_QUEUE_TYPE_ALL"];

/// The key of an object's counter row.
pub(super) fn counters_key(oid: &str) -> String {
    format!("COUNTERS:{oid}")
}

/// The key of a port's row in STATE_DB.
pub(super) fn port_state_key(port: &str) -> String {
    format!("PORT_TABLE|{port}")
}

/// What went wrong for one path, before it becomes a `TelemetryError`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Bad {
    /// `<key> <field>`, or the map and port that were looked up.
    pub what: String,
    pub why: String,
    /// The name maps may be stale: a row or an entry they point to is
    /// missing. Such a path asks for the maps to be read again.
    pub stale: bool,
}

/// The three name maps, as read from COUNTERS_DB.
#[derive(Debug, Default)]
pub(super) struct NameMaps {
    /// Port name -> port OID.
    pub ports: HashMap<String, String>,
    /// `<port>:<index>` -> queue OID.
    pub queues: HashMap<String, String>,
    /// Queue OID -> `SAI_QUEUE_TYPE_*`.
    pub types: HashMap<String, String>,
}

/// The rows one port reads: its own, and its counted queues' in index order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct PortRows {
    pub port_oid: String,
    pub queue_oids: Vec<String>,
}

/// A name map out of an `HGETALL` reply. A missing map reads as empty
/// (Redis answers an empty hash), which the per-port lookups then report.
pub(super) fn name_map(name: &str, reply: Value) -> Result<HashMap<String, String>, Bad> {
    if let Value::ServerError(err) = &reply {
        return Err(Bad {
            what: name.to_string(),
            why: err.to_string(),
            stale: true,
        });
    }
    redis::from_redis_value(reply).map_err(|err| Bad {
        what: name.to_string(),
        why: format!("not a hash of strings: {err}"),
        stale: true,
    })
}

/// Which rows `port` reads, or why the maps cannot say.
pub(super) fn port_rows(port: &str, maps: &NameMaps) -> Result<PortRows, Bad> {
    let port_oid = maps.ports.get(port).ok_or_else(|| Bad {
        what: format!("{PORT_NAME_MAP} {port}"),
        why: "no such port".into(),
        stale: true,
    })?;
    let queue_oids = counted_queues(port, &maps.queues, &maps.types);
    // No queue means nothing to sum; reading 0 would claim an empty queue.
    // SONiC writes the queue maps only once queue counters are enabled, so
    // they can appear after the port map.
    if queue_oids.is_empty() {
        return Err(Bad {
            what: format!("{QUEUE_NAME_MAP} {port}:*"),
            why: "no unicast queues listed".into(),
            stale: true,
        });
    }
    Ok(PortRows {
        port_oid: port_oid.clone(),
        queue_oids,
    })
}

/// The OIDs of `port`'s queues that count toward its queued bytes, by
/// queue index. A queue the type map does not list counts: missing type
/// information should not hide a queue's bytes.
pub(super) fn counted_queues(
    port: &str,
    queues: &HashMap<String, String>,
    types: &HashMap<String, String>,
) -> Vec<String> {
    let mut chosen: Vec<(u32, &String)> = queues
        .iter()
        .filter_map(|(name, oid)| {
            // `Ethernet4:3`; split at the last colon so the port name itself
            // is compared whole (`Ethernet4` must not match `Ethernet40:3`).
            let (owner, index) = name.rsplit_once(':')?;
            let index = index.parse::<u32>().ok().filter(|_| owner == port)?;
            let counted = types
                .get(oid)
                .is_none_or(|kind| COUNTED_TYPES.contains(&kind.as_str()));
            counted.then_some((index, oid))
        })
        .collect();
    chosen.sort_unstable();
    chosen.into_iter().map(|(_, oid)| oid.clone()).collect()
}

/// A counter value out of an `HGET` reply: `None` when the row or field
/// is missing.
pub(super) fn count(reply: &Value) -> Result<Option<u64>, String> {
    let text = match reply {
        Value::Nil => return Ok(None),
        Value::BulkString(bytes) => std::str::from_utf8(bytes)
            .map_err(|_| format!("not UTF-8: {}", String::from_utf8_lossy(bytes)))?,
        Value::SimpleString(text) => text.as_str(),
        Value::Int(n) => {
            return u64::try_from(*n)
                .map(Some)
                .map_err(|_| format!("negative count {n}"));
        }
        Value::ServerError(err) => return Err(err.to_string()),
        other => return Err(format!("unexpected reply {other:?}")),
    };
    // Only plain decimal digits: SONiC writes counters as unsigned decimal,
    // and u64's parser would also take a leading `+`.
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("not a decimal count: {text:?}"));
    }
    text.parse::<u64>()
        .map(Some)
        .map_err(|_| format!("count out of range: {text:?}"))
}

/// One path's reading out of the replies for port `port`'s rows:
/// `out_octets` for the port row, `occupancy` one per queue of `rows`, in
/// the same order, `speed` for its STATE_DB row (a missing or zero speed
/// is none known).
pub(super) fn reading(
    port: &str,
    rows: &PortRows,
    out_octets: &Value,
    occupancy: &[Value],
    speed: &Value,
) -> Result<Reading, Bad> {
    let garbage = |oid: &str, field: &str, why: String, stale: bool| Bad {
        what: format!("{} {field}", counters_key(oid)),
        why,
        stale,
    };
    let mut queued_bytes: u64 = 0;
    for (oid, reply) in rows.queue_oids.iter().zip(occupancy) {
        let bytes = count(reply)
            .map_err(|why| garbage(oid, OCCUPANCY, why, false))?
            // A missing queue row can mean the queue's OID changed (syncd
            // restarted and SONiC rewrote the maps): stale.
            .ok_or_else(|| garbage(oid, OCCUPANCY, "missing".into(), true))?;
        queued_bytes = queued_bytes
            .checked_add(bytes)
            .ok_or_else(|| garbage(oid, OCCUPANCY, "sum overflows u64".into(), false))?;
    }
    let tx_bytes =
        count(out_octets).map_err(|why| garbage(&rows.port_oid, OUT_OCTETS, why, false))?;
    let speed_mbit = count(speed).map_err(|why| Bad {
        what: format!("STATE_DB {} {SPEED}", port_state_key(port)),
        why,
        stale: false,
    })?;
    Ok(Reading {
        queued_bytes,
        tx_bytes,
        speed_bytes_per_s: (speed_mbit.filter(|&mbit| mbit > 0))
            .map(|mbit| mbit.saturating_mul(BYTES_PER_SEC_PER_MBIT)),
        read_at: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn counts_unicast_and_all_and_untyped_queues_in_index_order() {
        let queues = map(&[
            ("Ethernet4:10", "oid:q10"),
            ("Ethernet4:2", "oid:q2"),
            ("Ethernet4:0", "oid:q0"),
            ("Ethernet4:1", "oid:q1"),
            ("Ethernet4:3", "oid:q3"),
            ("Ethernet4:4", "oid:q4"),
        ]);
        let types = map(&[
            ("oid:q0", "SAI_QUEUE_TYPE_UNICAST"),
            ("oid:q1", "SAI_QUEUE_TYPE_MULTICAST"),
            ("oid:q2", "SAI_QUEUE_TYPE_ALL"),
            ("oid:q3", "SAI_QUEUE_TYPE_FABRIC_TX"),
            ("oid:q10", "SAI_QUEUE_TYPE_UNICAST"),
            // oid:q4 untyped: counted.
        ]);
        assert_eq!(
            counted_queues("Ethernet4", &queues, &types),
            ["oid:q0", "oid:q2", "oid:q4", "oid:q10"]
        );
    }

    #[test]
    fn a_port_name_is_compared_whole() {
        let queues = map(&[
            ("Ethernet4:0", "oid:a"),
            ("Ethernet40:0", "oid:b"),
            ("Ethernet4:x", "oid:c"),
            ("Ethernet4", "oid:d"),
            ("Ethernet4:", "oid:e"),
        ]);
        let none = HashMap::new();
        assert_eq!(counted_queues("Ethernet4", &queues, &none), ["oid:a"]);
        assert_eq!(counted_queues("Ethernet40", &queues, &none), ["oid:b"]);
        assert!(counted_queues("Ethernet", &queues, &none).is_empty());
    }

    #[test]
    fn port_rows_reports_the_missing_entry() {
        let maps = NameMaps {
            ports: map(&[("Ethernet0", "oid:p0"), ("Ethernet8", "oid:p8")]),
            queues: map(&[("Ethernet0:0", "oid:q0"), ("Ethernet8:0", "oid:m")]),
            types: map(&[("oid:m", "SAI_QUEUE_TYPE_MULTICAST")]),
        };
        assert_eq!(
            port_rows("Ethernet0", &maps),
            Ok(PortRows {
                port_oid: "oid:p0".into(),
                queue_oids: vec!["oid:q0".into()]
            })
        );
        let unknown = port_rows("Ethernet4", &maps).expect_err("unknown port");
        assert_eq!(unknown.what, "COUNTERS_PORT_NAME_MAP Ethernet4");
        assert!(unknown.stale);
        let no_queues = port_rows("Ethernet8", &maps).expect_err("only multicast");
        assert_eq!(no_queues.what, "COUNTERS_QUEUE_NAME_MAP Ethernet8:*");
        assert!(no_queues.stale);
    }

    #[test]
    fn counts_are_plain_decimal() {
        assert_eq!(count(&bulk("0")), Ok(Some(0)));
        assert_eq!(count(&bulk("18446744073709551615")), Ok(Some(u64::MAX)));
        assert_eq!(count(&Value::Int(7)), Ok(Some(7)));
        assert_eq!(count(&Value::Nil), Ok(None));
        for bad in [
            "",
            "abc",
            "-1",
            "+1",
            " 1",
            "1.5",
            "0x10",
            "18446744073709551616",
        ] {
            assert!(count(&bulk(bad)).is_err(), "{bad:?} accepted");
        }
        assert!(count(&Value::Int(-1)).is_err());
        assert!(count(&Value::Array(vec![])).is_err());
    }

    #[test]
    fn reading_sums_queues_and_takes_out_octets_and_speed() {
        let rows = PortRows {
            port_oid: "oid:p".into(),
            queue_oids: vec!["oid:a".into(), "oid:b".into()],
        };
        let read = |out: &Value, speed: &Value| {
            reading("Ethernet4", &rows, out, &[bulk("100"), bulk("23")], speed)
        };
        // A 400G port: 50 GB/s.
        assert_eq!(
            read(&bulk("900"), &bulk("400000")),
            Ok(Reading {
                queued_bytes: 123,
                tx_bytes: Some(900),
                speed_bytes_per_s: Some(50_000_000_000),
                read_at: None,
            })
        );
        // No port row or field, no speed (a port not up, or a switch that
        // does not write it): the queues still read.
        for speed in [Value::Nil, bulk("0")] {
            assert_eq!(
                read(&Value::Nil, &speed),
                Ok(Reading {
                    queued_bytes: 123,
                    tx_bytes: None,
                    speed_bytes_per_s: None,
                    read_at: None,
                })
            );
        }
    }

    #[test]
    fn reading_names_the_bad_row() {
        let rows = PortRows {
            port_oid: "oid:p".into(),
            queue_oids: vec!["oid:a".into(), "oid:b".into()],
        };
        let read = |out: &Value, occupancy: &[Value], speed: &Value| {
            reading("Ethernet4", &rows, out, occupancy, speed)
        };
        let nil = Value::Nil;
        let bad = read(&bulk("1"), &[bulk("1"), bulk("abc")], &nil).expect_err("abc");
        assert_eq!(
            bad.what,
            "COUNTERS:oid:b SAI_QUEUE_STAT_CURR_OCCUPANCY_BYTES"
        );
        assert_eq!(bad.why, "not a decimal count: \"abc\"");
        assert!(!bad.stale);
        let missing = read(&bulk("1"), &[Value::Nil, bulk("1")], &nil).expect_err("nil");
        assert_eq!(
            missing.what,
            "COUNTERS:oid:a SAI_QUEUE_STAT_CURR_OCCUPANCY_BYTES"
        );
        assert!(missing.stale);
        let tx = read(&bulk("x"), &[bulk("1"), bulk("1")], &nil).expect_err("x");
        assert_eq!(tx.what, "COUNTERS:oid:p SAI_PORT_STAT_IF_OUT_OCTETS");
        let sum = read(&bulk("1"), &[bulk("18446744073709551615"), bulk("1")], &nil)
            .expect_err("overflow");
        assert_eq!(sum.why, "sum overflows u64");
        let speed = read(&bulk("1"), &[bulk("1"), bulk("1")], &bulk("100G")).expect_err("100G");
        assert_eq!(speed.what, "STATE_DB PORT_TABLE|Ethernet4 speed");
        assert_eq!(speed.why, "not a decimal count: \"100G\"");
        assert!(!speed.stale);
    }

    #[test]
    fn name_map_reads_a_hash_reply() {
        let reply = Value::Array(vec![bulk("Ethernet0"), bulk("oid:0x1")]);
        assert_eq!(
            name_map(PORT_NAME_MAP, reply),
            Ok(map(&[("Ethernet0", "oid:0x1")]))
        );
        assert_eq!(
            name_map(PORT_NAME_MAP, Value::Array(vec![])),
            Ok(HashMap::new())
        );
        let bad = name_map(PORT_NAME_MAP, Value::Int(3)).expect_err("not a hash");
        assert_eq!(bad.what, PORT_NAME_MAP);
    }
}
