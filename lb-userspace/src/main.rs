use std::io::IsTerminal as _;
use std::process::ExitCode;

use clap::Parser;

mod cli;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Colours for a person at a terminal only: in a file, a pipe or
        // the journal they are escape codes in the way of grep.
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    match cli::Cli::parse().run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fabriclb: {e:#}");
            ExitCode::from(cli::exit_status(&e))
        }
    }
}
