//! A tiny HTTP/1.1 server on a loopback port for the `remote` source's
//! silence and garbage: each server answers every request the same way,
//! keeps connections alive, and counts connections and requests; servers
//! may share an [`InFlight`] gauge, which shows whether their requests
//! were open at the same time (scraped at once, not one after another).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// How a server answers.
#[derive(Clone, Debug)]
pub enum Answer {
    /// 200 with this body, as `text/plain; version=0.0.4`.
    Metrics(String),
    /// This status line, content type and body.
    Raw(&'static str, &'static str, String),
    /// Reads the request and never answers.
    Hang,
    /// `Hang` for the server's first request, `Metrics` after.
    HangOnce(String),
    /// Sends the headers of a 200 and half the body, then nothing.
    HangInBody(String),
    /// As `Metrics`, after this delay.
    Slow(Duration, String),
}

/// Requests read and not yet answered (or, for a server that hangs, not
/// yet given up by the client), across the servers that share it.
#[derive(Debug, Default)]
pub struct InFlight {
    now: AtomicUsize,
    most: AtomicUsize,
}

impl InFlight {
    /// The most requests ever open at once.
    pub fn most(&self) -> usize {
        self.most.load(Ordering::SeqCst)
    }

    fn enter(&self) {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
    }

    fn leave(&self) {
        self.now.fetch_sub(1, Ordering::SeqCst);
    }
}

pub struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    connections: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
    accept: Option<JoinHandle<()>>,
}

impl Server {
    pub fn start(answer: Answer) -> Self {
        Self::counted(answer, &Arc::default())
    }

    /// A server whose open requests count in `in_flight`.
    pub fn counted(answer: Answer, in_flight: &Arc<InFlight>) -> Self {
        let in_flight = in_flight.clone();
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding a loopback port");
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let connections = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(AtomicUsize::new(0));
        let accept = {
            let (stop, connections, requests) =
                (stop.clone(), connections.clone(), requests.clone());
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    connections.fetch_add(1, Ordering::SeqCst);
                    let (stop, requests, answer) = (stop.clone(), requests.clone(), answer.clone());
                    let in_flight = in_flight.clone();
                    std::thread::spawn(move || {
                        serve(stream, &answer, &stop, &requests, &in_flight)
                    });
                }
            })
        };
        Self {
            addr,
            stop,
            connections,
            requests,
            accept: Some(accept),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/metrics", self.addr)
    }

    /// TCP connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// Requests read so far.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop, which then sees the stop.
        let _ = TcpStream::connect(self.addr);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

/// Answers requests on `stream` until the client closes it or the server
/// stops.
fn serve(
    mut stream: TcpStream,
    answer: &Answer,
    stop: &AtomicBool,
    requests: &AtomicUsize,
    in_flight: &InFlight,
) {
    // Short reads, so that a stopped server's threads end soon.
    let _ = stream.set_read_timeout(Some(Duration::from_millis(20)));
    let mut pending = Vec::new();
    let mut buf = [0u8; 4096];
    while !stop.load(Ordering::SeqCst) {
        let end = pending.windows(4).position(|w| w == b"\r\n\r\n");
        let Some(end) = end else {
            match stream.read(&mut buf) {
                Ok(0) => return,
                Ok(n) => pending.extend_from_slice(&buf[..n]),
                Err(e) if is_timeout(&e) => {}
                Err(_) => return,
            }
            continue;
        };
        pending.drain(..end + 4);
        let earlier = requests.fetch_add(1, Ordering::SeqCst);
        in_flight.enter();
        let hang = |stream: &mut TcpStream| {
            hang(stream, stop);
            in_flight.leave();
        };
        let reply = match answer {
            Answer::Metrics(body) => response("200 OK", METRICS, body),
            Answer::Raw(status, content_type, body) => response(status, content_type, body),
            Answer::Slow(delay, body) => {
                std::thread::sleep(*delay);
                response("200 OK", METRICS, body)
            }
            Answer::HangInBody(body) => {
                let mut reply = response("200 OK", METRICS, body);
                reply.truncate(reply.len() - body.len() / 2);
                let _ = stream.write_all(&reply);
                return hang(&mut stream);
            }
            Answer::Hang => return hang(&mut stream),
            Answer::HangOnce(_) if earlier == 0 => return hang(&mut stream),
            Answer::HangOnce(body) => response("200 OK", METRICS, body),
        };
        let written = stream.write_all(&reply);
        in_flight.leave();
        if written.is_err() {
            return;
        }
    }
}

const METRICS: &str = "text/plain; version=0.0.4; charset=utf-8";

fn response(status: &str, content_type: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Holds the connection open, saying nothing, until the client gives up
/// (closes it) or the server stops.
fn hang(stream: &mut TcpStream, stop: &AtomicBool) {
    let mut buf = [0u8; 4096];
    while !stop.load(Ordering::SeqCst) {
        match stream.read(&mut buf) {
            Ok(0) => return,
            // Another request on a connection given up on: still nothing.
            Ok(_) => {}
            Err(e) if is_timeout(&e) => {}
            Err(_) => return,
        }
    }
    let _ = stream.shutdown(Shutdown::Both);
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}
