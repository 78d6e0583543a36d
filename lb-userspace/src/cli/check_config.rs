//! `fabriclb check-config`: validation without touching the kernel.

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
        args.files.len()
    );
    Ok(())
}
