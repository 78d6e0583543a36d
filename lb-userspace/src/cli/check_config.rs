//! `fabriclb check-config`: validation without touching the kernel. Warnings
//! go to stderr and leave the exit status 0 (the daemon would run the
//! config) unless `--strict`; `--json` reports every file on stdout as one
//! document instead.

use std::path::PathBuf;

use fabriclb::config::{self, ConfigError, Warning};
use serde::Serialize;

#[derive(clap::Args)]
pub struct CheckConfigArgs {
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Count a file with warnings as invalid.
    #[arg(long)]
    strict: bool,
    /// Print one JSON document on stdout (see README, check-config) instead
    /// of lines.
    #[arg(long)]
    json: bool,
}

/// Some of the files were refused: the exit status says a config problem
/// (see `main`), not a failure to check.
#[derive(Debug, thiserror::Error)]
#[error("{invalid} of {files} config files invalid{}", if *strict { " (warnings count, --strict)" } else { "" })]
pub struct InvalidConfigs {
    invalid: usize,
    files: usize,
    strict: bool,
}

/// `--json`'s document.
#[derive(Serialize)]
struct Report {
    files: Vec<FileReport>,
}

#[derive(Serialize)]
struct FileReport {
    file: PathBuf,
    valid: bool,
    /// What the config holds; `null` when it was refused.
    groups: Option<usize>,
    routes: Option<usize>,
    /// Every problem the file was refused for, in file order; empty when
    /// it loaded.
    errors: Vec<Diagnostic>,
    warnings: Vec<Diagnostic>,
}

/// A problem at a place in a file: 1-based line and character column,
/// `null` for problems with the file as a whole (unreadable, too large).
#[derive(Serialize)]
struct Diagnostic {
    line: Option<usize>,
    column: Option<usize>,
    message: String,
}

impl From<&Warning> for Diagnostic {
    fn from(w: &Warning) -> Self {
        Self {
            line: Some(w.line),
            column: Some(w.column),
            message: w.reason.clone(),
        }
    }
}

/// Each problem of a refused file.
fn diagnostics(e: &ConfigError) -> Vec<Diagnostic> {
    e.problems()
        .into_iter()
        .map(|(position, message)| Diagnostic {
            line: position.map(|(line, _)| line),
            column: position.map(|(_, column)| column),
            message,
        })
        .collect()
}

pub fn run(args: CheckConfigArgs) -> anyhow::Result<()> {
    let mut reports = Vec::new();
    for file in &args.files {
        let report = match config::load(file) {
            Ok(c) => {
                if !args.json {
                    print_loaded(file, &c, args.strict);
                }
                FileReport {
                    file: file.clone(),
                    valid: !args.strict || c.warnings.is_empty(),
                    groups: Some(c.groups.len()),
                    routes: Some(c.routes.len()),
                    errors: Vec::new(),
                    warnings: c.warnings.iter().map(Diagnostic::from).collect(),
                }
            }
            Err(e) => {
                if !args.json {
                    eprintln!("{e}");
                }
                FileReport {
                    file: file.clone(),
                    valid: false,
                    groups: None,
                    routes: None,
                    errors: diagnostics(&e),
                    warnings: Vec::new(),
                }
            }
        };
        reports.push(report);
    }
    let report = Report { files: reports };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    }
    finish(&report.files, args.strict)
}

fn print_loaded(file: &std::path::Path, c: &config::Config, strict: bool) {
    for warning in &c.warnings {
        eprintln!("{warning}");
    }
    let warnings = match c.warnings.len() {
        0 => String::new(),
        1 => ", 1 warning".to_owned(),
        n => format!(", {n} warnings"),
    };
    let verdict = if strict && !c.warnings.is_empty() {
        "invalid with --strict"
    } else {
        "ok"
    };
    println!(
        "{}: {verdict} ({} groups, {} routes{warnings})",
        file.display(),
        c.groups.len(),
        c.routes.len()
    );
}

fn finish(reports: &[FileReport], strict: bool) -> anyhow::Result<()> {
    let invalid = reports.iter().filter(|r| !r.valid).count();
    if invalid > 0 {
        return Err(InvalidConfigs {
            invalid,
            files: reports.len(),
            strict,
        }
        .into());
    }
    Ok(())
}
