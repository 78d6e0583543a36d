//! What fabriclb reads of SONiC's Redis at one moment, and the names it
//! reads them by (sonic-swss-common's `schema.h`, the YANG models).

use std::collections::BTreeMap;

/// CONFIG_DB's `SWITCH_HASH|GLOBAL` (`sonic-hash.yang`).
pub const SWITCH_HASH: &str = "SWITCH_HASH|GLOBAL";
/// APPL_DB's switch row, where swss's `switch.json` puts the seed.
pub const SWITCH_TABLE: &str = "SWITCH_TABLE:switch";
/// CONFIG_DB's ARS tables (`sonic-ars.yang`), each `TABLE|key`.
pub const ARS_PROFILE: &str = "ARS_PROFILE";
pub const ARS_OBJECT: &str = "ARS_OBJECT";
pub const ARS_INTERFACE: &str = "ARS_INTERFACE";
pub const ARS_NEXTHOP: &str = "ARS_NEXTHOP";
/// APPL_DB's routes and next-hop groups (`schema.h`'s
/// `APP_ROUTE_TABLE_NAME`, `APP_NEXTHOP_GROUP_TABLE_NAME`), with their
/// separator: `ROUTE_TABLE:<prefix>`.
pub const ROUTE_TABLE: &str = "ROUTE_TABLE:";
pub const NEXTHOP_GROUP_TABLE: &str = "NEXTHOP_GROUP_TABLE:";
/// fabriclb's own APPL_DB table, which a traffic-engineering controller
/// writes: `FABRICLB_OVERRIDE_TABLE:<name>` (`super::overrides`).
pub const OVERRIDE_TABLE: &str = "FABRICLB_OVERRIDE_TABLE:";
/// The APPL_DB tables that can hold many rows: found with `SCAN`, read a
/// batch per round trip, followed row by row.
pub const ROW_TABLES: [&str; 3] = [ROUTE_TABLE, NEXTHOP_GROUP_TABLE, OVERRIDE_TABLE];
/// The tables read whole, by `KEYS <table>|*`.
pub const ARS_TABLES: [&str; 4] = [ARS_PROFILE, ARS_OBJECT, ARS_INTERFACE, ARS_NEXTHOP];

/// One key's fields, or why it could not be read as a hash (a key of
/// another type).
pub type Row = Result<BTreeMap<String, String>, String>;

/// The keys fabriclb reads, by database; a key absent from Redis is absent
/// here.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rows {
    /// CONFIG_DB: `SWITCH_HASH|GLOBAL` and every `ARS_*|...`.
    pub config: BTreeMap<String, Row>,
    /// APPL_DB: `SWITCH_TABLE:switch`, every row of the [`ROW_TABLES`].
    pub appl: BTreeMap<String, Row>,
}

impl Rows {
    /// The rows of CONFIG_DB `table`, by the key after `table|`.
    pub fn table<'a>(&'a self, table: &'a str) -> impl Iterator<Item = (&'a str, &'a Row)> + 'a {
        self.config.iter().filter_map(move |(key, row)| {
            key.strip_prefix(table)
                .and_then(|rest| rest.strip_prefix('|'))
                .map(|name| (name, row))
        })
    }
}

#[cfg(test)]
impl Rows {
    /// Rows with APPL_DB's `entries` (key, fields), for tests.
    pub(crate) fn appl_of(entries: &[(&str, &[(&str, &str)])]) -> Self {
        let mut rows = Self::default();
        for (key, fields) in entries {
            let fields = fields
                .iter()
                .map(|(f, v)| (f.to_string(), v.to_string()))
                .collect();
            rows.appl.insert(key.to_string(), Ok(fields));
        }
        rows
    }
}
