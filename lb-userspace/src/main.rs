use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use fabriclb::{config, daemon, testbed, traffic};

/// fabriclb: an XDP load balancer for AI-training fabrics.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Load the XDP program, program it from the config and forward until
    /// SIGINT or SIGTERM.
    Run {
        #[arg(long, short)]
        config: PathBuf,
        /// Write a Prometheus text-format snapshot of the counters here.
        #[arg(long)]
        metrics_file: Option<PathBuf>,
        /// How often the metrics file is rewritten, in milliseconds.
        #[arg(long, default_value_t = 1000)]
        metrics_interval_ms: u64,
        /// How often links and neighbours are re-read, in milliseconds.
        #[arg(long, default_value_t = 1000)]
        refresh_interval_ms: u64,
        /// Reload only on SIGHUP, not also when the config file changes.
        #[arg(long)]
        no_watch: bool,
    },
    /// Validate config files without touching the kernel.
    CheckConfig {
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// A leaf-spine fabric in network namespaces, for trying fabriclb out.
    Testbed {
        #[command(subcommand)]
        command: TestbedCommand,
    },
    /// Send RoCEv2 traffic shaped like a collective (ring all-reduce or
    /// all-to-all) through an AF_PACKET TX ring.
    Gen(GenArgs),
}

#[derive(Subcommand)]
enum TestbedCommand {
    /// Build a testbed and leave it running; prints how to use it.
    Up {
        #[command(flatten)]
        shape: ShapeArgs,
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
    /// tear down.
    Demo {
        #[command(flatten)]
        shape: ShapeArgs,
        /// Messages per connection.
        #[arg(long, default_value_t = 64)]
        messages: u32,
    },
}

const DEFAULT_TESTBED: &str = "fabriclb";

#[derive(clap::Args)]
struct ShapeArgs {
    #[arg(long, default_value = DEFAULT_TESTBED)]
    name: String,
    /// Sender hosts (and as many receivers).
    #[arg(long, default_value_t = 4)]
    hosts: usize,
    #[arg(long, default_value_t = 4)]
    spines: usize,
    /// Rate-limit each spine's link to the far leaf (TBF), in Mbit/s.
    #[arg(long)]
    spine_rate_mbit: Option<u32>,
}

impl ShapeArgs {
    fn shape(&self) -> testbed::Shape {
        testbed::Shape {
            hosts: self.hosts,
            spines: self.spines,
            spine_rate_mbit: self.spine_rate_mbit,
        }
    }
}

/// Sends RoCEv2 traffic shaped like a collective from this host.
#[derive(clap::Args)]
struct GenArgs {
    /// Interface to send from (in the current network namespace).
    #[arg(long)]
    interface: String,
    /// The first hop; its MAC comes from the neighbour table.
    #[arg(long)]
    gateway: std::net::Ipv4Addr,
    #[arg(long, default_value = "ring")]
    pattern: traffic::Pattern,
    /// Receive address of every rank, in rank order.
    #[arg(long, required = true, value_delimiter = ',')]
    ranks: Vec<std::net::Ipv4Addr>,
    /// This host's rank.
    #[arg(long)]
    rank: usize,
    #[arg(long, default_value_t = 16)]
    qps: u32,
    #[arg(long, default_value_t = 65536)]
    message_bytes: u32,
    #[arg(long, default_value_t = 4096)]
    mtu: u32,
    /// Messages per connection.
    #[arg(long, default_value_t = 100)]
    messages: u32,
    /// Give every QP its own UDP source port (default: one per connection).
    #[arg(long)]
    port_per_qp: bool,
    /// Single-packet WRITE ONLY messages sent after each message, same QP.
    #[arg(long, default_value_t = 0)]
    small_messages: u32,
    /// Idle gap after each round of messages, in microseconds.
    #[arg(long, default_value_t = 0)]
    gap_us: u64,
    /// Target packets per second (default: as fast as possible).
    #[arg(long)]
    rate_pps: Option<u64>,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fabriclb: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Run {
            config,
            metrics_file,
            metrics_interval_ms,
            refresh_interval_ms,
            no_watch,
        } => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(daemon::run(daemon::Options {
                config,
                metrics_file,
                metrics_interval: Duration::from_millis(metrics_interval_ms.max(1)),
                refresh_interval: Duration::from_millis(refresh_interval_ms.max(1)),
                watch_config: !no_watch,
            }))
        }
        Command::CheckConfig { files } => {
            let mut failed = 0;
            for file in &files {
                match config::load(file) {
                    Ok(c) => println!(
                        "{}: ok ({} groups, {} routes)",
                        file.display(),
                        c.groups.len(),
                        c.routes.len()
                    ),
                    Err(e) => {
                        eprintln!("{e}");
                        failed += 1;
                    }
                }
            }
            anyhow::ensure!(
                failed == 0,
                "{failed} of {} config files invalid",
                files.len()
            );
            Ok(())
        }
        Command::Testbed { command } => testbed_command(command),
        Command::Gen(args) => generate(args),
    }
}

fn testbed_command(command: TestbedCommand) -> anyhow::Result<()> {
    match command {
        TestbedCommand::Up { shape } => {
            let bed = testbed::Testbed::up(&shape.name, shape.shape())?;
            println!(
                "testbed {} is up: {} namespaces",
                shape.name,
                testbed::namespaces(&shape.name)?.len()
            );
            println!("leaf config for fabriclb:\n\n{}", bed.leaf_config(""));
            println!(
                "run it with: ip netns exec {} fabriclb run --config LEAF.toml",
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
        TestbedCommand::Demo { shape, messages } => demo(&shape, messages),
    }
}

fn generate(args: GenArgs) -> anyhow::Result<()> {
    let sender = traffic::resolve_sender(&args.interface, args.gateway)?;
    let workload = traffic::Workload {
        pattern: args.pattern,
        ranks: args.ranks,
        rank: args.rank,
        qps_per_connection: args.qps,
        message_bytes: args.message_bytes,
        mtu: args.mtu,
        messages: args.messages,
        source_port_per_qp: args.port_per_qp,
        small_messages: args.small_messages,
    };
    anyhow::ensure!(
        workload.rank < workload.ranks.len(),
        "rank {} out of {} ranks",
        workload.rank,
        workload.ranks.len()
    );
    let pace = traffic::Pace {
        rate_pps: args.rate_pps,
        gap: std::time::Duration::from_micros(args.gap_us),
    };
    let report = traffic::send(
        &args.interface,
        traffic::Generator::new(workload, sender),
        pace,
    )?;
    println!(
        "sent {} packets, {} bytes in {:.3} s",
        report.packets,
        report.bytes,
        report.elapsed.as_secs_f64()
    );
    Ok(())
}

fn demo(shape: &ShapeArgs, messages: u32) -> anyhow::Result<()> {
    use anyhow::Context;
    let exe = std::env::current_exe().context("locating the fabriclb binary")?;
    let workdir = std::env::temp_dir().join(format!("fabriclb-demo-{}", std::process::id()));
    std::fs::create_dir_all(&workdir)?;
    let s = shape.shape();
    println!(
        "testbed: {} hosts -> leaf (fabriclb, XDP) -> {} spines -> far leaf -> {} receivers",
        s.hosts, s.spines, s.hosts
    );
    testbed::tear_down_on_signal(&shape.name)?;
    let bed = testbed::Testbed::up(&shape.name, s)?;
    let flowlet = format!("mode = \"flowlet\"\n{}", testbed::FIVE_TUPLE);
    let modes = [
        ("ecmp, five-tuple", testbed::FIVE_TUPLE.to_owned()),
        ("ecmp + dest QP", String::new()),
        ("flowlet, five-tuple", flowlet),
        ("per-packet", "mode = \"per-packet\"".to_owned()),
        (
            "per-packet, spray all",
            "mode = \"per-packet\"\nspray = \"all\"".to_owned(),
        ),
    ];
    println!(
        "workload: ring all-reduce, {} ranks, 4 QPs per connection with a UDP source port each, \
         {messages} messages of 64 KiB per connection, each followed by 2 single-packet WRITEs; \
         1 ms between rounds; {} B RoCE MTU\n",
        s.hosts,
        testbed::ROCE_MTU
    );
    let mut header = format!("{:<22}", "mode");
    for j in 1..=s.spines {
        header.push_str(&format!(" {:>6}", format!("s{j}")));
    }
    println!(
        "{header} {:>6} {:>7} {:>7} {:>7} {:>8} {:>9} {:>10}",
        "MMR", "sprayed", "moves", "sent", "received", "reordered", "in-message"
    );
    let mut result = Ok(());
    for (mode, group) in modes {
        let collective = testbed::Collective {
            pattern: traffic::Pattern::Ring,
            qps_per_connection: 4,
            message_bytes: 65536,
            mtu: testbed::ROCE_MTU,
            messages,
            // Gaps between rounds of messages, as collectives have: what
            // lets flowlets move.
            pace: traffic::Pace {
                rate_pps: None,
                gap: std::time::Duration::from_millis(1),
            },
            source_port_per_qp: true,
            small_messages: 2,
            senders: s.hosts,
            leaf: testbed::Leaf::Fabriclb { group },
        };
        match testbed::run_collective(&bed, &exe, &workdir, &collective) {
            Ok(report) => {
                let total: u64 = report.leaf.spines.iter().map(|n| n.bytes).sum();
                let mut line = format!("{mode:<22}");
                for spine in &report.leaf.spines {
                    line.push_str(&format!(
                        " {:>5.1}%",
                        100.0 * spine.bytes as f64 / total.max(1) as f64
                    ));
                }
                println!(
                    "{line} {:>6.3} {:>7} {:>7} {:>7} {:>8} {:>9} {:>10}",
                    report.leaf.byte_mmr(),
                    report.leaf.sprayed,
                    report.leaf.flowlet_moves,
                    report.sent_packets,
                    report.received.packets,
                    report.received.out_of_order,
                    report.received.message_out_of_order
                );
            }
            Err(e) => {
                result = Err(e.context(format!("mode {mode}")));
                break;
            }
        }
    }
    drop(bed);
    let _ = std::fs::remove_dir_all(&workdir);
    println!(
        "\nshares are of bytes per spine as fabriclb counted them; MMR = busiest spine over the mean; \
         reordered = packets out of their QP's PSN order at the receivers (single-packet messages \
         may overtake each other when sprayed); in-message = MIDDLE/LAST packets that did not \
         follow their message's previous packet"
    );
    result
}
