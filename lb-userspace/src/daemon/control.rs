//! The control socket, RUN_DIR/INSTANCE.sock: `fabriclb reload` asks the
//! running daemon to reload and hears back whether the config went live or
//! was refused, and why, which a SIGHUP cannot tell its sender. One
//! request a connection, a line; one answer, the connection's rest.
//! `fabriclb watch` asks for the flow events instead: its answer is `ok`
//! and then a JSON line per event until it hangs up.

use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, info, warn};

use super::flow_events::{WatchLine, Watchers};

/// Where `run` listens and `reload` connects unless told otherwise; the
/// packaged unit has systemd create it (`RuntimeDirectory=fabriclb`).
pub const DEFAULT_RUN_DIR: &str = "/run/fabriclb";
/// A client that has not sent its request line by then is dropped.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest request line read.
const REQUEST_BYTES: u64 = 64;

/// The socket of `instance` under `run_dir`.
pub fn socket_path(run_dir: &Path, instance: &str) -> PathBuf {
    run_dir.join(format!("{instance}.sock"))
}

/// The line `fabriclb watch` sends.
pub const WATCH: &str = "watch\n";

/// What a client asks of the event loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    /// Read the config file again and move to it, or refuse it.
    Reload,
}

impl Request {
    fn parse(line: &str) -> Option<Self> {
        match line.trim() {
            "reload" => Some(Self::Reload),
            _ => None,
        }
    }

    /// The line a client sends.
    pub fn line(self) -> &'static str {
        match self {
            Self::Reload => "reload\n",
        }
    }
}

/// The daemon's answer: done (what it did) or refused (why).
pub type Answer = Result<String, String>;

/// The first word of an answer's text: `ok` or `refused`, then the text.
pub fn encode(answer: &Answer) -> String {
    match answer {
        Ok(text) => format!("ok {text}\n"),
        Err(why) => format!("refused {why}\n"),
    }
}

/// Reads back what [`encode`] wrote; `None` for anything else.
pub fn decode(text: &str) -> Option<Answer> {
    let text = text.trim_end();
    if let Some(done) = text.strip_prefix("ok ") {
        return Some(Ok(done.to_owned()));
    }
    text.strip_prefix("refused ").map(|why| Err(why.to_owned()))
}

/// A request waiting for the event loop, and where its answer goes.
pub(super) type Asked = (Request, oneshot::Sender<Answer>);

/// The requests the event loop answers; none if the socket could not be
/// bound (said once at start: `run` keeps forwarding and reloading on
/// SIGHUP, only `fabriclb reload` cannot reach it).
pub(super) struct Control(Option<Listening>);

/// A bound socket: the requests its task hands on, and its file, removed
/// when the daemon exits.
struct Listening {
    requests: mpsc::Receiver<Asked>,
    path: PathBuf,
}

impl Control {
    pub(super) fn listen(run_dir: &Path, instance: &str, watchers: Watchers) -> Self {
        let path = socket_path(run_dir, instance);
        match bind(&path) {
            Ok(listener) => {
                info!(socket = %path.display(), "control socket listening (fabriclb reload)");
                let (tx, requests) = mpsc::channel(1);
                tokio::spawn(accept(listener, tx, watchers));
                Self(Some(Listening { requests, path }))
            }
            Err(e) => {
                warn!(
                    socket = %path.display(),
                    "no control socket, so `fabriclb reload` cannot reach this daemon \
                     (SIGHUP still reloads): {e}"
                );
                Self(None)
            }
        }
    }

    /// The next request; never comes without a socket.
    pub(super) async fn next(&mut self) -> Asked {
        super::next_request(self.0.as_mut().map(|l| &mut l.requests)).await
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Binds `path` (its directory made if missing), owner-only: a reload is
/// root's to ask for. A socket file left by a daemon that died is taken
/// over; one another daemon still answers on is not.
fn bind(path: &Path) -> std::io::Result<UnixListener> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => {
            return Err(std::io::Error::new(
                ErrorKind::AddrInUse,
                "another daemon answers there (another instance of the same name?)",
            ));
        }
        Err(e) if e.kind() == ErrorKind::ConnectionRefused => std::fs::remove_file(path)?,
        Err(_) => {}
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

async fn accept(listener: UnixListener, requests: mpsc::Sender<Asked>, watchers: Watchers) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(serve(stream, requests.clone(), watchers.clone()));
            }
            Err(e) => {
                debug!("accepting a control connection: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// One connection: its request line, the event loop's answer back.
async fn serve(stream: UnixStream, requests: mpsc::Sender<Asked>, watchers: Watchers) {
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    let mut reader = tokio::io::AsyncReadExt::take(BufReader::new(read), REQUEST_BYTES);
    let read = tokio::time::timeout(REQUEST_TIMEOUT, reader.read_line(&mut line)).await;
    if matches!(read, Ok(Ok(_))) && line == WATCH {
        // Subscribed before the answer: the client misses nothing after it.
        let events = watchers.subscribe();
        if let Err(e) = watch(&mut write, events).await {
            debug!("a watch client left: {e}");
        }
        return;
    }
    let answer = match (read, Request::parse(&line)) {
        (Ok(Ok(_)), Some(request)) => {
            let (tx, rx) = oneshot::channel();
            match requests.send((request, tx)).await {
                Ok(()) => rx
                    .await
                    .unwrap_or_else(|_| Err("the daemon is exiting".into())),
                Err(_) => Err("the daemon is exiting".into()),
            }
        }
        (Ok(Ok(_)), None) => Err(format!(
            "unknown request {:?}; try \"reload\" or \"watch\"",
            line.trim()
        )),
        (Ok(Err(e)), _) => Err(format!("reading the request: {e}")),
        (Err(_), _) => Err(format!("no request within {REQUEST_TIMEOUT:?}")),
    };
    if let Err(e) = write.write_all(encode(&answer).as_bytes()).await {
        debug!("answering a control request: {e}");
    }
}

/// Streams the flow events to a `watch` client until it hangs up: `ok`,
/// then a line each; a client that fell behind is told how many it lost.
async fn watch(
    write: &mut tokio::net::unix::OwnedWriteHalf,
    mut events: tokio::sync::broadcast::Receiver<std::sync::Arc<str>>,
) -> std::io::Result<()> {
    write
        .write_all(encode(&Ok("watching".into())).as_bytes())
        .await?;
    loop {
        let line = match events.recv().await {
            Ok(line) => line,
            Err(RecvError::Lagged(lost)) => {
                serde_json::to_string(&WatchLine::Lost { lost })?.into()
            }
            Err(RecvError::Closed) => return Ok(()),
        };
        write.write_all(line.as_bytes()).await?;
        write.write_all(b"\n").await?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_read_back_as_written() {
        for answer in [
            Ok("config reloaded: 2 changes".to_owned()),
            Err("line 3, column 1: unknown field `mdoe`".to_owned()),
            // A config refused for several problems, a line each: the
            // client reads to the end, not a line.
            Err("a.toml:5:8: unsupported group mode\na.toml:9:10: invalid prefix".to_owned()),
        ] {
            assert_eq!(decode(&encode(&answer)), Some(answer));
        }
        assert_eq!(decode("maybe\n"), None);
    }

    #[test]
    fn only_known_requests_parse() {
        assert_eq!(
            Request::parse(Request::Reload.line()),
            Some(Request::Reload)
        );
        assert_eq!(Request::parse("restart\n"), None);
    }
}
