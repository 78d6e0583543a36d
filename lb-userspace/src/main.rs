use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use fabriclb::{config, daemon};

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
    }
}
