//! The thread that reads SONiC's rows and follows them: subscribed to
//! CONFIG_DB's and APPL_DB's keyspace notifications for the keys it reads
//! (SONiC runs Redis with `notify-keyspace-events AKE`), on a connection of
//! its own, reading everything again at each; a Redis without them is
//! said once and re-read every [`REREAD`]. A lost Redis is said once per
//! outage, retried with backoff, and read whole once back.

use std::collections::BTreeMap;
use std::thread;
use std::time::Duration;

use redis::{Connection, IntoConnectionInfo, RedisConnectionInfo, RedisResult};
use tokio::sync::watch;
use tracing::{info, warn};

use super::rows::{self, Row, Rows};
use super::{APPL_DB, CONFIG_DB};
use crate::telemetry::counters_db::Address;

/// Re-reads when the server sends no keyspace notifications.
pub const REREAD: Duration = Duration::from_secs(10);
/// Reconnection backoff, doubling from the first to the last.
const BACKOFF: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(5));
/// A connect, or a command's reply, that takes longer fails.
const TIMEOUT: Duration = Duration::from_secs(2);

/// What the notifications are subscribed by: every key fabriclb reads.
fn patterns() -> Vec<String> {
    let mut patterns = vec![
        format!("__keyspace@{CONFIG_DB}__:{}", rows::SWITCH_HASH),
        format!("__keyspace@{APPL_DB}__:{}", rows::SWITCH_TABLE),
    ];
    for table in rows::ARS_TABLES {
        patterns.push(format!("__keyspace@{CONFIG_DB}__:{table}|*"));
    }
    patterns
}

/// Whether `notify-keyspace-events` flags send a keyspace notification
/// for every change fabriclb follows: `K` with hash (`h`) and generic
/// (`g`, `DEL`) events, which `A` includes.
pub fn notifications_on(flags: &str) -> bool {
    flags.contains('K') && (flags.contains('A') || (flags.contains('h') && flags.contains('g')))
}

/// The rows as the thread last read them, to the daemon.
pub struct Follower {
    rows: watch::Receiver<Option<Rows>>,
}

impl Follower {
    pub fn start(address: Address) -> std::io::Result<Self> {
        let (tx, rows) = watch::channel(None);
        thread::Builder::new()
            .name("sonic-follow".into())
            .spawn(move || {
                Follow {
                    address,
                    tx,
                    outage: false,
                    said_off: false,
                }
                .run()
            })?;
        Ok(Self { rows })
    }

    /// The next rows that differ from the last taken.
    pub async fn next(&mut self) -> Rows {
        loop {
            if self.rows.changed().await.is_err() {
                // The thread never ends while the daemon runs.
                std::future::pending::<()>().await;
            }
            if let Some(rows) = self.rows.borrow_and_update().clone() {
                return rows;
            }
        }
    }
}

struct Follow {
    address: Address,
    tx: watch::Sender<Option<Rows>>,
    /// An outage was said and not yet its end.
    outage: bool,
    /// Notifications being off was said.
    said_off: bool,
}

impl Follow {
    fn run(mut self) {
        let mut backoff = BACKOFF.0;
        while !self.tx.is_closed() {
            let Err(e) = self.session(&mut backoff);
            if !self.outage {
                warn!(
                    address = %self.address,
                    "sonic: Redis lost ({e}); SONiC's settings in force stay, retrying"
                );
                self.outage = true;
            }
            thread::sleep(backoff);
            backoff = (backoff * 2).min(BACKOFF.1);
        }
    }

    /// Connects, reads everything, then follows; returns only on failure.
    fn session(&mut self, backoff: &mut Duration) -> RedisResult<std::convert::Infallible> {
        let mut config = connect(&self.address, CONFIG_DB)?;
        let mut appl = connect(&self.address, APPL_DB)?;
        *backoff = BACKOFF.0;
        if std::mem::take(&mut self.outage) {
            info!(address = %self.address, "sonic: Redis back; reading SONiC's settings again");
        }
        loop {
            if notifications_on(&flags(&mut config)) {
                break;
            }
            if !std::mem::replace(&mut self.said_off, true) {
                warn!(
                    address = %self.address,
                    "sonic: Redis sends no keyspace notifications (notify-keyspace-events lacks \
                     K and A, or K, g and h; SONiC's is AKE), so changes are re-read every {}s",
                    REREAD.as_secs()
                );
            }
            self.send(read(&mut config, &mut appl)?);
            thread::sleep(REREAD);
        }
        if std::mem::take(&mut self.said_off) {
            info!(address = %self.address, "sonic: keyspace notifications on; following them");
        }
        let mut subscribed = connect(&self.address, CONFIG_DB)?;
        subscribed.set_read_timeout(None)?;
        let mut pubsub = subscribed.as_pubsub();
        // Subscribed before the read: no change slips between the two.
        pubsub.psubscribe(patterns())?;
        self.send(read(&mut config, &mut appl)?);
        loop {
            pubsub.get_message()?;
            self.send(read(&mut config, &mut appl)?);
        }
    }

    fn send(&self, rows: Rows) {
        self.tx.send_if_modified(|last| {
            let changed = last.as_ref() != Some(&rows);
            if changed {
                *last = Some(rows);
            }
            changed
        });
    }
}

fn connect(address: &Address, db: i64) -> RedisResult<Connection> {
    let info = address
        .connection_addr()
        .into_connection_info()?
        .set_redis_settings(RedisConnectionInfo::default().set_db(db));
    let connection = redis::Client::open(info)?.get_connection_with_timeout(TIMEOUT)?;
    connection.set_read_timeout(Some(TIMEOUT))?;
    connection.set_write_timeout(Some(TIMEOUT))?;
    Ok(connection)
}

/// The server's `notify-keyspace-events`; none where `CONFIG` is refused
/// (a server that renamed it).
fn flags(connection: &mut Connection) -> String {
    redis::cmd("CONFIG")
        .arg("GET")
        .arg("notify-keyspace-events")
        .query::<Vec<String>>(connection)
        .ok()
        .and_then(|reply| reply.into_iter().nth(1))
        .unwrap_or_default()
}

/// Every row fabriclb reads. CONFIG_DB's ARS tables are found with `KEYS
/// TABLE|*`: they hold a handful of rows, and are read only when one of
/// them changes.
pub fn read(config: &mut Connection, appl: &mut Connection) -> RedisResult<Rows> {
    let mut keys = vec![rows::SWITCH_HASH.to_owned()];
    for table in rows::ARS_TABLES {
        let found: Vec<String> = redis::cmd("KEYS").arg(format!("{table}|*")).query(config)?;
        keys.extend(found);
    }
    let mut rows = Rows::default();
    for key in keys {
        if let Some(row) = hash(config, &key)? {
            rows.config.insert(key, row);
        }
    }
    if let Some(row) = hash(appl, rows::SWITCH_TABLE)? {
        rows.appl.insert(rows::SWITCH_TABLE.to_owned(), row);
    }
    Ok(rows)
}

/// `key`'s fields; `None` when it does not exist.
fn hash(connection: &mut Connection, key: &str) -> RedisResult<Option<Row>> {
    match redis::cmd("HGETALL")
        .arg(key)
        .query::<BTreeMap<String, String>>(connection)
    {
        Ok(fields) if fields.is_empty() => Ok(None),
        Ok(fields) => Ok(Some(Ok(fields))),
        Err(e) if e.code() == Some("WRONGTYPE") => {
            Ok(Some(Err("not a hash; SONiC keeps every row as one".into())))
        }
        Err(e) => Err(e),
    }
}
