use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use fabriclb::{config, daemon, testbed};

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
    },
    /// Validate config files without touching the kernel.
    CheckConfig {
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// A fabric in network namespaces, for trying fabriclb out.
    Testbed {
        #[command(subcommand)]
        command: TestbedCommand,
    },
}

#[derive(Subcommand)]
enum TestbedCommand {
    /// Build the testbed, run fabriclb on its leaf, send UDP flows across
    /// it and print where they went; tear everything down.
    Demo {
        #[arg(long, default_value_t = 4)]
        spines: usize,
        #[arg(long, default_value_t = 64)]
        flows: u16,
        #[arg(long, default_value_t = 64)]
        packets_per_flow: u32,
    },
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
        } => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(daemon::run(daemon::Options {
                config,
                metrics_file,
                metrics_interval: Duration::from_millis(metrics_interval_ms.max(1)),
                refresh_interval: Duration::from_millis(refresh_interval_ms.max(1)),
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
        Command::Testbed {
            command:
                TestbedCommand::Demo {
                    spines,
                    flows,
                    packets_per_flow,
                },
        } => demo(spines, flows, packets_per_flow),
    }
}

fn demo(spines: usize, flows: u16, packets_per_flow: u32) -> anyhow::Result<()> {
    use anyhow::Context;
    let exe = std::env::current_exe().context("locating the fabriclb binary")?;
    let workdir = std::env::temp_dir().join(format!("fabriclb-demo-{}", std::process::id()));
    std::fs::create_dir_all(&workdir)?;
    println!("building a testbed: h1 -> leaf (fabriclb, XDP) -> {spines} spines -> h2");
    let mut bed = testbed::Testbed::up("fldemo", spines)?;
    println!(
        "sending {flows} UDP flows x {packets_per_flow} packets from h1 to {}",
        testbed::FAR_HOST
    );
    let report = testbed::run_traffic(&bed, &exe, &workdir, flows, packets_per_flow);
    bed.down();
    let _ = std::fs::remove_dir_all(&workdir);
    let report = report?;
    println!();
    println!("{:<18} {:>9} {:>7}", "next hop", "packets", "share");
    for (label, packets) in &report.nexthops {
        let share = 100.0 * *packets as f64 / report.forwarded.max(1) as f64;
        println!("{label:<18} {packets:>9} {share:>6.1}%");
    }
    let mean = report.forwarded as f64 / report.nexthops.len().max(1) as f64;
    let busiest = report.nexthops.iter().map(|(_, p)| *p).max().unwrap_or(0) as f64;
    println!();
    println!(
        "sent {} | forwarded by XDP {} | passed to kernel {} | arrived at h2 {}",
        report.sent, report.forwarded, report.passed_to_kernel, report.received
    );
    println!(
        "max/mean load (MMR) {:.3} over {flows} flows",
        busiest / mean.max(1.0)
    );
    let ttls: Vec<String> = report
        .ttls
        .iter()
        .map(|(ttl, n)| format!("{n} with TTL {ttl}"))
        .collect();
    println!(
        "at h2: {} (sent with TTL {}; leaf and spine each take one)",
        ttls.join(", "),
        testbed::SENT_TTL
    );
    anyhow::ensure!(
        report.received == report.sent,
        "{} of {} packets lost",
        report.sent - report.received,
        report.sent
    );
    Ok(())
}
