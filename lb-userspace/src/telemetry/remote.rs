//! The `remote` source: the next-hop switch's own egress queue, as its
//! node_exporter's qdisc collector exports it in Prometheus text over
//! HTTP:
//!
//! ```text
//! node_qdisc_backlog{device="fleaf",kind="tbf"} 1234        # bytes queued now
//! node_qdisc_bytes_total{device="fleaf",kind="tbf"} 5.6e+07 # bytes sent
//! ```
//!
//! Each path is a [`Target`]: a URL and the device whose queue leads
//! on from that switch. Targets sharing a URL share one scrape per poll;
//! each distinct URL is scraped on a thread of its own over a kept-alive
//! HTTP/1.1 connection, so a hung switch costs the others at most the
//! timeout ([`scrape`]). The body is read by a strict parser of the text
//! format ([`exposition`]).
//!
//! A device with several series (one per `kind`) reads as their sum:
//! node_exporter's qdisc collector exports only root qdiscs (checked with
//! 1.5: an HTB root with a TBF child shows as one `htb` series), and a
//! root's statistics already include its children's, so a device has one
//! series and the sum is that one value; should an exporter ever list
//! separate roots of one device, they are separate queues toward the same
//! path, and what waits toward the path is their total.

mod exposition;
mod scrape;

use std::time::Duration;

use ureq::http::Uri;

use super::{Reading, Source, TelemetryError};
use scrape::{Failure, Scraper, Series};

const NAME: &str = "remote";
const BACKLOG: &str = "node_qdisc_backlog";
const BYTES: &str = "node_qdisc_bytes_total";

/// One path's queue: where to scrape, and the device label to read.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Target {
    /// e.g. `http://198.18.4.2:9100/metrics`.
    pub url: String,
    /// The `device` label of the queue, e.g. `fleaf`.
    pub device: String,
}

/// Whether `url` is one the `remote` source can scrape: `http://` (TLS is
/// not supported), with a host and an explicit port. The error is a
/// sentence for the config's diagnostics.
pub fn check_url(url: &str) -> Result<(), String> {
    let example = "e.g. \"http://198.18.4.2:9100/metrics\"";
    match url.split_once("://").map(|(scheme, _)| scheme) {
        Some("http") => {}
        Some("https") => {
            return Err(format!(
                "{url:?}: https is not supported; the remote source scrapes plain http:// only"
            ));
        }
        Some(other) => {
            return Err(format!(
                "{url:?}: scheme {other:?} is not supported; the remote source scrapes http:// only"
            ));
        }
        None => {
            return Err(format!(
                "{url:?} has no scheme; write http://HOST:PORT/PATH, {example}"
            ));
        }
    }
    let uri: Uri = url.parse().map_err(|e| {
        format!("{url:?} is not a URL ({e}); write http://HOST:PORT/PATH, {example}")
    })?;
    let authority = uri
        .authority()
        .ok_or_else(|| format!("{url:?} has no host; {example}"))?;
    if authority.as_str().contains('@') {
        return Err(format!("{url:?}: credentials in the URL are not supported"));
    }
    if authority.host().is_empty() {
        return Err(format!("{url:?} has no host; {example}"));
    }
    if authority.port_u16().is_none() {
        return Err(format!(
            "{url:?} has no port; node_exporter listens on 9100, e.g. \"http://{}:9100{}\"",
            authority.host(),
            uri.path()
        ));
    }
    Ok(())
}

/// The `remote` source over a fixed list of targets.
pub struct Remote {
    targets: Vec<Target>,
    /// For each target, its URL's index in the scraper.
    url_of: Vec<usize>,
    scraper: Scraper,
}

impl Remote {
    /// A source reading `targets`, in order; each poll waits at most
    /// `timeout` for any switch. No connection is made before the first
    /// poll, which opens them in the network namespace of the thread that
    /// polls.
    pub fn new(targets: Vec<Target>, timeout: Duration) -> Self {
        let mut urls: Vec<String> = Vec::new();
        let url_of = targets
            .iter()
            .map(|t| match urls.iter().position(|u| *u == t.url) {
                Some(index) => index,
                None => {
                    urls.push(t.url.clone());
                    urls.len() - 1
                }
            })
            .collect();
        Self {
            targets,
            url_of,
            scraper: Scraper::new(urls, &[BACKLOG, BYTES], timeout),
        }
    }
}

impl Source for Remote {
    fn name(&self) -> &'static str {
        NAME
    }

    fn poll(&mut self) -> Vec<Result<Reading, TelemetryError>> {
        let scraped = self.scraper.scrape();
        self.targets
            .iter()
            .zip(&self.url_of)
            .map(|(target, &url)| match &scraped[url] {
                Ok(answer) => read(&answer.series, target).map(|reading| Reading {
                    read_at: Some(answer.read_at),
                    ..reading
                }),
                Err(Failure::Unreachable(why)) => Err(TelemetryError::Unreachable {
                    source_name: NAME,
                    why: format!("{}: {why}", target.url),
                }),
                Err(Failure::Garbage(why)) => Err(garbage(target, why.clone())),
            })
            .collect()
    }
}

/// `target`'s reading from the series of its URL.
fn read(series: &[Series], target: &Target) -> Result<Reading, TelemetryError> {
    let queued = total(series, BACKLOG, target)?
        .ok_or_else(|| garbage(target, format!("no {BACKLOG} series for the device")))?;
    Ok(Reading {
        queued_bytes: queued,
        tx_bytes: total(series, BYTES, target)?,
        speed_bytes_per_s: None,
        read_at: None,
    })
}

/// The sum of metric `name` over the series of `target`'s device (see the
/// module's doc), `None` when it has none. Each value must be a finite,
/// non-negative number of bytes.
fn total(series: &[Series], name: &str, target: &Target) -> Result<Option<u64>, TelemetryError> {
    let mine: Vec<&Series> = series
        .iter()
        .filter(|s| s.name == name && label(s, "device") == Some(target.device.as_str()))
        .collect();
    for (i, a) in mine.iter().enumerate() {
        if mine[..i].iter().any(|b| same_labels(a, b)) {
            return Err(garbage(target, format!("{name} has a series twice")));
        }
    }
    let mut sum: u64 = 0;
    for s in &mine {
        let value = s.value;
        if !(value.is_finite() && value >= 0.0 && value < u64::MAX as f64) {
            return Err(garbage(
                target,
                format!("{name} is {value}, not a number of bytes"),
            ));
        }
        sum = sum.saturating_add(value.round() as u64);
    }
    Ok((!mine.is_empty()).then_some(sum))
}

fn label<'a>(series: &'a Series, name: &str) -> Option<&'a str> {
    series
        .labels
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

fn same_labels(a: &Series, b: &Series) -> bool {
    a.labels.len() == b.labels.len()
        && a.labels
            .iter()
            .all(|(n, v)| label(b, n) == Some(v.as_str()))
}

fn garbage(target: &Target, why: String) -> TelemetryError {
    TelemetryError::Garbage {
        source_name: NAME,
        what: format!("device {:?} at {}", target.device, target.url),
        why,
    }
}

#[cfg(test)]
mod tests;
