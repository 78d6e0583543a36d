//! `fabriclb simulate`: a capture or a described collective through a
//! config's choice, per mode, with no switch and no root.

use std::path::PathBuf;

use anyhow::Context as _;
use fabriclb::config::{self, Mode};
use fabriclb::inspect::{offline::Offline, pcap};
use fabriclb::simulate::{
    self, Arriving, PathRates,
    collective::{CollectiveSpec, KEYS, rate},
    report,
};

#[derive(clap::Args)]
pub struct SimulateArgs {
    /// The config whose tables the traffic goes through.
    #[arg(long)]
    config: PathBuf,
    /// A capture (classic pcap, Ethernet): its frames at their capture
    /// times.
    #[arg(
        long,
        conflicts_with = "collective",
        required_unless_present = "collective"
    )]
    pcap: Option<PathBuf>,
    /// A collective, as comma-separated KEY=VALUEs, e.g.
    /// pattern=ring,ranks=16,qps=4,message=256KiB,messages=40,rate=100Gbit
    #[arg(long, long_help = format!("A collective, as comma-separated KEY=VALUEs; keys (default): {KEYS}"))]
    collective: Option<String>,
    /// Modes to run the traffic in, every group set to each in turn
    /// (default: ecmp, flowlet and per-packet).
    #[arg(long = "mode", value_parser = mode)]
    modes: Vec<Mode>,
    /// Each next hop's link rate, e.g. 400Gbit (default: the collective's
    /// rate, 100Gbit for a capture); IFACE=RATE, repeated, for the next
    /// hops on one interface (a what-if of a slow link).
    #[arg(long = "path-rate")]
    path_rates: Vec<String>,
    /// The interface every frame comes in on, one of the config's: for
    /// overrides that match on it (without it they do not match).
    #[arg(long)]
    ingress: Option<String>,
    /// One JSON document on stdout instead of the table: `{"simulation",
    /// "modes": [{"mode", "sent", "forwarded", "paths": [{"group",
    /// "interface", "next_hop", "packets", "bytes", "share"}], "busiest_over_mean",
    /// "flowlet_moves", "reorders", ...}]}` (see the README).
    #[arg(long)]
    json: bool,
}

/// `--path-rate`s: `RATE` for every next hop, `IFACE=RATE` for one
/// interface's.
fn path_rates(texts: &[String], default: u64) -> anyhow::Result<PathRates> {
    let mut rates = PathRates {
        default,
        ..PathRates::default()
    };
    for text in texts {
        let rate = |r: &str| rate(r).with_context(|| format!("--path-rate {text:?}"));
        match text.split_once('=') {
            Some((interface, r)) => {
                rates.by_interface.insert(interface.to_owned(), rate(r)?);
            }
            None => rates.default = rate(text)?,
        }
    }
    Ok(rates)
}

fn mode(text: &str) -> Result<Mode, String> {
    (Mode::NAMES.iter())
        .find(|(name, _)| *name == text)
        .map(|(_, mode)| *mode)
        .ok_or_else(|| format!("unknown mode {text:?} (valid: ecmp, flowlet, per-packet)"))
}

pub fn run(args: SimulateArgs) -> anyhow::Result<()> {
    let config = config::load(&args.config).context("the config")?;
    let (frames, traffic, default_rate) = match (&args.pcap, &args.collective) {
        (Some(path), _) => {
            let file = std::fs::read(path).with_context(|| path.display().to_string())?;
            let records = pcap::records(&file).with_context(|| path.display().to_string())?;
            let start = records.first().map_or(0, |r| r.at_ns);
            let frames: Vec<Arriving> = (records.into_iter())
                .map(|r| Arriving {
                    at_ns: r.at_ns.saturating_sub(start),
                    frame: r.frame,
                })
                .collect();
            anyhow::ensure!(
                frames.windows(2).all(|w| w[0].at_ns <= w[1].at_ns),
                "{}: frames out of time order (sort it with `reordercap`)",
                path.display()
            );
            (frames, path.display().to_string(), 100_000_000_000)
        }
        (None, Some(text)) => {
            let spec: CollectiveSpec = text.parse().context("--collective")?;
            (spec.frames(), spec.describe(), spec.rate_bits_per_s)
        }
        (None, None) => anyhow::bail!("give --pcap FILE or --collective SPEC"),
    };
    let rates = path_rates(&args.path_rates, default_rate)?;
    let modes = match args.modes.is_empty() {
        true => Mode::NAMES.map(|(_, mode)| mode).to_vec(),
        false => args.modes.clone(),
    };
    let runs = simulate::run_modes(&config, &modes, &frames, &rates, args.ingress.as_deref())?;
    let assumed = simulate::assumed(&rates, args.ingress.as_deref(), &Offline::build(&config)?);
    if args.json {
        let config_name = args.config.display().to_string();
        let report = report::json(&config_name, &traffic, &rates, &assumed, &runs);
        println!("{}", serde_json::to_string(&report)?);
        return Ok(());
    }
    println!("traffic: {traffic}");
    for note in &assumed {
        println!("assumed: {note}");
    }
    print!("{}", report::table(&runs));
    Ok(())
}
