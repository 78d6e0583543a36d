//! The switch's binary carries the product alone: `fabriclb` built without
//! the `tooling` feature holds no testbed or traffic-generator code and
//! one BPF object, the forwarding one (not the testbed's sink). Checked on
//! the built binary's bytes, and the same scan must find the tooling in the
//! development build, or it proves nothing; and its `--version` must name
//! the commit it was built from.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

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

    pub fn is_none(&self) -> bool {
        self.modules.is_empty() && self.bpf_objects == 1
    }
}

/// Checks `product` (built without `tooling`) and `development` (with it).
pub fn check(product: &Path, development: &Path) -> Result<()> {
    let read =
        |path: &Path| std::fs::read(path).with_context(|| format!("reading {}", path.display()));
    let found = Tooling::scan(&read(product)?);
    if !found.is_none() {
        bail!(
            "{} carries tooling: modules {:?}, {} BPF objects (the forwarding one alone expected)",
            product.display(),
            found.modules,
            found.bpf_objects
        );
    }
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
    let version = version(product)?;
    let commit = head_commit(product)?;
    if !version.ends_with(&format!(" (commit {commit})")) {
        bail!(
            "{} --version says {version:?}, not commit {commit}",
            product.display()
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

/// What `binary --version` prints.
pub fn version(binary: &Path) -> Result<String> {
    let out = Command::new(binary)
        .arg("--version")
        .output()
        .with_context(|| format!("running {} --version", binary.display()))?;
    if !out.status.success() {
        bail!("{} --version failed: {}", binary.display(), out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The commit checked out where `binary` was built, as its build names it.
fn head_commit(binary: &Path) -> Result<String> {
    let out = Command::new("git")
        .current_dir(binary.parent().unwrap_or(Path::new(".")))
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .context("running git rev-parse")?;
    if !out.status.success() {
        bail!("git rev-parse HEAD failed: {}", out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
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
