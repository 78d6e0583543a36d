//! `fabriclb check-config`: validation without touching the kernel. Warnings
//! go to stderr and leave the exit status 0: the daemon would run the config.

use std::path::PathBuf;

use fabriclb::config;

#[derive(clap::Args)]
pub struct CheckConfigArgs {
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

pub fn run(args: CheckConfigArgs) -> anyhow::Result<()> {
    let mut failed = 0;
    for file in &args.files {
        match config::load(file) {
            Ok(c) => {
                for warning in &c.warnings {
                    eprintln!("{warning}");
                }
                let warnings = match c.warnings.len() {
                    0 => String::new(),
                    1 => ", 1 warning".to_owned(),
                    n => format!(", {n} warnings"),
                };
                println!(
                    "{}: ok ({} groups, {} routes{warnings})",
                    file.display(),
                    c.groups.len(),
                    c.routes.len()
                );
            }
            Err(e) => {
                eprintln!("{e}");
                failed += 1;
            }
        }
    }
    anyhow::ensure!(
        failed == 0,
        "{failed} of {} config files invalid",
        args.files.len()
    );
    Ok(())
}
