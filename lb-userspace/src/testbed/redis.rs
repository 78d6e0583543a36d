//! `redis-server` started by a test on a unix socket in a directory of the
//! test's own, killed on drop, also when an assertion fails: SONiC's Redis
//! for the `counters-db` source and `run --sonic`.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use redis::{IntoConnectionInfo, RedisConnectionInfo};

use super::netns::die_with_parent;

/// How long a server may take to answer.
const BOUND: Duration = Duration::from_secs(10);
/// A connect or reply that takes longer fails.
const TIMEOUT: Duration = Duration::from_millis(500);

/// A directory of this test alone, removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(tag: &str) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("fabriclb-cdb-{}-{n}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        super::leftovers::hold(&dir);
        Self(dir)
    }

    pub fn socket(&self) -> PathBuf {
        self.0.join("redis.sock")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        super::leftovers::remove(&self.0);
    }
}

/// `args` (a command and its arguments) on `db`; a refusal fails the test.
pub fn command(db: &mut redis::Connection, args: &[&str]) {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query::<redis::Value>(db)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
}

/// `redis-server` as a child of the test.
pub struct RedisServer {
    child: Child,
    pub socket: PathBuf,
}

impl RedisServer {
    /// A server on `dir`'s socket only.
    pub fn start(dir: &Scratch) -> Self {
        Self::start_with(dir, &["--port", "0"])
    }

    pub fn start_with(dir: &Scratch, extra: &[&str]) -> Self {
        Self::start_in(None, dir, extra)
    }

    /// [`Self::start_with`] in network namespace `ns` (`None`: this
    /// process's), so that a TCP `--bind` there takes that namespace's
    /// address; the socket is a file, reached from anywhere.
    pub fn start_in(ns: Option<&str>, dir: &Scratch, extra: &[&str]) -> Self {
        let socket = dir.socket();
        // A killed server leaves its socket file behind; gone, it cannot
        // be mistaken for the new server's.
        let _ = std::fs::remove_file(&socket);
        let mut command = match ns {
            Some(ns) => {
                let mut ip = Command::new("ip");
                ip.args(["netns", "exec", ns, "redis-server"]);
                ip
            }
            None => Command::new("redis-server"),
        };
        // A demo stopped by a signal exits from its watcher thread without
        // dropping this; the server must not outlive it.
        die_with_parent(&mut command, nix::sys::signal::Signal::SIGKILL);
        let child = command
            .args(extra)
            .arg("--unixsocket")
            .arg(&socket)
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(&dir.0)
            .arg("--logfile")
            .arg(dir.0.join("redis.log"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server (Debian package redis-server, `cargo xtask setup`)");
        let mut server = Self { child, socket };
        server.wait_ready();
        server
    }

    /// Until PING answers on the socket, bounded.
    fn wait_ready(&mut self) {
        let start = Instant::now();
        loop {
            if let Ok(mut conn) = self.try_conn(0)
                && redis::cmd("PING").query::<String>(&mut conn).is_ok()
            {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("redis-server exited before answering: {status}");
            }
            assert!(
                start.elapsed() < BOUND,
                "redis-server did not answer on {} within {BOUND:?}",
                self.socket.display()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    pub fn try_conn(&self, db: i64) -> redis::RedisResult<redis::Connection> {
        let info = redis::ConnectionAddr::Unix(self.socket.clone())
            .into_connection_info()?
            .set_redis_settings(RedisConnectionInfo::default().set_db(db));
        redis::Client::open(info)?.get_connection_with_timeout(TIMEOUT)
    }

    /// A connection to database `db`.
    pub fn conn(&self, db: i64) -> redis::Connection {
        self.try_conn(db).expect("connect to the test's redis")
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, as a crashed Redis.
    pub fn kill(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}
