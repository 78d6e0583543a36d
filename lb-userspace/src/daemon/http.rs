//! The metrics endpoint of `run --metrics-listen`: `GET /metrics` answers
//! the textfile's exposition, rendered by the event loop for each scrape,
//! so it is never older than the request.

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{ALLOW, CONTENT_TYPE, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, info, warn};

/// Prometheus' text exposition format.
const CONTENT: &str = "text/plain; version=0.0.4; charset=utf-8";
/// A client that has not sent its request headers by then is dropped, so
/// idle connections cannot pile up.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Scrapes waiting for the event loop; more wait for room.
const QUEUED_SCRAPES: usize = 8;

/// A scrape the event loop answers with the exposition, or why it could
/// not render one.
pub(super) type Scrape = oneshot::Sender<Result<String, String>>;

#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// Said by clap after the flag and the value.
    #[error(
        "expected PORT (on 127.0.0.1) or ADDRESS:PORT with a numeric address, \
         e.g. 127.0.0.1:9464 or [::1]:9464"
    )]
    Syntax,
    #[error("--metrics-listen {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// `--metrics-listen`'s value: a port alone listens on 127.0.0.1; another
/// address only when written out, and numeric, so no name can resolve to
/// an address that exposes the counters beyond the box.
pub fn parse_listen(text: &str) -> Result<SocketAddr, ListenError> {
    if let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    text.parse().map_err(|_| ListenError::Syntax)
}

/// The scrapes the event loop answers; none without an endpoint.
pub(super) struct Scrapes(Option<mpsc::Receiver<Scrape>>);

impl Scrapes {
    /// Listens on `addr` (when given) and serves each connection on a task
    /// of its own; a port that cannot be bound fails the start.
    pub(super) async fn listen(addr: Option<SocketAddr>) -> Result<Self, ListenError> {
        let Some(addr) = addr else {
            return Ok(Self(None));
        };
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ListenError::Bind { addr, source })?;
        if !addr.ip().is_loopback() {
            warn!(%addr, "metrics served beyond the box: whoever reaches this address reads them");
        }
        info!(%addr, "metrics served over HTTP at /metrics");
        let (tx, rx) = mpsc::channel(QUEUED_SCRAPES);
        tokio::spawn(accept(listener, tx));
        Ok(Self(Some(rx)))
    }

    /// The next scrape to answer; never comes without an endpoint.
    pub(super) async fn next(&mut self) -> Scrape {
        super::next_request(self.0.as_mut()).await
    }
}

async fn accept(listener: TcpListener, scrapes: mpsc::Sender<Scrape>) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of descriptors, say: the next accept may work.
                debug!("accepting a metrics connection: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let scrapes = scrapes.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| respond(request, scrapes.clone()));
            let served = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service)
                .await;
            if let Err(e) = served {
                debug!("metrics connection: {e}");
            }
        });
    }
}

async fn respond(
    request: Request<Incoming>,
    scrapes: mpsc::Sender<Scrape>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let reply = |status, body: String| {
        let mut response = Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = status;
        response
    };
    if request.uri().path() != "/metrics" {
        return Ok(reply(
            StatusCode::NOT_FOUND,
            "not found; try /metrics\n".into(),
        ));
    }
    if request.method() != Method::GET {
        let mut response = reply(StatusCode::METHOD_NOT_ALLOWED, "GET only\n".into());
        response
            .headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET"));
        return Ok(response);
    }
    let (tx, rx) = oneshot::channel();
    let rendered = match scrapes.send(tx).await {
        Ok(()) => rx
            .await
            .unwrap_or_else(|_| Err("the daemon is stopping".into())),
        Err(_) => Err("the daemon is stopping".into()),
    };
    Ok(match rendered {
        Ok(text) => {
            let mut response = reply(StatusCode::OK, text);
            response
                .headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static(CONTENT));
            response
        }
        Err(e) => reply(StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_alone_is_localhost_and_addresses_must_be_numeric() {
        assert_eq!(
            parse_listen("9464").unwrap(),
            "127.0.0.1:9464".parse().unwrap()
        );
        assert_eq!(
            parse_listen("[::1]:9464").unwrap(),
            "[::1]:9464".parse().unwrap()
        );
        assert_eq!(
            parse_listen("198.18.0.1:80").unwrap(),
            "198.18.0.1:80".parse().unwrap()
        );
        for bad in ["localhost:9464", "127.0.0.1", ":9464", "65536", "::1:9464"] {
            assert!(
                matches!(parse_listen(bad), Err(ListenError::Syntax)),
                "{bad}"
            );
        }
    }
}
