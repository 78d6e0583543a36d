//! `fabriclb completions SHELL` and the man pages, both generated from the
//! clap definitions: what the binary they came from accepts, no more (the
//! product's leaves out the tooling's subcommands).

use std::path::Path;

use anyhow::Context as _;
use clap::CommandFactory;

use super::Cli;

pub fn completions(shell: clap_complete::Shell) -> anyhow::Result<()> {
    let mut command = Cli::command();
    clap_complete::generate(shell, &mut command, "fabriclb", &mut std::io::stdout());
    Ok(())
}

/// `fabriclb.1`, and `fabriclb-NAME.1` for each subcommand but the hidden
/// ones, in `dir`, as git names its pages: every option as `--help` gives
/// it.
pub fn man(dir: &Path) -> anyhow::Result<()> {
    let command = Cli::command();
    let pages = std::iter::once(command.clone()).chain(
        (command.get_subcommands())
            .filter(|sub| !sub.is_hide_set() && sub.get_name() != "help")
            .map(|sub| {
                (sub.clone())
                    .name(format!("fabriclb-{}", sub.get_name()))
                    .bin_name(format!("fabriclb {}", sub.get_name()))
            }),
    );
    for page in pages {
        let file = dir.join(format!("{}.1", page.get_name()));
        let mut roff = Vec::new();
        clap_mangen::Man::new(page).render(&mut roff)?;
        std::fs::write(&file, roff).with_context(|| format!("writing {}", file.display()))?;
    }
    Ok(())
}
