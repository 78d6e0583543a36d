//! `fabriclb testbed`: namespace fabrics for trying fabriclb out.

use anyhow::Context;
use clap::Subcommand;
use fabriclb::testbed;

#[derive(Subcommand)]
pub enum TestbedCommand {
    /// Build a testbed and leave it running; prints how to use it.
    Up {
        #[command(flatten)]
        shape: ShapeArgs,
        /// Build a fabric of this many leaves (2-16), every one a switch
        /// fabriclb runs on, each linked to every spine, `--hosts` per
        /// leaf, routes per `--routing`; each leaf's config is written to
        /// `--config-dir`. Without it, the single-leaf testbed.
        #[arg(long, conflicts_with_all = ["spine_rate_mbit", "spine_rates"])]
        leaves: Option<usize>,
        /// With `--leaves`: each spine port's rate toward each leaf (TBF),
        /// in Mbit/s: a rate for every port and `sJ:lK=RATE` for spine J's
        /// port toward leaf K, e.g. 200,s2:l3=50.
        #[arg(long, requires = "leaves")]
        link_rates: Option<testbed::fabric::LinkRates>,
        /// With `--leaves`: where the leaves' configs go, as NAME-lK.toml.
        #[arg(long, requires = "leaves", default_value = ".")]
        config_dir: std::path::PathBuf,
    },
    /// Remove a testbed built by `up`.
    Down {
        #[arg(long, default_value = DEFAULT_TESTBED)]
        name: String,
    },
    /// List a testbed's namespaces.
    Status {
        #[arg(long, default_value = DEFAULT_TESTBED)]
        name: String,
    },
    /// Build a testbed, run a ring all-reduce through fabriclb once per
    /// hashing mode, print per-spine shares, MMR and out-of-order counts,
    /// tear down. With `--scenario`, run that scenario instead (on the
    /// shape it fixes; only `--name` applies).
    Demo {
        #[command(flatten)]
        shape: ShapeArgs,
        /// Messages per connection.
        #[arg(long, default_value_t = 64)]
        messages: u32,
        /// slow-spine, slow-spine-lossless, bgp-slow-spine, spine-slowdown,
        /// cross-traffic, link-down, restart, bgp-drain, sonic, te-override,
        /// soak, fabric-slow-link, fabric-bgp, fabric-herd or fabric-matrix.
        #[arg(long)]
        scenario: Option<testbed::scenario::Name>,
        /// How long `--scenario soak` runs, in seconds.
        #[arg(long, default_value_t = testbed::scenario::soak::SECONDS, requires = "scenario")]
        seconds: u64,
        /// Write the scenario's report as JSON to this file.
        #[arg(long, requires = "scenario")]
        json: Option<std::path::PathBuf>,
    },
}

const DEFAULT_TESTBED: &str = "fabriclb";

#[derive(clap::Args)]
pub struct ShapeArgs {
    #[arg(long, default_value = DEFAULT_TESTBED)]
    name: String,
    /// Sender hosts (and as many receivers).
    #[arg(long, default_value_t = 4)]
    hosts: usize,
    #[arg(long, default_value_t = 4)]
    spines: usize,
    /// Rate-limit every spine's link to the far leaf (TBF), in Mbit/s.
    #[arg(long, conflicts_with = "spine_rates")]
    spine_rate_mbit: Option<u32>,
    /// Rate-limit spine j's link to the far leaf to the j-th rate, in
    /// Mbit/s (e.g. 200,200,200,50): one per spine.
    #[arg(long, value_delimiter = ',')]
    spine_rates: Vec<u32>,
    /// How the rate-limited links queue: lossy (tail drop past 20 ms and 64
    /// KB at the link's rate: 23 ms at 200 Mbit/s, 72 ms at 10) or
    /// lossless (a queue no run fills, as a PFC fabric backs up instead).
    #[arg(long, value_enum, default_value_t = QueueArg::Lossy)]
    queues: QueueArg,
    /// Where the fabric's routes come from: static routes, or BGP (FRR's
    /// bgpd on every leaf and spine; eBGP, the spines in one AS, multipath;
    /// with `--leaves`, each leaf in an AS of its own and its fabriclb
    /// following the kernel's BGP routes).
    #[arg(long, value_enum, default_value_t = RoutingArg::Static)]
    routing: RoutingArg,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum RoutingArg {
    Static,
    Bgp,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum QueueArg {
    Lossy,
    Lossless,
}

impl ShapeArgs {
    fn shape(&self) -> testbed::Shape {
        testbed::Shape {
            hosts: self.hosts,
            spines: self.spines,
            spine_rates_mbit: match self.spine_rate_mbit {
                Some(all) => vec![all],
                None => self.spine_rates.clone(),
            },
            queues: match self.queues {
                QueueArg::Lossy => testbed::Queues::Lossy,
                QueueArg::Lossless => testbed::Queues::Lossless,
            },
            routing: match self.routing {
                RoutingArg::Static => testbed::Routing::Static,
                RoutingArg::Bgp => testbed::Routing::Bgp,
            },
        }
    }
}

/// `testbed up --leaves`: the fabric, each leaf's config written, what
/// to run said; left in place for `testbed down`.
fn fabric_up(
    shape: &ShapeArgs,
    leaves: usize,
    rates: testbed::fabric::LinkRates,
    config_dir: &std::path::Path,
) -> anyhow::Result<()> {
    let fabric = testbed::fabric::Fabric::up(
        &shape.name,
        testbed::fabric::FabricShape {
            leaves,
            spines: shape.spines,
            hosts: shape.hosts,
            rates,
            queues: shape.shape().queues,
            routing: shape.shape().routing,
        },
    )?;
    eprintln!(
        "fabric {} is up: {} namespaces; run fabriclb on every leaf:",
        shape.name,
        testbed::namespaces(&shape.name)?.len()
    );
    for k in 1..=leaves {
        let path = config_dir.join(format!("{}-l{k}.toml", shape.name));
        std::fs::write(
            &path,
            fabric.leaf_config(k, "", testbed::fabric::Sampling::FABRIC),
        )
        .with_context(|| format!("writing {}", path.display()))?;
        // One host, one bpffs: each leaf's daemon pins under its own name.
        eprintln!(
            "  ip netns exec {} fabriclb run --config {} --instance {}",
            fabric.ns(&format!("l{k}")),
            path.display(),
            fabric.ns(&format!("l{k}"))
        );
    }
    fabric.keep();
    Ok(())
}

pub fn run(command: TestbedCommand) -> anyhow::Result<()> {
    match command {
        TestbedCommand::Up {
            shape,
            leaves: Some(leaves),
            link_rates,
            config_dir,
        } => fabric_up(&shape, leaves, link_rates.unwrap_or_default(), &config_dir),
        TestbedCommand::Up { shape, .. } => {
            let bed = testbed::Testbed::up(&shape.name, shape.shape())?;
            // The config alone on stdout, so `testbed up > leaf.toml` saves
            // it; what to do with it on stderr.
            eprintln!(
                "testbed {} is up: {} namespaces; the leaf's config for fabriclb follows",
                shape.name,
                testbed::namespaces(&shape.name)?.len()
            );
            print!("{}", bed.leaf_config(""));
            eprintln!(
                "save it (fabriclb testbed up > leaf.toml), then run: \
                 ip netns exec {} fabriclb run --config leaf.toml",
                bed.ns("leaf")
            );
            bed.keep();
            Ok(())
        }
        TestbedCommand::Down { name } => {
            let removed = testbed::remove_namespaces(&name)?;
            println!("removed {removed} namespaces of testbed {name}");
            Ok(())
        }
        TestbedCommand::Status { name } => {
            let namespaces = testbed::namespaces(&name)?;
            if namespaces.is_empty() {
                println!("testbed {name} is down");
            }
            for ns in namespaces {
                println!("{ns}");
            }
            Ok(())
        }
        TestbedCommand::Demo {
            shape,
            messages,
            scenario,
            seconds,
            json,
        } => match scenario {
            Some(testbed::scenario::Name::Soak) => {
                testbed::scenario::soak::run(&shape.name, seconds, json.as_deref())
            }
            Some(scenario) => testbed::scenario::run(&shape.name, scenario, json.as_deref()),
            None => testbed::demo::run(&shape.name, shape.shape(), messages),
        },
    }
}
