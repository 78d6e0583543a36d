//! The product's builds per architecture: static musl for each Debian
//! architecture, so that the one binary runs on any distribution's libc
//! (Debian 11's glibc 2.31, which older SONiC images carry, as well as
//! 13's) and the package needs none. This machine's is built in release
//! for the package; the others (arm64, for DPUs and some whitebox
//! switches) are compiled and linked only, as nothing here can run them
//! (the README's support table says so).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::{capture, cargo, elf, run, target_dir};

/// An architecture the product is built for.
pub struct ProductTarget {
    /// Debian's name for it.
    pub arch: &'static str,
    /// Rust's target.
    pub triple: &'static str,
    pub machine: u16,
}

pub const PRODUCT_TARGETS: [ProductTarget; 2] = [
    ProductTarget {
        arch: "amd64",
        triple: "x86_64-unknown-linux-musl",
        machine: elf::EM_X86_64,
    },
    ProductTarget {
        arch: "arm64",
        triple: "aarch64-unknown-linux-musl",
        machine: elf::EM_AARCH64,
    },
];

/// Which build of the product.
#[derive(Clone, Copy)]
pub enum Build {
    /// The package's: release, for this machine's architecture.
    Package,
    /// Another architecture's, in debug: enough to show it compiles and
    /// links, with Rust's own lld and the musl start files the target
    /// carries, as there is no C toolchain for it here.
    CrossCheck,
}

/// This machine's architecture as Debian names it, and its product target.
pub fn host() -> Result<(String, &'static ProductTarget)> {
    let arch = capture(Command::new("dpkg").arg("--print-architecture"))?
        .trim()
        .to_owned();
    match PRODUCT_TARGETS.iter().find(|t| t.arch == arch) {
        Some(target) => Ok((arch, target)),
        None => bail!("no product target for Debian architecture {arch}"),
    }
}

/// Builds the product alone (without the testbed and the traffic
/// generator) for `target`, refuses it unless it is static and for the
/// target's machine, and returns it.
pub fn build_product(root: &Path, target: &ProductTarget, build: Build) -> Result<PathBuf> {
    let mut cargo = cargo(root);
    cargo.args([
        "build",
        "--no-default-features",
        "-p",
        "lb-userspace",
        "--target",
        target.triple,
    ]);
    let profile = match build {
        Build::Package => {
            cargo.arg("--release");
            "release"
        }
        Build::CrossCheck => {
            let var = format!(
                "CARGO_TARGET_{}_LINKER",
                target.triple.to_uppercase().replace('-', "_")
            );
            cargo.env(var, "rust-lld");
            "debug"
        }
    };
    run(&mut cargo).with_context(|| format!("building the product for {}", target.triple))?;
    let binary = target_dir(root)
        .join(target.triple)
        .join(profile)
        .join("fabriclb");
    elf::ensure_static(&binary, target.machine)?;
    Ok(binary)
}

/// Every architecture's product but this machine's, compiled and linked.
pub fn cross_check(root: &Path) -> Result<()> {
    let (host, _) = host()?;
    for target in PRODUCT_TARGETS.iter().filter(|t| t.arch != host) {
        println!(
            "xtask test: cross-build: the product for {} ({})",
            target.arch, target.triple
        );
        let binary = build_product(root, target, Build::CrossCheck)?;
        println!(
            "xtask test: cross-build: {} links, static, for ELF machine {}",
            binary.display(),
            target.machine
        );
    }
    Ok(())
}
