//! Builds the XDP objects (lb-ebpf) with their pinned nightly and exposes
//! each object's path for `include_bytes_aligned!`: `FABRICLB_BPF_OBJECT`
//! (production, carried by the `fabriclb` binary), `FABRICLB_BPF_BENCH_OBJECT`
//! (the benchmark's), `FABRICLB_BPF_SINK_OBJECT` (the testbed's receiver) and
//! `FABRICLB_BPF_GEN_OBJECT` (the testbed's live-frames generator); and
//! `FABRICLB_COMMIT`, the commit it was built from.
//! `cargo xtask setup` installs the toolchain and bpf-linker this needs.

use std::{
    env,
    path::{Path, PathBuf},
    process::Command,
};

fn main() {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let workspace = manifest_dir
        .parent()
        .expect("lb-userspace sits in the workspace");
    let ebpf = workspace.join("lb-ebpf");
    for watched in [
        "lb-ebpf/src",
        "lb-ebpf/Cargo.toml",
        "lb-ebpf/frame/src",
        "lb-ebpf/frame/Cargo.toml",
        "lb-ebpf/Cargo.lock",
        "lb-ebpf/.cargo/config.toml",
        "lb-ebpf/rust-toolchain.toml",
        "lb-common/src",
        "lb-common/Cargo.toml",
    ] {
        println!(
            "cargo:rerun-if-changed={}",
            workspace.join(watched).display()
        );
    }
    let target_dir = env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target"))
        .join("bpf");

    let mut cargo = Command::new("cargo");
    // The outer cargo's toolchain and flags must not leak into the nightly
    // build; rust-toolchain.toml in lb-ebpf picks the toolchain.
    for var in [
        "RUSTUP_TOOLCHAIN",
        "RUSTC",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTDOC",
        "CARGO",
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "CARGO_MAKEFLAGS",
    ] {
        cargo.env_remove(var);
    }
    cargo
        .current_dir(&ebpf)
        .args([
            "build",
            "--release",
            "--locked",
            "--target",
            "bpfel-unknown-none",
            "-Z",
            "build-std=core",
        ])
        .arg("--target-dir")
        .arg(&target_dir);
    let status = cargo
        .status()
        .unwrap_or_else(|e| panic!("running cargo for lb-ebpf: {e}"));
    if !status.success() {
        panic!(
            "building the XDP objects failed ({status}); `cargo xtask setup` installs the pinned nightly and bpf-linker it needs"
        );
    }
    commit(workspace);
    // lb-ebpf's bins, one object each.
    for (env, bin) in [
        ("FABRICLB_BPF_OBJECT", "fabriclb"),
        ("FABRICLB_BPF_BENCH_OBJECT", "fabriclb-bench"),
        ("FABRICLB_BPF_SINK_OBJECT", "fabriclb-sink"),
        ("FABRICLB_BPF_GEN_OBJECT", "fabriclb-gen"),
    ] {
        let object = target_dir.join("bpfel-unknown-none/release").join(bin);
        assert!(
            Path::new(&object).exists(),
            "no eBPF object at {}",
            object.display()
        );
        println!("cargo:rustc-env={env}={}", object.display());
    }
}

/// `FABRICLB_COMMIT`: the checkout's commit, which `--version` and the
/// daemon's first log line name, so that a binary on a switch says what it
/// was built from; "unknown" outside a git checkout (a source tarball).
fn commit(workspace: &Path) {
    let git = |args: &[&str]| {
        Command::new("git")
            .current_dir(workspace)
            .args(args)
            .output()
            .ok()
            .filter(|out| out.status.success())
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=FABRICLB_COMMIT={commit}");
    // A new commit moves HEAD or the branch it names, loose or packed.
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        for watched in ["HEAD", "refs/heads", "packed-refs"] {
            let path = Path::new(&dir).join(watched);
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
}
