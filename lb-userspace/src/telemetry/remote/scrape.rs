//! Scraping a set of URLs at once, each within one deadline: one thread per
//! distinct URL, each keeping its HTTP/1.1 connection alive between polls.
//!
//! A poll asks every idle thread for a scrape and waits for the answers up
//! to the deadline, so a hung or slow URL costs the others at most the
//! timeout. A thread whose scrape outlived a poll is not asked again until
//! it answered (its late answer is thrown away), so a hung URL never
//! queues requests behind it.

use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::{Duration, Instant};

use ureq::Agent;

use super::exposition;

/// One series of the metrics [`Remote`](super::Remote) reads, owned.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Series {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

/// Why a URL gave nothing to read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Failure {
    /// No usable answer: refused, timed out, an HTTP error status.
    Unreachable(String),
    /// An answer that is not exposition text.
    Garbage(String),
}

/// Largest body read: node_exporter's qdisc metrics are a few hundred
/// bytes per device.
const BODY_LIMIT: u64 = 8 << 20;

/// What a scrape thread is asked: a round number and when it must answer.
type Ask = (u64, Instant);
/// What it answers: its index, the round, and the series it read.
type Answer = (usize, u64, Result<Vec<Series>, Failure>);

/// The scrape threads for a set of distinct URLs.
pub(super) struct Scraper {
    urls: Vec<String>,
    metrics: &'static [&'static str],
    timeout: Duration,
    /// Started at the first scrape, so that their sockets live in the
    /// network namespace of the thread that polls.
    threads: Option<Threads>,
    round: u64,
}

struct Threads {
    asks: Vec<Sender<Ask>>,
    /// Whether each thread is still working on an earlier scrape.
    busy: Vec<bool>,
    answers: Receiver<Answer>,
}

impl Scraper {
    /// Threads for `urls` (distinct), keeping the series named in
    /// `metrics`; each scrape must finish within `timeout`.
    pub fn new(urls: Vec<String>, metrics: &'static [&'static str], timeout: Duration) -> Self {
        Self {
            urls,
            metrics,
            timeout,
            threads: None,
            round: 0,
        }
    }

    /// Scrapes every URL; returns in at most the timeout, one result per
    /// URL in order.
    pub fn scrape(&mut self) -> Vec<Result<Vec<Series>, Failure>> {
        let deadline = Instant::now() + self.timeout;
        self.round += 1;
        let round = self.round;
        let threads = match &mut self.threads {
            Some(threads) => threads,
            None => self
                .threads
                .insert(Threads::start(&self.urls, self.metrics, self.timeout)),
        };
        // Late answers of earlier rounds free their threads.
        while let Ok((index, _, _)) = threads.answers.try_recv() {
            threads.busy[index] = false;
        }
        let mut results: Vec<Option<Result<Vec<Series>, Failure>>> = vec![None; self.urls.len()];
        let mut waiting = 0;
        for (index, ask) in threads.asks.iter().enumerate() {
            if threads.busy[index] {
                results[index] = Some(Err(Failure::Unreachable(format!(
                    "its previous scrape is still not answered after {:?}",
                    self.timeout
                ))));
            } else if ask.send((round, deadline)).is_ok() {
                threads.busy[index] = true;
                waiting += 1;
            } else {
                results[index] = Some(Err(Failure::Unreachable(
                    "its scrape thread is gone".into(),
                )));
            }
        }
        while waiting > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            match threads.answers.recv_timeout(left) {
                Ok((index, answered, result)) => {
                    threads.busy[index] = false;
                    if answered == round {
                        results[index] = Some(result);
                        waiting -= 1;
                    }
                }
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
            }
        }
        results
            .into_iter()
            .map(|result| {
                result.unwrap_or_else(|| {
                    Err(Failure::Unreachable(format!(
                        "no answer within {:?}",
                        self.timeout
                    )))
                })
            })
            .collect()
    }
}

impl Threads {
    fn start(urls: &[String], metrics: &'static [&'static str], timeout: Duration) -> Self {
        let agent: Agent = Agent::config_builder()
            // The scrape goes straight to the switch, whatever proxy the
            // environment names.
            .proxy(None)
            .http_status_as_error(false)
            // A scrape URL is exact; a redirect is an error status.
            .max_redirects(0)
            // The classic text format, never OpenMetrics or protobuf.
            .accept("text/plain; version=0.0.4")
            .user_agent(concat!("fabriclb/", env!("CARGO_PKG_VERSION")))
            // Each thread's scrapes set their own deadline; this bounds
            // anything that would slip past it.
            .timeout_global(Some(timeout))
            .build()
            .into();
        let (answer, answers) = channel();
        let mut asks = Vec::new();
        for (index, url) in urls.iter().enumerate() {
            let (ask, asked) = channel::<Ask>();
            let (agent, url, answer) = (agent.clone(), url.clone(), answer.clone());
            // A thread that cannot start drops its receiver with the
            // closure: its URL then reads "thread is gone" each poll.
            let _ = std::thread::Builder::new()
                .name(format!("remote-scrape-{index}"))
                .spawn(move || {
                    for (round, deadline) in asked {
                        let result = scrape(&agent, &url, deadline, metrics);
                        if answer.send((index, round, result)).is_err() {
                            break;
                        }
                    }
                });
            asks.push(ask);
        }
        Self {
            busy: vec![false; urls.len()],
            asks,
            answers,
        }
    }
}

/// One GET of `url`, finished by `deadline`: the series named in
/// `metrics`, or why there are none.
fn scrape(
    agent: &Agent,
    url: &str,
    deadline: Instant,
    metrics: &[&str],
) -> Result<Vec<Series>, Failure> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(Failure::Unreachable(
            "asked too late to answer in time".into(),
        ));
    }
    let request = agent.get(url).config().timeout_global(Some(left)).build();
    let mut response = request.call().map_err(failure)?;
    let status = response.status();
    let body = response
        .body_mut()
        .with_config()
        .limit(BODY_LIMIT)
        .read_to_vec();
    if !status.is_success() {
        return Err(Failure::Unreachable(format!("HTTP status {status}")));
    }
    let body = body.map_err(failure)?;
    let text = std::str::from_utf8(&body)
        .map_err(|e| Failure::Garbage(format!("the body is not UTF-8 text: {e}")))?;
    let samples = exposition::parse(text)
        .map_err(|e| Failure::Garbage(format!("the body is not Prometheus text: {e}")))?;
    Ok(samples
        .into_iter()
        .filter(|s| metrics.contains(&s.name))
        .map(|s| Series {
            name: s.name.to_owned(),
            labels: s
                .labels
                .into_iter()
                .map(|(n, v)| (n.to_owned(), v.into_owned()))
                .collect(),
            value: s.value,
        })
        .collect())
}

/// What a failed request means for the path: an answer too big to be
/// metrics is garbage, anything else (refused, reset, timed out, not
/// HTTP) unreachable.
fn failure(error: ureq::Error) -> Failure {
    match error {
        ureq::Error::BodyExceedsLimit(limit) => {
            Failure::Garbage(format!("the body is over {limit} bytes"))
        }
        ureq::Error::Timeout(_) => Failure::Unreachable(format!("timed out: {error}")),
        error => Failure::Unreachable(error.to_string()),
    }
}
