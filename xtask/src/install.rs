//! The package's install check: `dpkg` installs it into an empty root of
//! its own (`--root`, a dpkg database of its own, nothing of the host's
//! touched), the installed files are used as an operator would use them,
//! and a purge leaves nothing behind.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};

use crate::dist::{CONFFILE, INSTALLED_BINARY, OBSERVABILITY, SHARED, UNIT, sorted};
use crate::{capture, product, run, smoke, target_dir};

pub fn check(root: &Path, deb: &Path) -> Result<()> {
    let into = target_dir(root).join("dist/root");
    if into.exists() {
        fs::remove_dir_all(&into).with_context(|| format!("clearing {}", into.display()))?;
    }
    let admin = into.join("var/lib/dpkg");
    for dir in ["info", "updates"] {
        fs::create_dir_all(admin.join(dir))?;
    }
    fs::write(admin.join("status"), "")?;
    let dpkg = |args: &[&str]| {
        let mut cmd = Command::new("dpkg");
        cmd.arg(format!("--root={}", into.display())).args(args);
        cmd
    };
    run(dpkg(&["--install"]).arg(deb))?;
    let installed = |path: &str| into.join(path.trim_start_matches('/'));
    let binary = installed(INSTALLED_BINARY);

    let version = product::check_product(root, &binary)?;

    let mut configs = vec![installed(CONFFILE)];
    configs.extend(sorted(&installed("/usr/share/doc/fabriclb/examples"))?);
    run(Command::new(&binary).arg("check-config").args(&configs))?;
    smoke::run_daemon(&binary, &target_dir(root).join("dist/daemon"))
        .context("the installed binary as the daemon")?;

    let pages = sorted(&installed("/usr/share/man/man1"))?;
    ensure!(
        pages.iter().any(|p| p.ends_with("fabriclb.1.gz")),
        "no fabriclb.1.gz among {pages:?}"
    );
    for page in &pages {
        let out = Command::new("man")
            .args(["--warnings", "-P", "cat", "-l"])
            .arg(page)
            .env("MANWIDTH", "80")
            .output()
            .context("running man")?;
        let warnings = String::from_utf8_lossy(&out.stderr);
        ensure!(
            out.status.success() && warnings.trim().is_empty() && !out.stdout.is_empty(),
            "man -l {}: {}: {warnings}",
            page.display(),
            out.status
        );
    }

    // systemd's own reading of the unit as installed, with the binary
    // where the unit runs it from (here, inside the root).
    let unit = fs::read_to_string(installed(UNIT))?;
    ensure!(
        unit.contains(&format!("ExecStart={INSTALLED_BINARY} ")),
        "the installed unit does not run {INSTALLED_BINARY}"
    );
    let copy = target_dir(root).join("dist/fabriclb.service");
    fs::write(
        &copy,
        unit.replace(INSTALLED_BINARY, &binary.display().to_string()),
    )?;
    let verify = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&copy)
        .output()
        .context("running systemd-analyze")?;
    let complaints = String::from_utf8_lossy(&verify.stderr);
    ensure!(
        verify.status.success() && complaints.trim().is_empty(),
        "systemd-analyze verify: {complaints}"
    );
    run(Command::new("bash")
        .arg("-n")
        .arg(installed("/usr/share/bash-completion/completions/fabriclb")))?;

    // The rules as installed, read by Prometheus' own checker; the
    // dashboard beside them.
    let shared = installed(SHARED);
    run(Command::new("promtool")
        .args(["check", "rules"])
        .arg(shared.join(OBSERVABILITY[0])))?;
    ensure!(
        shared.join(OBSERVABILITY[1]).is_file(),
        "no dashboard under {SHARED}"
    );
    let listed = capture(&mut dpkg(&["--listfiles", "fabriclb"]))?;
    run(&mut dpkg(&["--purge", "fabriclb"]))?;
    let left = leftovers(&into, &admin)?;
    if !left.is_empty() {
        bail!("purging the package left {left:?}");
    }
    println!(
        "xtask test: package: {} installs {} paths into an empty root ({version}); \
         check-config, a daemon's run, man, systemd-analyze and bash passed on them; purged, \
         nothing left",
        deb.display(),
        listed.lines().count()
    );
    Ok(())
}

/// Files (not directories) under `dir` but outside dpkg's database.
fn leftovers(dir: &Path, admin: &Path) -> Result<Vec<PathBuf>> {
    let mut left = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.starts_with(admin) {
            continue;
        }
        if path.is_dir() {
            left.extend(leftovers(&path, admin)?);
        } else {
            left.push(path);
        }
    }
    Ok(left)
}
