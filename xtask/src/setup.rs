//! `cargo xtask setup`: everything the build and tests need beyond stable Rust.
//!
//! Every step first checks whether its work is already done, so a repeated run
//! only spawns a few quick queries and prints nothing.

use std::{
    env, fs, io,
    os::unix::fs::{PermissionsExt, symlink},
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};

use crate::targets::PRODUCT_TARGETS;
use crate::{capture, run};

/// Debian packages the tests shell out to, keyed by the binary they provide.
const PACKAGES: &[(&str, &str)] = &[
    ("ip", "iproute2"),
    ("ethtool", "ethtool"),
    ("ping", "iputils-ping"),
    // The telemetry sources' real counterparts: SONiC's databases and the
    // spines' queue exporter.
    ("redis-server", "redis-server"),
    ("prometheus-node-exporter", "prometheus-node-exporter"),
    // Runs under reduced capabilities (the start-up and service tests) and
    // systemd's own check of the unit file.
    ("capsh", "libcap2-bin"),
    ("setpriv", "util-linux"),
    ("systemd-analyze", "systemd"),
    // BGP in the testbed (`--routing bgp`): zebra and bgpd.
    ("vtysh", "frr"),
    // The soak's count of RoCEv2 frames a spine drops for a MAC it no
    // longer has.
    ("nft", "nftables"),
    // The shipped alerting and recording rules, and the dashboard's
    // queries, checked with the real parser.
    ("promtool", "prometheus"),
    // The package's install check: its man pages rendered as man does.
    ("man", "man-db"),
    ("nroff", "groff-base"),
];

/// What building needs and what the tests and demos need besides.
pub fn setup(root: &Path) -> Result<()> {
    build_tools(root)?;
    ensure_packages()?;
    ensure_scapy()
}

/// What building needs: the pinned nightly and bpf-linker, the product's
/// musl targets, and nothing the tests use (`cargo xtask build` and
/// `dist`).
pub fn build_tools(root: &Path) -> Result<()> {
    let toolchain = ebpf_toolchain(root)?;
    ensure_toolchain(&toolchain)?;
    ensure_bpf_linker(&toolchain)?;
    ensure_product_targets()
}

/// The standard library of every target the product is built for
/// (`targets::PRODUCT_TARGETS`), for the toolchain that builds userspace.
fn ensure_product_targets() -> Result<()> {
    let installed = capture(Command::new("rustup").args(["target", "list", "--installed"]))?;
    let missing: Vec<&str> = (PRODUCT_TARGETS.iter())
        .map(|target| target.triple)
        .filter(|triple| !installed.lines().any(|line| line.trim() == *triple))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    println!("xtask setup: rustup target add {}", missing.join(" "));
    run(Command::new("rustup")
        .args(["target", "add"])
        .args(&missing))
}

/// scapy decodes the generator's RoCEv2 frames in the tests, as a decoder
/// that shares no code with ours.
fn ensure_scapy() -> Result<()> {
    let present = Command::new("python3")
        .args(["-c", "import scapy.contrib.roce"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if present {
        return Ok(());
    }
    println!("xtask setup: pip install scapy");
    run(Command::new("python3").args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--root-user-action=ignore",
        "scapy",
    ]))
}

pub fn is_root() -> Result<bool> {
    Ok(capture(Command::new("id").arg("-u"))?.trim() == "0")
}

/// Reads `toolchain.channel` from lb-ebpf/rust-toolchain.toml. The file is tiny
/// and fixed-shape, which doesn't justify a toml dependency in xtask.
fn ebpf_toolchain(root: &Path) -> Result<String> {
    let path = root.join("lb-ebpf").join("rust-toolchain.toml");
    let text = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let mut section = "";
    for line in text.lines().map(str::trim) {
        if let Some(header) = line.strip_prefix('[') {
            section = header.trim_end_matches(']').trim();
        } else if let Some((key, value)) = line.split_once('=') {
            if section == "toolchain" && key.trim() == "channel" {
                return unquote(value.trim())
                    .map(str::to_owned)
                    .with_context(|| format!("malformed `channel` in {}", path.display()));
            }
        }
    }
    bail!("no `toolchain.channel` in {}", path.display())
}

fn unquote(value: &str) -> Option<&str> {
    let quote = value.chars().next().filter(|c| matches!(c, '"' | '\''))?;
    let rest = &value[1..];
    rest.find(quote).map(|end| &rest[..end])
}

/// What the eBPF nightly needs besides the compiler: the core library's
/// source (`-Z build-std`) and clippy (the eBPF crate is linted for its
/// own target).
const COMPONENTS: [&str; 2] = ["rust-src", "clippy"];

fn ensure_toolchain(toolchain: &str) -> Result<()> {
    let list = capture(Command::new("rustup").args(["toolchain", "list"]))?;
    let installed = list
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .any(|name| toolchain_matches(name, toolchain));
    // Only query components of an installed toolchain: asking about a missing
    // one may trigger rustup's auto-install, or fail, depending on settings.
    let has_components = installed && {
        let components = capture(Command::new("rustup").args([
            "component",
            "list",
            "--toolchain",
            toolchain,
            "--installed",
        ]))?;
        COMPONENTS.iter().all(|wanted| {
            components
                .lines()
                .map(str::trim)
                .any(|line| line == *wanted || line.starts_with(&format!("{wanted}-")))
        })
    };
    if has_components {
        return Ok(());
    }
    println!(
        "xtask setup: installing toolchain {toolchain} with {}",
        COMPONENTS.join(", ")
    );
    let mut install = Command::new("rustup");
    install.args(["toolchain", "install", toolchain, "--profile", "minimal"]);
    for component in COMPONENTS {
        install.args(["-c", component]);
    }
    run(&mut install)
}

/// `rustup toolchain list` prints full names (`nightly-2026-05-20-x86_64-unknown-linux-gnu`)
/// while rust-toolchain.toml usually omits the host triple. Requiring the suffix
/// to start with a letter keeps `nightly` from matching a dated nightly.
fn toolchain_matches(listed: &str, wanted: &str) -> bool {
    listed == wanted
        || listed
            .strip_prefix(wanted)
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|triple| triple.starts_with(|c: char| c.is_ascii_alphabetic()))
}

/// bpf-linker must link against the same LLVM that the eBPF nightly's rustc
/// emits bitcode for. Rather than installing a system LLVM, it is built
/// against the libLLVM shipped in that toolchain's sysroot.
fn ensure_bpf_linker(toolchain: &str) -> Result<()> {
    // A bpf-linker whose libLLVM went missing fails to start, so "it runs"
    // also covers a deleted prefix or toolchain.
    let version = capture(Command::new("bpf-linker").arg("--version")).ok();
    if version
        .as_deref()
        .and_then(|v| v.split_whitespace().nth(1))
        .is_some_and(|v| v.starts_with("0.13."))
    {
        return Ok(());
    }

    let home = env::var_os("HOME").context("HOME is not set")?;
    // Must outlive the install: the binary's rpath points at `prefix/lib`.
    let prefix = PathBuf::from(home)
        .join(".local/share/fabriclb")
        .join(format!("llvm-{toolchain}"));
    let sysroot = capture(
        Command::new("rustc")
            .arg(format!("+{toolchain}"))
            .args(["--print", "sysroot"]),
    )?;
    let (libllvm, major) = find_libllvm(&Path::new(sysroot.trim()).join("lib"))?;
    let file_name = libllvm.file_name().expect("read_dir entries have names");

    // bpf-linker's build script looks for `lib/libLLVM.so` under LLVM_PREFIX;
    // the versioned name is what the linked binary asks for at run time.
    let lib_dir = prefix.join("lib");
    println!(
        "xtask setup: linking {} into {}",
        libllvm.display(),
        lib_dir.display()
    );
    fs::create_dir_all(&lib_dir).with_context(|| format!("creating {}", lib_dir.display()))?;
    for name in [Path::new("libLLVM.so"), Path::new(file_name)] {
        replace_symlink(&libllvm, &lib_dir.join(name))?;
    }

    let feature = format!("llvm-{major}");
    println!("xtask setup: installing bpf-linker 0.13 ({feature}) against {toolchain}'s LLVM");
    run(Command::new("cargo")
        .args([
            "+stable",
            "install",
            "bpf-linker",
            "--version",
            "^0.13",
            "--locked",
            "--no-default-features",
            "--features",
            &feature,
        ])
        .env("LLVM_PREFIX", &prefix))
}

/// Finds `libLLVM.so.<major>.<minor>-rust-*` and returns it with its major version.
fn find_libllvm(lib_dir: &Path) -> Result<(PathBuf, u32)> {
    let mut found = Vec::new();
    for entry in fs::read_dir(lib_dir).with_context(|| format!("listing {}", lib_dir.display()))? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(version) = name.to_str().and_then(|n| n.strip_prefix("libLLVM.so.")) else {
            continue;
        };
        if !version.contains("-rust-") {
            continue;
        }
        let major = version
            .split(['.', '-'])
            .next()
            .and_then(|m| m.parse().ok())
            .with_context(|| format!("no LLVM major version in {}", entry.path().display()))?;
        found.push((entry.path(), major));
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => bail!("no libLLVM.so.*-rust-* in {}", lib_dir.display()),
        _ => bail!("several libLLVM.so.*-rust-* in {}", lib_dir.display()),
    }
}

fn replace_symlink(target: &Path, link: &Path) -> Result<()> {
    match fs::symlink_metadata(link) {
        Ok(_) => fs::remove_file(link).with_context(|| format!("removing {}", link.display()))?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("inspecting {}", link.display())),
    }
    symlink(target, link)
        .with_context(|| format!("linking {} -> {}", link.display(), target.display()))
}

fn ensure_packages() -> Result<()> {
    let missing: Vec<&str> = PACKAGES
        .iter()
        .filter(|(bin, _)| !on_path(bin))
        .map(|&(_, package)| package)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    if !is_root()? {
        bail!(
            "missing Debian packages; install them as root with \
             `apt-get install --no-install-recommends {}`",
            missing.join(" ")
        );
    }
    println!("xtask setup: apt-get update");
    run(Command::new("apt-get").arg("update"))?;
    println!(
        "xtask setup: installing Debian packages: {}",
        missing.join(" ")
    );
    run(Command::new("apt-get")
        .args(["install", "-y", "--no-install-recommends"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive"))
}

/// Like `command -v`. The sbin directories are searched too because Debian
/// installs `ip` and `ethtool` there and non-root PATHs often omit them.
fn on_path(bin: &str) -> bool {
    let path = env::var_os("PATH").unwrap_or_default();
    env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].map(PathBuf::from))
        .any(|dir| {
            fs::metadata(dir.join(bin))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toolchain_names() {
        let dated = "nightly-2026-05-20";
        assert!(toolchain_matches(dated, dated));
        assert!(toolchain_matches(
            "nightly-2026-05-20-x86_64-unknown-linux-gnu",
            dated
        ));
        assert!(!toolchain_matches(
            "nightly-2026-05-21-x86_64-unknown-linux-gnu",
            dated
        ));
        assert!(toolchain_matches(
            "nightly-x86_64-unknown-linux-gnu",
            "nightly"
        ));
        assert!(!toolchain_matches(
            "nightly-2026-05-20-x86_64-unknown-linux-gnu",
            "nightly"
        ));
    }

    #[test]
    fn quoted_values() {
        assert_eq!(
            unquote(r#""nightly-2026-05-20" # pinned"#),
            Some("nightly-2026-05-20")
        );
        assert_eq!(unquote("'nightly'"), Some("nightly"));
        assert_eq!(unquote("nightly"), None);
        assert_eq!(unquote(r#""unterminated"#), None);
    }

    #[test]
    fn reads_pinned_channel() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        assert!(ebpf_toolchain(root).unwrap().starts_with("nightly"));
    }
}
