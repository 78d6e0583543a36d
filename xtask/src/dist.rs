//! `cargo xtask dist`: the Debian package of the switch's binary, built
//! with Debian's own `dpkg-deb` from a staged tree (no packaging crate:
//! the control file is ten lines, and dpkg-deb is what every Debian
//! package goes through); and the check that installs it into an empty
//! root, runs what it installed and removes it again.

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};

use crate::targets::{self, Build};
use crate::{capture, product, run, target_dir};

/// The package of this machine's architecture, and the binary in it.
pub struct Package {
    pub deb: PathBuf,
    pub binary: PathBuf,
}

/// Where the packaged unit runs the binary from; the repository's unit
/// names the manual install's `/usr/local/bin`.
pub const INSTALLED_BINARY: &str = "/usr/bin/fabriclb";
const MANUAL_BINARY: &str = "/usr/local/bin/fabriclb";
/// The config the packaged unit starts with: a conffile, so an upgrade
/// keeps the operator's edits.
pub const CONFFILE: &str = "/etc/fabriclb/fabriclb.toml";
pub const UNIT: &str = "/lib/systemd/system/fabriclb.service";
const MAINTAINER: &str = "fabriclb developers <fabriclb@users.noreply.github.com>";

/// Builds the product and packages it.
pub fn dist(root: &Path) -> Result<Package> {
    let (arch, host) = targets::host()?;
    let binary = targets::build_product(root, host, Build::Package)?;
    let target = target_dir(root);
    let version = product::version(&binary)?;
    let (version, commit) = parse_version(&version)?;
    let dist = target.join("dist");
    let stage = dist.join("stage");
    if stage.exists() {
        fs::remove_dir_all(&stage).with_context(|| format!("clearing {}", stage.display()))?;
    }
    let staged = |path: &str| stage.join(path.trim_start_matches('/'));

    put(&staged(INSTALLED_BINARY), &fs::read(&binary)?, 0o755)?;
    let unit = fs::read_to_string(root.join("configs/fabriclb.service"))?;
    ensure!(
        unit.contains(&format!("ExecStart={MANUAL_BINARY} ")),
        "configs/fabriclb.service no longer starts {MANUAL_BINARY}"
    );
    put(
        &staged(UNIT),
        unit.replace(MANUAL_BINARY, INSTALLED_BINARY).as_bytes(),
        0o644,
    )?;
    put(
        &staged(CONFFILE),
        &fs::read(root.join("configs/two-tier-leaf.toml"))?,
        0o644,
    )?;
    let doc = staged("/usr/share/doc/fabriclb");
    for example in examples(root)? {
        let name = example.file_name().context("an example's name")?;
        put(
            &doc.join("examples").join(name),
            &fs::read(&example)?,
            0o644,
        )?;
    }
    for shipped in OBSERVABILITY {
        put(
            &staged(SHARED).join(shipped),
            &fs::read(root.join("configs").join(shipped))?,
            0o644,
        )?;
    }
    put(&doc.join("copyright"), copyright().as_bytes(), 0o644)?;
    put(
        &doc.join("changelog.Debian.gz"),
        &gzip(changelog(root, &version, &commit)?.as_bytes())?,
        0o644,
    )?;

    let pages = dist.join("man");
    if pages.exists() {
        fs::remove_dir_all(&pages)?;
    }
    fs::create_dir_all(&pages)?;
    run(Command::new(&binary).arg("man").arg(&pages))?;
    for page in sorted(&pages)? {
        let name = format!(
            "{}.gz",
            page.file_name().context("a page")?.to_string_lossy()
        );
        put(
            &staged("/usr/share/man/man1").join(name),
            &gzip(&fs::read(&page)?)?,
            0o644,
        )?;
    }
    for (shell, path) in COMPLETIONS {
        let script = capture(Command::new(&binary).args(["completions", shell]))?;
        put(&staged(path), script.as_bytes(), 0o644)?;
    }

    let installed_kib = tree_size(&stage)? / 1024;
    let control = format!(
        "Package: fabriclb\n\
         Version: {version}\n\
         Architecture: {arch}\n\
         Maintainer: {MAINTAINER}\n\
         Installed-Size: {installed_kib}\n\
         Section: net\n\
         Priority: optional\n\
         Description: XDP load balancer for RoCEv2 AI-training fabrics\n \
         Spreads the few fat flows of GPU collectives over a leaf's uplinks in\n \
         XDP: seeded ECMP, flowlet switching and per-packet spraying, steered\n \
         by the next switches' queue telemetry, with routes from the kernel\n \
         (FRR) or SONiC's APPL_DB. Built from commit {commit}.\n"
    );
    put(&stage.join("DEBIAN/control"), control.as_bytes(), 0o644)?;
    put(
        &stage.join("DEBIAN/conffiles"),
        format!("{CONFFILE}\n").as_bytes(),
        0o644,
    )?;
    let deb = dist.join(format!("fabriclb_{version}_{arch}.deb"));
    run(Command::new("dpkg-deb")
        .args(["--root-owner-group", "-Zxz", "--build"])
        .arg(&stage)
        .arg(&deb))?;
    println!(
        "xtask dist: {} ({} bytes, installs {installed_kib} KiB; {}: static, no libc needed)",
        deb.display(),
        fs::metadata(&deb)?.len(),
        host.triple
    );
    Ok(Package { deb, binary })
}

/// Each shell's completion script and where Debian's shells look for it.
const COMPLETIONS: [(&str, &str); 3] = [
    ("bash", "/usr/share/bash-completion/completions/fabriclb"),
    ("zsh", "/usr/share/zsh/vendor-completions/_fabriclb"),
    ("fish", "/usr/share/fish/vendor_completions.d/fabriclb.fish"),
];

/// `fabriclb 0.1.0 (commit abc)` -> ("0.1.0", "abc").
fn parse_version(line: &str) -> Result<(String, String)> {
    let parsed = line
        .strip_prefix("fabriclb ")
        .and_then(|rest| rest.strip_suffix(')'))
        .and_then(|rest| rest.split_once(" (commit "));
    match parsed {
        Some((version, commit)) => Ok((version.to_owned(), commit.to_owned())),
        None => bail!("unexpected --version output {line:?}"),
    }
}

/// Where the package puts what Prometheus and Grafana load.
pub const SHARED: &str = "/usr/share/fabriclb";

/// The rules and the dashboard, under `configs/` and [`SHARED`] alike.
pub const OBSERVABILITY: [&str; 2] = [
    "prometheus/fabriclb-rules.yml",
    "grafana/fabriclb-dashboard.json",
];

fn examples(root: &Path) -> Result<Vec<PathBuf>> {
    let mut examples = sorted(&root.join("configs"))?;
    examples.retain(|path| path.extension().is_some_and(|e| e == "toml"));
    Ok(examples)
}

/// The entries of `dir`, sorted.
pub fn sorted(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut paths: Vec<PathBuf> = fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    paths.sort();
    Ok(paths)
}

/// Writes `bytes` to `path` with `mode`, creating its directories.
fn put(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    let dir = path.parent().context("a staged file's directory")?;
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))?;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .with_context(|| format!("chmod {}", path.display()))
}

/// `gzip -9n`, as Debian compresses man pages and changelogs (`-n`: no
/// name or time stamp, so the same input packs the same bytes).
fn gzip(bytes: &[u8]) -> Result<Vec<u8>> {
    use std::io::Write as _;
    let mut child = Command::new("gzip")
        .args(["-9n", "-c"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .context("running gzip")?;
    child
        .stdin
        .take()
        .context("gzip's stdin")?
        .write_all(bytes)?;
    let out = child.wait_with_output()?;
    ensure!(out.status.success(), "gzip failed: {}", out.status);
    Ok(out.stdout)
}

fn copyright() -> String {
    "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\
     Upstream-Name: fabriclb\n\n\
     Files: *\n\
     Copyright: fabriclb developers\n\
     License: MIT or Apache-2.0\n \
     At your option, under the MIT license or the Apache License, Version 2.0\n \
     (/usr/share/common-licenses/Apache-2.0).\n"
        .to_owned()
}

/// One entry for this build, dated by its commit.
fn changelog(root: &Path, version: &str, commit: &str) -> Result<String> {
    let date = capture(
        Command::new("git")
            .current_dir(root)
            .args(["log", "-1", "--format=%aD"]),
    )?;
    Ok(format!(
        "fabriclb ({version}) unstable; urgency=medium\n\n  \
         * Built from commit {commit}.\n\n \
         -- {MAINTAINER}  {}\n",
        date.trim()
    ))
}

fn tree_size(dir: &Path) -> Result<u64> {
    let mut size = 0;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        size += if meta.is_dir() {
            tree_size(&entry.path())?
        } else {
            meta.len()
        };
    }
    Ok(size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_from_the_binary() {
        assert_eq!(
            parse_version("fabriclb 0.1.0 (commit 0123456789ab)").unwrap(),
            ("0.1.0".to_owned(), "0123456789ab".to_owned())
        );
        assert!(parse_version("lb-userspace 0.1.0").is_err());
    }
}
