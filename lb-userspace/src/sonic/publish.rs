//! The thread that writes the next hops' counters to COUNTERS_DB, so SONiC's
//! tooling (`redis-cli -n 2`, its counter pollers) reads them where it reads
//! a port's. The daemon offers a snapshot at each metrics tick; one the
//! thread is still busy with is dropped, never queued.

use std::collections::BTreeSet;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use redis::{Connection, RedisResult};
use tracing::{info, warn};

use super::COUNTERS_DB;
use crate::telemetry::counters_db::Address;

/// The name map: each next hop's name -> its counters' key after
/// `COUNTERS:`, as `COUNTERS_PORT_NAME_MAP` maps a port to `oid:0x...`.
pub const NAME_MAP: &str = "COUNTERS_FABRICLB_NEXTHOP_NAME_MAP";
/// A next hop's counters are at `COUNTERS:` + this + its name.
pub const PREFIX: &str = "fabriclb:";

/// One next hop's counters, as published.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NextHopCounters {
    /// `<group>|<interface>|<address>`, `|vlan|<id>` after a tagged one.
    pub name: String,
    pub packets: u64,
    pub bytes: u64,
    pub sprayed_packets: u64,
    /// The data plane's path quality (1024 default, higher is better).
    pub quality: u32,
    /// Its telemetry band (0..7), when its group has a source.
    pub quality_band: Option<u32>,
    pub usable: bool,
}

impl NextHopCounters {
    /// The name of next hop `label` (`eth4 10.0.4.1`) of `group`.
    pub fn name(group: &str, label: &str) -> String {
        format!("{group}|{}", label.replace(' ', "|"))
    }

    /// Its hash in COUNTERS_DB.
    pub fn key(name: &str) -> String {
        format!("COUNTERS:{PREFIX}{name}")
    }

    fn fields(&self) -> Vec<(&'static str, String)> {
        let mut fields = vec![
            ("packets", self.packets.to_string()),
            ("bytes", self.bytes.to_string()),
            ("sprayed_packets", self.sprayed_packets.to_string()),
            ("quality", self.quality.to_string()),
            ("usable", u8::from(self.usable).to_string()),
        ];
        if let Some(band) = self.quality_band {
            fields.push(("quality_band", band.to_string()));
        }
        fields
    }
}

/// Hands snapshots to the writing thread.
pub struct Publisher {
    tx: mpsc::SyncSender<Vec<NextHopCounters>>,
}

/// A write that takes longer fails (and is retried with the next snapshot).
const TIMEOUT: Duration = Duration::from_secs(2);

impl Publisher {
    pub fn start(address: Address) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::sync_channel(1);
        thread::Builder::new()
            .name("sonic-publish".into())
            .spawn(move || publish(&address, &rx))?;
        Ok(Self { tx })
    }

    /// Publishes `counters` unless the last snapshot is still being written.
    pub fn offer(&self, counters: Vec<NextHopCounters>) {
        // Full: the thread is behind, and the next tick brings newer ones.
        let _ = self.tx.try_send(counters);
    }
}

fn publish(address: &Address, rx: &mpsc::Receiver<Vec<NextHopCounters>>) {
    let mut session: Option<(Connection, BTreeSet<String>)> = None;
    let mut outage = false;
    for counters in rx {
        let result = (|| {
            let (connection, published) = match &mut session {
                Some(session) => session,
                None => session.insert(connect(address)?),
            };
            write(connection, &counters, published)
        })();
        match result {
            Ok(()) if std::mem::take(&mut outage) => {
                info!(%address, "sonic: publishing counters to COUNTERS_DB again");
            }
            Ok(()) => {}
            Err(e) => {
                session = None;
                if !std::mem::replace(&mut outage, true) {
                    warn!(%address, "sonic: cannot publish counters to COUNTERS_DB ({e}); retrying at each tick");
                }
            }
        }
    }
}

/// A connection, and the names a daemon before this one left in the map:
/// their keys go at the first write unless they are current.
fn connect(address: &Address) -> RedisResult<(Connection, BTreeSet<String>)> {
    use redis::{IntoConnectionInfo, RedisConnectionInfo};
    let info = address
        .connection_addr()
        .into_connection_info()?
        .set_redis_settings(RedisConnectionInfo::default().set_db(COUNTERS_DB));
    let mut connection = redis::Client::open(info)?.get_connection_with_timeout(TIMEOUT)?;
    connection.set_read_timeout(Some(TIMEOUT))?;
    connection.set_write_timeout(Some(TIMEOUT))?;
    let names: Vec<String> = redis::cmd("HKEYS").arg(NAME_MAP).query(&mut connection)?;
    Ok((connection, names.into_iter().collect()))
}

/// Every current next hop's hash and the name map rewritten in one
/// transaction, so a reader never sees half; the keys of next hops gone
/// deleted.
fn write(
    connection: &mut Connection,
    counters: &[NextHopCounters],
    published: &mut BTreeSet<String>,
) -> RedisResult<()> {
    let mut pipe = redis::pipe();
    pipe.atomic();
    pipe.cmd("DEL").arg(NAME_MAP).ignore();
    let mut current = BTreeSet::new();
    for c in counters {
        let key = NextHopCounters::key(&c.name);
        pipe.cmd("DEL").arg(&key).ignore();
        pipe.cmd("HSET").arg(&key).arg(c.fields()).ignore();
        pipe.cmd("HSET")
            .arg(NAME_MAP)
            .arg(&c.name)
            .arg(format!("{PREFIX}{}", c.name))
            .ignore();
        current.insert(c.name.clone());
    }
    for gone in published.difference(&current) {
        pipe.cmd("DEL").arg(NextHopCounters::key(gone)).ignore();
    }
    pipe.query::<()>(connection)?;
    *published = current;
    Ok(())
}
