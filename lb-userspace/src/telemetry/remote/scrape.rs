//! Scraping a set of URLs at once, each within one deadline: one thread per
//! distinct URL ([`Fanout`]), each keeping its HTTP/1.1 connection alive
//! between polls.

use std::time::{Duration, Instant};

use ureq::Agent;

use super::exposition;
use crate::telemetry::fanout::{Fanout, Work};

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

/// One URL's answer: its series, and about when the switch read them.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Answer {
    pub series: Vec<Series>,
    /// Halfway between the request and its answer's headers: the
    /// exporter reads its counters in between, and a rate taken between
    /// two such moments is off by at most half a round trip at each end.
    /// The poll's end, which waits for the slowest of the switches
    /// scraped at once, put their reads 3-8 ms apart in a random order on
    /// a busy machine, and 16 equal spines scraped every 10 ms read their
    /// drain rates 12-20% apart.
    pub read_at: Instant,
}

type Scraped = Result<Answer, Failure>;

/// The scrape threads for a set of distinct URLs.
pub(super) struct Scraper(Fanout<Scraped>);

impl Scraper {
    /// Threads for `urls` (distinct), keeping the series named in
    /// `metrics`; each scrape must finish within `timeout`.
    pub fn new(urls: Vec<String>, metrics: &'static [&'static str], timeout: Duration) -> Self {
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
            // Each scrape sets its own deadline; this bounds anything
            // that would slip past it.
            .timeout_global(Some(timeout))
            .build()
            .into();
        let work = (urls.into_iter())
            .map(|url| {
                let agent = agent.clone();
                Box::new(move |deadline| scrape(&agent, &url, deadline, metrics)) as Work<Scraped>
            })
            .collect();
        Self(Fanout::new("remote-scrape", work, timeout))
    }

    /// Scrapes every URL; returns in at most the timeout, one result per
    /// URL in order.
    pub fn scrape(&mut self) -> Vec<Scraped> {
        (self.0.poll().into_iter())
            .map(|scraped| {
                scraped.unwrap_or_else(|missed| Err(Failure::Unreachable(missed.to_string())))
            })
            .collect()
    }
}

/// One GET of `url`, finished by `deadline`: the series named in
/// `metrics`, or why there are none.
fn scrape(agent: &Agent, url: &str, deadline: Instant, metrics: &[&str]) -> Scraped {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(Failure::Unreachable(
            "asked too late to answer in time".into(),
        ));
    }
    let request = agent.get(url).config().timeout_global(Some(left)).build();
    let asked = Instant::now();
    let mut response = request.call().map_err(failure)?;
    let read_at = asked + asked.elapsed() / 2;
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
    let series = samples
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
        .collect();
    Ok(Answer { series, read_at })
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
