//! The switch's binary carries the product alone: `fabriclb` built without
//! the `tooling` feature holds no testbed or traffic-generator code and
//! one BPF object, the forwarding one (not the testbed's sink). Checked on
//! the built binary's bytes, and the same scan must find the tooling in the
//! development build, or it proves nothing; and its `--version` must name
//! the commit it was built from.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::capture;

/// What a scan found of the tooling in a binary.
#[derive(Debug, PartialEq, Eq)]
pub struct Tooling {
    /// Tooling modules whose symbols it holds (legacy Rust mangling, the
    /// stable compiler's default: `8fabriclb7testbed`).
    pub modules: Vec<&'static str>,
    /// Embedded BPF objects (ELF, machine 247): 1 is the forwarding one.
    pub bpf_objects: usize,
}

impl Tooling {
    pub fn scan(binary: &[u8]) -> Self {
        let modules = ["testbed", "traffic"]
            .into_iter()
            .filter(|module| {
                let mangled = format!("8fabriclb{}{module}", module.len());
                contains(binary, mangled.as_bytes())
            })
            .collect();
        Self {
            modules,
            bpf_objects: bpf_objects(binary),
        }
    }

    fn is_none(&self) -> bool {
        self.modules.is_empty() && self.bpf_objects == 1
    }
}

/// Checks `product` (built without `tooling`, from the checkout at
/// `root`) and `development` (with it).
pub fn check(root: &Path, product: &Path, development: &Path) -> Result<()> {
    let version = check_product(root, product)?;
    let development_found = Tooling::scan(&read(development)?);
    // The development binary embeds the testbed's sink beside the
    // forwarding object (the generator's object only the tests load).
    if development_found.modules.len() != 2 || development_found.bpf_objects < 2 {
        bail!(
            "the scan no longer sees the tooling in {}: {development_found:?} (testbed, traffic \
             and the sink's BPF object expected); fix the scan before trusting it on the product",
            development.display()
        );
    }
    println!(
        "xtask test: product: {} ({version}) holds no tooling and one BPF object ({} has {:?} and {})",
        product.display(),
        development.display(),
        development_found.modules,
        development_found.bpf_objects
    );
    Ok(())
}

/// Checks that the product binary at `binary` carries no tooling and that
/// its `--version` names the commit checked out at `root`; returns that
/// version.
pub fn check_product(root: &Path, binary: &Path) -> Result<String> {
    let found = Tooling::scan(&read(binary)?);
    if !found.is_none() {
        bail!(
            "{} carries tooling: modules {:?}, {} BPF objects (the forwarding one alone expected)",
            binary.display(),
            found.modules,
            found.bpf_objects
        );
    }
    let version = version(binary)?;
    let commit =
        capture(
            Command::new("git")
                .current_dir(root)
                .args(["rev-parse", "--short=12", "HEAD"]),
        )?;
    let commit = commit.trim();
    if !version.ends_with(&format!(" (commit {commit})")) {
        bail!(
            "{} --version says {version:?}, not commit {commit}",
            binary.display()
        );
    }
    Ok(version)
}

/// What `binary --version` prints.
pub fn version(binary: &Path) -> Result<String> {
    Ok(capture(Command::new(binary).arg("--version"))?
        .trim()
        .to_owned())
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("reading {}", path.display()))
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// ELF headers in `binary` whose machine is BPF (little-endian, 64-bit).
fn bpf_objects(binary: &[u8]) -> usize {
    const EM_BPF: u16 = 247;
    binary
        .windows(20)
        .filter(|h| {
            h[..4] == *b"\x7fELF"
                && h[4] == 2
                && h[5] == 1
                && u16::from_le_bytes([h[18], h[19]]) == EM_BPF
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn elf(machine: u16) -> Vec<u8> {
        let mut header = b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x01\0".to_vec();
        header.extend(machine.to_le_bytes());
        header
    }

    #[test]
    fn finds_tooling_symbols_and_counts_bpf_objects() {
        let mut binary = elf(62);
        binary.extend(b"_ZN8fabriclb6daemon3run17h0E");
        binary.extend(elf(247));
        assert_eq!(
            Tooling::scan(&binary),
            Tooling {
                modules: vec![],
                bpf_objects: 1
            }
        );
        binary.extend(b"_ZN8fabriclb7testbed4sink4Sink2up17h0E");
        binary.extend(elf(247));
        binary.extend(b"_ZN8fabriclb7traffic3gen17h0E");
        let found = Tooling::scan(&binary);
        assert_eq!(found.modules, ["testbed", "traffic"]);
        assert_eq!(found.bpf_objects, 2);
        assert!(!found.is_none());
    }
}
