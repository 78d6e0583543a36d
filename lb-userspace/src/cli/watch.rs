//! `fabriclb watch`: the running daemon's flow events as they happen,
//! over its control socket, filtered by group and flow; a line each, or
//! the daemon's JSON lines as they come.

use std::io::{BufRead, BufReader, Write};
use std::net::IpAddr;

use anyhow::{Context, Result, bail};
use fabriclb::config;
use fabriclb::daemon::control::{self, WATCH};
use fabriclb::daemon::flow_events::{Flow, WatchEvent, WatchLine};
use fabriclb::dataplane::pins::DEFAULT_INSTANCE;

use super::reload::{ControlArgs, connect};

#[derive(clap::Args)]
pub struct WatchArgs {
    /// The instance whose daemon is watched.
    #[arg(long, default_value = DEFAULT_INSTANCE)]
    instance: String,
    #[command(flatten)]
    control: ControlArgs,
    /// Only this group's events.
    #[arg(long)]
    group: Option<String>,
    /// Only the events of flows that match every word: `src ADDR[:PORT]`,
    /// `dst ADDR[:PORT]`, `qp N` (decimal or 0x), `udp`, `tcp`; e.g.
    /// 'dst 10.1.2.3:4791 qp 0x1a2b'. Events of no flow (next hops,
    /// drains) are left out.
    #[arg(long, value_name = "FILTER", value_parser = FlowFilter::parse)]
    flow: Option<FlowFilter>,
    /// The daemon's JSON lines, one event each, as they come.
    #[arg(long)]
    json: bool,
    /// Exit after this many events.
    #[arg(long, value_name = "N")]
    count: Option<u64>,
}

/// What `--flow` asks of a flow.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowFilter {
    protocol: Option<u8>,
    src: Option<(IpAddr, Option<u16>)>,
    dst: Option<(IpAddr, Option<u16>)>,
    qp: Option<u32>,
}

impl FlowFilter {
    pub fn parse(text: &str) -> std::result::Result<Self, String> {
        let mut filter = Self::default();
        let mut words = text.split_whitespace();
        while let Some(word) = words.next() {
            let mut value = || words.next().ok_or(format!("{word:?} needs a value"));
            match word {
                "udp" => filter.protocol = Some(17),
                "tcp" => filter.protocol = Some(6),
                "src" => filter.src = Some(endpoint(value()?)?),
                "dst" => filter.dst = Some(endpoint(value()?)?),
                "qp" => {
                    let qp = value()?;
                    let parsed = config::parse_number(qp);
                    filter.qp = Some(parsed.ok_or(format!("qp {qp:?} is not a number"))?);
                }
                _ => {
                    return Err(format!(
                        "unknown word {word:?} (words: src ADDR[:PORT], dst ADDR[:PORT], \
                         qp N, udp, tcp)"
                    ));
                }
            }
        }
        Ok(filter)
    }

    fn matches(&self, flow: &Flow) -> bool {
        let end = |want: Option<(IpAddr, Option<u16>)>, ip: IpAddr, port: u16| {
            want.is_none_or(|(w, p)| w == ip && p.is_none_or(|p| p == port))
        };
        self.protocol.is_none_or(|p| p == flow.protocol)
            && end(self.src, flow.src, flow.src_port)
            && end(self.dst, flow.dst, flow.dst_port)
            && self.qp.is_none_or(|qp| flow.qp == Some(qp))
    }
}

/// `10.0.0.1`, `10.0.0.1:4791`, `fe80::1` or `[fe80::1]:4791`.
fn endpoint(text: &str) -> std::result::Result<(IpAddr, Option<u16>), String> {
    if let Ok(ip) = text.parse() {
        return Ok((ip, None));
    }
    let address: std::net::SocketAddr = text
        .parse()
        .map_err(|_| format!("{text:?} is not an address or address:port"))?;
    Ok((address.ip(), Some(address.port())))
}

impl WatchArgs {
    fn wants(&self, event: &WatchEvent) -> bool {
        self.group.as_ref().is_none_or(|g| *g == event.group)
            && (self.flow.as_ref())
                .is_none_or(|filter| event.flow.as_ref().is_some_and(|f| filter.matches(f)))
    }
}

pub fn run(args: WatchArgs) -> Result<()> {
    let (mut stream, socket) = connect(&args.control, &args.instance)?;
    stream.write_all(WATCH.as_bytes())?;
    let mut lines = BufReader::new(stream).lines();
    let first = lines
        .next()
        .transpose()?
        .with_context(|| format!("the daemon at {} hung up", socket.display()))?;
    match control::decode(&first) {
        // Said once subscribed: what comes after it is all seen.
        Some(Ok(_)) => eprintln!("watching {}", socket.display()),
        Some(Err(why)) => bail!("the daemon at {} refused: {why}", socket.display()),
        None => bail!("the daemon at {} answered {first:?}", socket.display()),
    }
    let mut shown = 0;
    let mut out = std::io::stdout().lock();
    for line in lines {
        let line = line.with_context(|| format!("reading from {}", socket.display()))?;
        match serde_json::from_str::<WatchLine>(&line) {
            Ok(WatchLine::Event(event)) if args.wants(&event) => {
                if args.json {
                    writeln!(out, "{line}")?;
                } else {
                    writeln!(out, "{event}")?;
                }
                out.flush()?;
                shown += 1;
                if args.count == Some(shown) {
                    return Ok(());
                }
            }
            Ok(WatchLine::Event(_)) => {}
            Ok(WatchLine::Lost { lost }) => {
                eprintln!("{lost} events lost: this client read slower than they came");
            }
            Err(e) => bail!("the daemon sent {line:?}: {e}"),
        }
    }
    bail!("the daemon at {} stopped", socket.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow() -> Flow {
        Flow {
            protocol: 17,
            src: [10, 0, 0, 1].into(),
            dst: [10, 1, 2, 3].into(),
            src_port: 49152,
            dst_port: 4791,
            qp: Some(0x1a2b),
        }
    }

    #[test]
    fn a_filter_holds_when_every_word_does() {
        let filter = FlowFilter::parse("udp dst 10.1.2.3:4791 qp 0x1a2b").expect("parses");
        assert!(filter.matches(&flow()));
        for other in ["tcp", "dst 10.1.2.3:4792", "qp 6700", "src 10.0.0.2"] {
            let filter = FlowFilter::parse(other).expect("parses");
            assert!(!filter.matches(&flow()), "{other}");
        }
        assert!(
            FlowFilter::parse("src 10.0.0.1")
                .expect("parses")
                .matches(&flow())
        );
    }

    #[test]
    fn a_bad_filter_says_which_word() {
        assert_eq!(
            FlowFilter::parse("dport 4791"),
            Err(
                "unknown word \"dport\" (words: src ADDR[:PORT], dst ADDR[:PORT], qp N, \
                 udp, tcp)"
                    .into()
            )
        );
        assert_eq!(FlowFilter::parse("qp"), Err("\"qp\" needs a value".into()));
        assert_eq!(
            FlowFilter::parse("dst 10.1.2"),
            Err("\"10.1.2\" is not an address or address:port".into())
        );
    }
}
