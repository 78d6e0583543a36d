//! The thread that reads SONiC's rows and follows them: subscribed to
//! CONFIG_DB's and APPL_DB's keyspace notifications for the keys it reads
//! (SONiC runs Redis with `notify-keyspace-events AKE`), on a connection of
//! its own. Notifications are gathered into bursts (a BGP session going
//! down rewrites one route row per prefix), ended by [`QUIET`] without
//! one or [`MAX_WAIT`] after the first; a burst re-reads the route and
//! override rows it names, and everything else whole if it names any
//! other key. A Redis
//! without notifications is said once and re-read every [`REREAD`]. A
//! lost Redis is said once per outage, retried with backoff, and read
//! whole once back.

use std::collections::{BTreeMap, BTreeSet};
use std::thread;
use std::time::{Duration, Instant};

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
/// A burst of notifications ends after this long without one...
const QUIET: Duration = Duration::from_millis(2);
/// ...or this long after its first: the bound on a change's wait.
const MAX_WAIT: Duration = Duration::from_millis(10);
/// Route rows read per round trip.
const BATCH: usize = 1_000;

/// What the notifications are subscribed by: every key fabriclb reads.
fn patterns() -> Vec<String> {
    let mut patterns = vec![
        format!("__keyspace@{CONFIG_DB}__:{}", rows::SWITCH_HASH),
        format!("__keyspace@{APPL_DB}__:{}", rows::SWITCH_TABLE),
    ];
    for table in rows::ARS_TABLES {
        patterns.push(format!("__keyspace@{CONFIG_DB}__:{table}|*"));
    }
    for table in rows::ROW_TABLES {
        patterns.push(format!("__keyspace@{APPL_DB}__:{table}*"));
    }
    patterns
}

/// The APPL_DB row of the [`rows::ROW_TABLES`] a notification's channel
/// names, if any.
fn row_key(channel: &str) -> Option<&str> {
    let key = channel.strip_prefix(&format!("__keyspace@{APPL_DB}__:"))?;
    rows::ROW_TABLES
        .iter()
        .any(|table| key.starts_with(table))
        .then_some(key)
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
        let mut current = read(&mut config, &mut appl)?;
        self.send(current.clone());
        loop {
            let first = pubsub.get_message()?;
            let started = Instant::now();
            let mut named = BTreeSet::new();
            let mut others = false;
            let mut note = |channel: &str| match row_key(channel) {
                Some(key) => {
                    named.insert(key.to_owned());
                }
                None => others = true,
            };
            note(first.get_channel_name());
            loop {
                let left = MAX_WAIT.saturating_sub(started.elapsed());
                if left.is_zero() {
                    break;
                }
                pubsub.set_read_timeout(Some(QUIET.min(left)))?;
                match pubsub.get_message() {
                    Ok(message) => note(message.get_channel_name()),
                    Err(e) if e.is_timeout() => break,
                    Err(e) => return Err(e),
                }
            }
            pubsub.set_read_timeout(None)?;
            if others {
                let whole = read_settings(&mut config, &mut appl)?;
                current.config = whole.config;
                current.appl.retain(|key, _| row_key_of(key));
                current.appl.extend(whole.appl);
            }
            let keys: Vec<String> = named.into_iter().collect();
            for (key, row) in keys.iter().zip(hashes(&mut appl, &keys)?) {
                match row {
                    Some(row) => current.appl.insert(key.clone(), row),
                    None => current.appl.remove(key),
                };
            }
            self.send(current.clone());
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

/// Every row fabriclb reads, once, on connections of its own.
pub fn read_once(address: &Address) -> RedisResult<Rows> {
    read(
        &mut connect(address, CONFIG_DB)?,
        &mut connect(address, APPL_DB)?,
    )
}

/// Whether an APPL_DB key is a row of the [`rows::ROW_TABLES`].
fn row_key_of(key: &str) -> bool {
    rows::ROW_TABLES.iter().any(|table| key.starts_with(table))
}

/// Every row fabriclb reads. APPL_DB's [`rows::ROW_TABLES`], which hold a
/// fabric's routes and a controller's overrides, are found with `SCAN`
/// (it does not hold the server up as `KEYS` would) and read a batch per
/// round trip.
pub fn read(config: &mut Connection, appl: &mut Connection) -> RedisResult<Rows> {
    let mut rows = read_settings(config, appl)?;
    for table in rows::ROW_TABLES {
        let keys: Vec<String> = {
            let iter = redis::cmd("SCAN")
                .cursor_arg(0)
                .arg("MATCH")
                .arg(format!("{table}*"))
                .arg("COUNT")
                .arg(BATCH)
                .clone()
                .iter::<String>(appl)?;
            iter.collect::<RedisResult<Vec<String>>>()?
        };
        let read = hashes(appl, &keys)?;
        for (key, row) in keys.into_iter().zip(read) {
            if let Some(row) = row {
                rows.appl.insert(key, row);
            }
        }
    }
    Ok(rows)
}

/// `keys`' rows, in order (`None` for one gone), a batch per round trip.
fn hashes(connection: &mut Connection, keys: &[String]) -> RedisResult<Vec<Option<Row>>> {
    let mut rows = Vec::with_capacity(keys.len());
    for batch in keys.chunks(BATCH) {
        let mut pipe = redis::pipe();
        for key in batch {
            pipe.cmd("HGETALL").arg(key);
        }
        // A key of another type fails its own command only.
        let read: Vec<RedisResult<BTreeMap<String, String>>> =
            pipe.ignore_errors().query(connection)?;
        for reply in read {
            rows.push(row(reply)?);
        }
    }
    Ok(rows)
}

/// The rows of the settings: CONFIG_DB's `SWITCH_HASH|GLOBAL` and ARS
/// tables, APPL_DB's switch row. The ARS tables are found with `KEYS
/// TABLE|*`: they hold a handful of rows.
fn read_settings(config: &mut Connection, appl: &mut Connection) -> RedisResult<Rows> {
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
    row(redis::cmd("HGETALL")
        .arg(key)
        .query::<BTreeMap<String, String>>(connection))
}

/// An `HGETALL`'s reply as a row: `None` for a key that does not exist, a
/// refusal for a key of another type.
fn row(reply: RedisResult<BTreeMap<String, String>>) -> RedisResult<Option<Row>> {
    match reply {
        Ok(fields) if fields.is_empty() => Ok(None),
        Ok(fields) => Ok(Some(Ok(fields))),
        Err(e) if e.code() == Some("WRONGTYPE") => {
            Ok(Some(Err("not a hash; SONiC keeps every row as one".into())))
        }
        Err(e) => Err(e),
    }
}
