//! `fabriclb explain`: what the data plane does with a packet, described
//! or captured, given the maps as they are now.

use std::path::PathBuf;

use anyhow::Context as _;
use fabriclb::config::Config;
use fabriclb::dataplane::holder;
use fabriclb::inspect::interfaces::Interfaces;
use fabriclb::inspect::maps::InspectError;
use fabriclb::inspect::names::Names;
use fabriclb::inspect::offline::Offline;
use fabriclb::inspect::view::MapView;
use fabriclb::inspect::{self, describe::Description, explain};

use super::names::NameArgs;
use super::pins::PinArgs;

#[derive(clap::Args)]
pub struct ExplainArgs {
    #[command(flatten)]
    pins: PinArgs,
    #[command(flatten)]
    names: NameArgs,
    /// Explain every frame of this capture (classic pcap, Ethernet).
    #[arg(long, conflicts_with = "packet")]
    pcap: Option<PathBuf>,
    /// The interface the packet comes in on: its MACs decide whether the
    /// frame is for this box (a described packet is addressed to the
    /// port), and overrides may name it (without it, the MAC is not
    /// checked and those overrides are taken as not matching, with notes).
    #[arg(long)]
    ingress: Option<String>,
    /// One JSON document on stdout instead of text: `{"notes", "frames":
    /// [{"bytes", "verdict", "action", "packet", "route", "group", "hash",
    /// "pinned", "choice", "next_hop", "lines"}]}` (see the README).
    #[arg(long)]
    json: bool,
    /// Explain from the tables the --config makes, built in memory, not
    /// from an instance's maps: what the daemon would do with that config
    /// before it is deployed, on any machine and without root (also what
    /// `explain --config` does when no instance is pinned).
    #[arg(long, requires = "config", conflicts_with = "sonic")]
    offline: bool,
    /// Whose per-CPU flowlet state, spray position and loads to use
    /// (default: the CPU holding the flow's latest flowlet state, else 0).
    #[arg(long)]
    cpu: Option<usize>,
    /// The packet, after every option and quoted for the shell (which
    /// reads `->` as a redirection), e.g.
    /// 'udp 10.1.1.2:49152 -> 10.1.2.3:4791 qp 0x1a2b'.
    #[arg(
        required_unless_present = "pcap",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    packet: Vec<String>,
}

pub fn run(args: ExplainArgs) -> anyhow::Result<()> {
    let state = State::open(&args)?;
    let maps = state.view();
    let ingress = match &args.ingress {
        None => 0,
        Some(name) => state.ifindex(name)?,
    };
    let frames = match &args.pcap {
        Some(path) => {
            let file = std::fs::read(path).with_context(|| path.display().to_string())?;
            inspect::pcap::frames(&file).with_context(|| path.display().to_string())?
        }
        None => {
            // Everything after the packet's first word is the packet's:
            // an option there would be read as part of it.
            if let Some(option) = args.packet.iter().find(|w| w.starts_with("--")) {
                anyhow::bail!(
                    "{option} after the packet: options go before it \
                     (fabriclb explain [OPTIONS] PACKET)"
                );
            }
            let described = Description::parse(&args.packet.join(" "))?;
            // A described packet is addressed to the port it comes in on.
            match maps.port_macs(ingress)? {
                Some(port) => vec![described.frame_to(port.own)],
                None => vec![described.frame()],
            }
        }
    };
    let names = state.names(&args.names)?;
    let mut explained = Vec::new();
    for frame in &frames {
        let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)?;
        let now = now.tv_sec() as u64 * 1_000_000_000 + now.tv_nsec() as u64;
        explained.push(explain::explain(maps, frame, ingress, args.cpu, now)?);
    }
    if args.json {
        let report = explain::json::Report {
            notes: names.notes.clone(),
            frames: (explained.iter())
                .map(|e| explain::json::frame(e, &names))
                .collect(),
        };
        println!("{}", serde_json::to_string(&report)?);
        return Ok(());
    }
    for note in &names.notes {
        println!("note: {note}");
    }
    for (i, explanation) in explained.iter().enumerate() {
        if args.pcap.is_some() {
            println!("{}frame {}:", if i > 0 { "\n" } else { "" }, i + 1);
        }
        print!("{}", explain::render(explanation, &names));
    }
    Ok(())
}

/// What is explained from: an instance's maps, or a config's tables.
enum State {
    Pinned {
        maps: Box<inspect::maps::MapSet>,
        /// The daemon's ports, which the maps' ifindexes name.
        interfaces: Interfaces,
    },
    Offline {
        offline: Box<Offline>,
        config: Box<Config>,
        /// Why no instance was read, when that was not asked for.
        why: Option<String>,
    },
}

impl State {
    /// The instance's maps; the config's tables with `--offline`, or
    /// when no instance is pinned and a config is given.
    fn open(args: &ExplainArgs) -> anyhow::Result<Self> {
        let offline = |why| -> anyhow::Result<Self> {
            let config = args
                .names
                .file_config()?
                .context("--offline needs --config")?;
            let offline = Offline::build(&config).context("the config's tables")?;
            Ok(Self::Offline {
                offline: Box::new(offline),
                config: Box::new(config),
                why,
            })
        };
        if args.offline {
            return offline(None);
        }
        let pins = args.pins.dir();
        match inspect::maps::MapSet::from_pins(&pins) {
            Ok(maps) => Ok(Self::Pinned {
                maps: Box::new(maps),
                interfaces: Interfaces::of_process(holder(pins.dir())),
            }),
            Err(e @ InspectError::NotPinned { .. }) if args.names.has_config() => {
                offline(Some(e.to_string()))
            }
            Err(e) => Err(e.into()),
        }
    }

    fn view(&self) -> &dyn MapView {
        match self {
            Self::Pinned { maps, .. } => maps.as_ref(),
            Self::Offline { offline, .. } => offline.as_ref(),
        }
    }

    /// Interface `name`'s ifindex where the daemon runs, or in the
    /// config's tables.
    fn ifindex(&self, name: &str) -> anyhow::Result<u32> {
        match self {
            Self::Pinned { interfaces, .. } => interfaces.index(name).with_context(|| {
                format!("--ingress {name:?}: no such interface where the daemon runs")
            }),
            Self::Offline { offline, .. } => offline
                .ifindex(name)
                .with_context(|| format!("--ingress {name:?}: the config names no such interface")),
        }
    }

    /// The names of groups and next hops, and the notes to print first.
    fn names(&self, args: &NameArgs) -> anyhow::Result<Names> {
        match self {
            Self::Pinned { maps, interfaces } => Ok(args
                .names(maps.as_ref())?
                .with_interfaces(interfaces.clone())),
            Self::Offline {
                offline,
                config,
                why,
            } => {
                let mut names = Names::from_config(config, offline.as_ref())?;
                let mut notes: Vec<String> = why.iter().cloned().collect();
                notes.extend(offline.assumptions());
                notes.append(&mut names.notes);
                names.notes = notes;
                Ok(names.with_interfaces(offline.interfaces()))
            }
        }
    }
}
