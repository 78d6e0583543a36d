//! The house rules a reviewer would otherwise have to remember: no source
//! file over [`MAX_LINES`], and the product never imports the test tooling
//! (the testbed and the traffic generator), so what ships in a switch's
//! data path can be read without them. And lb-common inherits the same
//! package fields and dependencies in both workspaces it builds in, and
//! the documents' links and pictures name files that exist.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// Longest source file, in lines: past it a file holds more than one concern.
pub const MAX_LINES: usize = 700;

/// Folders whose Rust sources are held to [`MAX_LINES`].
const SOURCE_ROOTS: [&str; 5] = ["lb-common", "lb-ebpf/src", "lb-userspace", "xtask", "tests"];

/// What ships: the daemon, its config, its logging, the data-plane
/// programming, metrics, netlink, the look into a running instance, the
/// simulator and the collectives it runs, and the subcommands that run,
/// reload, stop, check, inspect, watch or simulate, the names they show and
/// the man pages and completions.
const PRODUCT: [&str; 22] = [
    "lb-userspace/src/config",
    "lb-userspace/src/daemon",
    "lb-userspace/src/dataplane",
    "lb-userspace/src/metrics",
    "lb-userspace/src/netlink",
    "lb-userspace/src/telemetry",
    "lb-userspace/src/sonic",
    "lb-userspace/src/logging.rs",
    "lb-userspace/src/cli/run.rs",
    "lb-userspace/src/cli/reload.rs",
    "lb-userspace/src/cli/names.rs",
    "lb-userspace/src/cli/docs.rs",
    "lb-userspace/src/cli/check_config.rs",
    "lb-userspace/src/inspect",
    "lb-userspace/src/cli/pins.rs",
    "lb-userspace/src/cli/status.rs",
    "lb-userspace/src/cli/explain.rs",
    "lb-userspace/src/cli/stop.rs",
    "lb-userspace/src/cli/watch.rs",
    "lb-userspace/src/cli/simulate.rs",
    "lb-userspace/src/simulate",
    "lb-userspace/src/workload.rs",
];

/// Modules of the test tooling, which the product must not name.
const TOOLING: [&str; 2] = ["testbed", "traffic"];

/// Checks the whole tree under `root`; the error lists every breach.
pub fn check(root: &Path) -> Result<()> {
    let mut breaches = Vec::new();
    for dir in SOURCE_ROOTS {
        for file in rust_files(&root.join(dir))? {
            let text = read(&file)?;
            let lines = text.lines().count();
            if lines > MAX_LINES {
                breaches.push(format!(
                    "{}: {lines} lines, over {MAX_LINES}: split it by concern",
                    relative(root, &file)
                ));
            }
        }
    }
    for entry in PRODUCT {
        for file in rust_files(&root.join(entry))? {
            for tooling in tooling_imports(&read(&file)?) {
                breaches.push(format!(
                    "{}: product code imports the test tooling: `{tooling}`",
                    relative(root, &file)
                ));
            }
        }
    }
    breaches.extend(inheritance_differences(root)?);
    for document in DOCUMENTS {
        for target in local_links(&read(&root.join(document))?) {
            if !root.join(target).exists() {
                breaches.push(format!(
                    "{document}: links to {target}, which does not exist"
                ));
            }
        }
    }
    if !breaches.is_empty() {
        bail!("layout rules broken:\n  {}", breaches.join("\n  "));
    }
    Ok(())
}

/// The documents whose links [`local_links`] checks.
const DOCUMENTS: [&str; 2] = ["README.md", "ARCHITECTURE.md"];

/// The targets of `source`'s Markdown links and images that are files of
/// the tree (a web address or an anchor is not), as written.
fn local_links(source: &str) -> Vec<&str> {
    source
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        // A link's title follows its target after a space.
        .filter_map(|target| target.split_whitespace().next())
        .map(|target| target.split('#').next().unwrap_or(target))
        .filter(|target| !target.is_empty() && !target.contains("://"))
        .collect()
}

/// The eBPF workspace (lb-ebpf/Cargo.toml) repeats what lb-common inherits
/// from the host workspace: lb-common is built in both. Each entry it
/// repeats must say what the host's says.
fn inheritance_differences(root: &Path) -> Result<Vec<String>> {
    let manifest = |path: &str| -> Result<toml::Table> {
        read(&root.join(path))?
            .parse()
            .with_context(|| format!("parsing {path}"))
    };
    let host = manifest("Cargo.toml")?;
    let ebpf = manifest("lb-ebpf/Cargo.toml")?;
    let table = |manifest: &toml::Table, key: &str| {
        manifest
            .get("workspace")
            .and_then(|w| w.get(key))
            .and_then(toml::Value::as_table)
            .cloned()
            .unwrap_or_default()
    };
    let mut differences = Vec::new();
    for key in ["package", "dependencies"] {
        let host = table(&host, key);
        for (name, value) in table(&ebpf, key) {
            if host.get(&name) != Some(&value) {
                differences.push(format!(
                    "lb-ebpf/Cargo.toml: workspace.{key}.{name} = {value}, but the root Cargo.toml says {}",
                    host.get(&name).map_or("nothing".to_string(), ToString::to_string)
                ));
            }
        }
    }
    Ok(differences)
}

fn read(file: &Path) -> Result<String> {
    fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))
}

fn relative(root: &Path, file: &Path) -> String {
    file.strip_prefix(root)
        .unwrap_or(file)
        .display()
        .to_string()
}

/// `path` itself if it is a Rust file, else every Rust file below it
/// (build output excluded).
fn rust_files(path: &Path) -> Result<Vec<PathBuf>> {
    if path.is_file() {
        return Ok(vec![path.to_owned()]);
    }
    let mut files = Vec::new();
    let entries = fs::read_dir(path).with_context(|| format!("listing {}", path.display()))?;
    for entry in entries {
        let path = entry?.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "target") {
                files.extend(rust_files(&path)?);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Every `use` declaration and inline path in `source` that names a
/// tooling module, as written (comments ignored).
fn tooling_imports(source: &str) -> Vec<String> {
    let code: String = source
        .lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let mut found = Vec::new();
    for statement in code.split(';') {
        let statement = statement.trim();
        let names_tooling = TOOLING.iter().any(|module| {
            let is_use = statement.starts_with("use ") || statement.contains("\nuse ");
            let as_segment = statement.contains(&format!("{module}::"));
            let in_use_list = is_use
                && statement
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .any(|word| word == *module);
            as_segment || in_use_list
        });
        if names_tooling {
            found.push(statement.split_whitespace().collect::<Vec<_>>().join(" "));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tooling_paths_are_found_in_every_form() {
        assert_eq!(
            tooling_imports("use crate::testbed::Testbed;\nfn f() {}"),
            ["use crate::testbed::Testbed"]
        );
        assert_eq!(
            tooling_imports("use crate::{\n    config,\n    traffic,\n};"),
            ["use crate::{ config, traffic, }"]
        );
        assert_eq!(
            tooling_imports("fn f() { let _ = fabriclb::traffic::Pattern::Ring; }"),
            ["fn f() { let _ = fabriclb::traffic::Pattern::Ring"]
        );
    }

    #[test]
    fn links_to_files_are_found_and_web_addresses_and_anchors_are_not() {
        let text = "See [the notes](ARCHITECTURE.md), ![a chart](slow.svg \"title\")\n\
                    [a site](https://example.org/x) [below](#set-up) [a part](docs/a.md#b)";
        assert_eq!(
            local_links(text),
            ["ARCHITECTURE.md", "slow.svg", "docs/a.md"]
        );
    }

    #[test]
    fn words_in_comments_and_plain_code_are_not_imports() {
        assert!(
            tooling_imports(
                "// the testbed::Daemon drives this\nuse crate::config;\n\
                 /// spread traffic over next hops\nfn traffic_share() {}"
            )
            .is_empty()
        );
    }

    #[test]
    fn the_ebpf_workspace_says_what_lb_common_inherits_as_the_host_does() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        assert_eq!(
            inheritance_differences(&root).unwrap(),
            Vec::<String>::new()
        );

        let dir = std::env::temp_dir().join(format!("xtask-layout-{}", std::process::id()));
        fs::create_dir_all(dir.join("lb-ebpf")).unwrap();
        let host =
            "[workspace.package]\nedition = \"2024\"\n[workspace.dependencies]\naya = \"0.14\"\n";
        fs::write(dir.join("Cargo.toml"), host).unwrap();
        let ebpf = "[workspace.package]\nedition = \"2021\"\n[workspace.dependencies]\naya = \"0.14\"\ncrc32fast = \"1\"\n";
        fs::write(dir.join("lb-ebpf/Cargo.toml"), ebpf).unwrap();
        let found = inheritance_differences(&dir);
        fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            found.unwrap(),
            [
                "lb-ebpf/Cargo.toml: workspace.package.edition = \"2021\", but the root Cargo.toml says \"2024\"",
                "lb-ebpf/Cargo.toml: workspace.dependencies.crc32fast = \"1\", but the root Cargo.toml says nothing",
            ]
        );
    }
}
