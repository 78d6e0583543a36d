use std::process::ExitCode;

use clap::Parser;

mod cli;

fn main() -> ExitCode {
    fabriclb::logging::init();
    match cli::Cli::parse().run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fabriclb: {e:#}");
            ExitCode::from(cli::exit_status(&e))
        }
    }
}
