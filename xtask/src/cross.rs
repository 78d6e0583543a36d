//! The product built for the other architectures of
//! [`dist::PRODUCT_TARGETS`] (arm64 for DPUs and some whitebox switches):
//! compiled and linked, static, for the right machine; not run, as this
//! machine cannot (the README's support table says so).

use std::fs;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};

use crate::dist::{PRODUCT_TARGETS, cross_linker};
use crate::{capture, cargo, elf, run, target_dir};

pub fn check(root: &Path) -> Result<()> {
    let host = capture(Command::new("dpkg").arg("--print-architecture"))?;
    for &(arch, triple, machine) in PRODUCT_TARGETS.iter().filter(|(a, _, _)| *a != host.trim()) {
        println!("xtask test: cross-build: the product for {arch} ({triple})");
        let mut build = cargo(root);
        build.args([
            "build",
            "--no-default-features",
            "-p",
            "lb-userspace",
            "--target",
            triple,
        ]);
        cross_linker(&mut build, triple);
        run(&mut build).with_context(|| format!("building for {triple}"))?;
        let binary = target_dir(root).join(triple).join("debug/fabriclb");
        let linking = elf::linking(&fs::read(&binary)?)?;
        linking.ensure_static(&binary.display().to_string(), machine)?;
        println!(
            "xtask test: cross-build: {} links, static, for ELF machine {machine}",
            binary.display()
        );
    }
    Ok(())
}
