//! Redis's protocol over a socket of the source's own, every byte of a
//! poll under one deadline.
//!
//! The redis crate encodes commands and parses replies; the socket is ours
//! because the crate's blocking connection, when a pipelined reply times
//! out, goes on to read every later reply with a fresh timeout of its own
//! (so that a transaction's replies stay in step): a hung Redis would hold
//! a poll of 8 ports x 9 rows for 72 timeouts instead of one.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::socket::{self, AddressFamily, SockFlag, SockType, UnixAddr};
use redis::Value;

use super::address::Target;

/// Why a round trip failed; the connection is done for either way.
#[derive(Debug)]
pub(super) struct Failure {
    pub why: String,
    /// The deadline passed: Redis is there but not answering, so a second
    /// try within the same poll would only wait again.
    pub timed_out: bool,
}

impl Failure {
    fn io(err: &io::Error) -> Self {
        Self {
            why: err.to_string(),
            timed_out: is_timeout(err),
        }
    }
}

fn is_timeout(err: &io::Error) -> bool {
    // A socket read timeout shows as WouldBlock on Linux.
    matches!(
        err.kind(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
    )
}

/// Commands sent together and answered together: one round trip.
#[derive(Default)]
pub(super) struct Batch {
    bytes: Vec<u8>,
    commands: usize,
}

impl Batch {
    pub fn push(&mut self, args: &[&str]) {
        let mut cmd = redis::Cmd::new();
        for arg in args {
            cmd.arg(*arg);
        }
        cmd.write_packed_command(&mut self.bytes);
        self.commands += 1;
    }

    /// `SELECT db`: the commands after it read database `db`.
    pub fn push_select(&mut self, db: i64) {
        self.push(&["SELECT", &db.to_string()]);
    }

    pub fn len(&self) -> usize {
        self.commands
    }
}

/// Whether `reply` is a `SELECT db`'s success. Anything else leaves the
/// connection on a database nobody can name: a failure of the connection.
pub fn selected(db: i64, reply: &Value) -> Result<(), Failure> {
    match reply {
        Value::Okay => Ok(()),
        Value::SimpleString(ok) if ok == "OK" => Ok(()),
        reply => Err(Failure {
            why: format!("SELECT {db}: {}", describe(reply)),
            timed_out: false,
        }),
    }
}

enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

/// One connection to Redis, already on the wanted database.
pub(super) struct Wire {
    stream: Stream,
    /// Holds bytes read past one reply for the next; lives as long as the
    /// stream so pipelined replies are never lost between calls.
    parser: redis::Parser,
}

impl Wire {
    /// Connects to `target` and selects database `db`.
    pub fn connect(target: Target<'_>, db: i64, deadline: Instant) -> Result<Self, Failure> {
        let stream = match target {
            Target::Unix(path) => Stream::Unix(connect_unix(path).map_err(|e| Failure::io(&e))?),
            Target::Tcp(host, port) => {
                Stream::Tcp(connect_tcp(host, port, deadline).map_err(|e| Failure::io(&e))?)
            }
        };
        let mut wire = Self {
            stream,
            parser: redis::Parser::new(),
        };
        let mut select = Batch::default();
        select.push_select(db);
        match wire.round_trip(&select, deadline)?.as_slice() {
            [reply] => selected(db, reply).map(|()| wire),
            _ => Err(Failure {
                why: format!("SELECT {db}: no single reply"),
                timed_out: false,
            }),
        }
    }

    /// Sends `batch` and reads one reply per command, all before
    /// `deadline`. A server's error reply to a command is one of the
    /// values (`Value::ServerError`), not a failure.
    pub fn round_trip(&mut self, batch: &Batch, deadline: Instant) -> Result<Vec<Value>, Failure> {
        let mut io = Deadline {
            stream: &mut self.stream,
            deadline,
            timed_out: false,
        };
        if let Err(err) = io.write_all(&batch.bytes) {
            return Err(Failure::io(&err));
        }
        let mut replies = Vec::with_capacity(batch.commands);
        for _ in 0..batch.commands {
            match self.parser.parse_value(&mut io) {
                Ok(reply) => replies.push(reply),
                Err(err) => {
                    return Err(Failure {
                        why: err.to_string(),
                        timed_out: io.timed_out || err.is_timeout(),
                    });
                }
            }
        }
        Ok(replies)
    }
}

/// Connects without blocking: a Redis that is alive but not accepting
/// (stopped, stuck) lets connections pile up in its listen backlog, and
/// once that is full a blocking connect waits with no timeout at all.
fn connect_unix(path: &Path) -> io::Result<UnixStream> {
    let fd = socket::socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        None,
    )?;
    let addr = UnixAddr::new(path)?;
    // A unix connect completes at once or fails (EAGAIN on a full
    // backlog); it never stays in progress.
    socket::connect(fd.as_raw_fd(), &addr)?;
    let stream = UnixStream::from(fd);
    stream.set_nonblocking(false)?;
    Ok(stream)
}

fn connect_tcp(host: &str, port: u16, deadline: Instant) -> io::Result<TcpStream> {
    // Name resolution has no timeout of its own; SONiC's Redis is
    // addressed by IP, where this is a parse.
    let mut last = io::Error::new(
        io::ErrorKind::NotFound,
        format!("{host} resolves to no address"),
    );
    for addr in (host, port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, remaining(deadline)?) {
            Ok(stream) => {
                // Each batch goes out in one write; no reason to let Nagle
                // hold its tail for an ACK.
                stream.set_nodelay(true)?;
                return Ok(stream);
            }
            Err(err) => last = err,
        }
    }
    Err(last)
}

/// Time left before `deadline`, or a timeout error when none is.
fn remaining(deadline: Instant) -> io::Result<Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        Err(io::Error::new(io::ErrorKind::TimedOut, "timed out"))
    } else {
        Ok(left)
    }
}

/// The stream, with each read and write limited to the time left.
struct Deadline<'a> {
    stream: &'a mut Stream,
    deadline: Instant,
    timed_out: bool,
}

impl Deadline<'_> {
    fn limit<T>(
        &mut self,
        op: impl FnOnce(&mut Stream, Duration) -> io::Result<T>,
    ) -> io::Result<T> {
        let result = remaining(self.deadline).and_then(|left| op(self.stream, left));
        if let Err(err) = &result {
            self.timed_out |= is_timeout(err);
        }
        result
    }
}

impl Read for Deadline<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.limit(|stream, left| match stream {
            Stream::Unix(s) => s.set_read_timeout(Some(left)).and_then(|()| s.read(buf)),
            Stream::Tcp(s) => s.set_read_timeout(Some(left)).and_then(|()| s.read(buf)),
        })
    }
}

impl Write for Deadline<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.limit(|stream, left| match stream {
            Stream::Unix(s) => s.set_write_timeout(Some(left)).and_then(|()| s.write(buf)),
            Stream::Tcp(s) => s.set_write_timeout(Some(left)).and_then(|()| s.write(buf)),
        })
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A reply as text for an error message.
fn describe(reply: &Value) -> String {
    match reply {
        Value::ServerError(err) => err.to_string(),
        other => format!("unexpected reply {other:?}"),
    }
}
