//! Developer tasks for fabriclb, run as `cargo xtask <command>`.
//!
//! This crate deliberately depends on no other workspace crate: lb-userspace's
//! build script needs the pinned nightly and bpf-linker, which `setup` installs,
//! so xtask must compile before any of that exists.

mod dist;
mod elf;
mod install;
mod layout;
mod product;
mod retry;
mod setup;
mod smoke;
mod targets;

use std::{
    env, fmt,
    os::unix::process::ExitStatusExt,
    path::{Path, PathBuf},
    process::{Command, ExitCode, ExitStatus},
};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(about = "fabriclb developer tasks")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Install the pinned eBPF nightly, bpf-linker and the tools the tests need (idempotent)
    Setup,
    /// The checks `test` runs before the suite, in seconds and without root:
    /// the layout (file length, no test tooling in the product), rustfmt and
    /// clippy (the product alone and the eBPF crate too)
    Lint,
    /// Set up the build's tools (the pinned nightly, bpf-linker), then build the release
    /// `fabriclb` binary, testbed included, with the eBPF object embedded
    Build,
    /// Run setup, then rustfmt, clippy (the eBPF crate too), the test suite,
    /// the package (built, its binary checked to be static and carry no
    /// tooling, installed into an empty root, run, and purged), the arm64
    /// cross-build, a minute's parser campaign and the quick bench (must
    /// run as root)
    Test {
        /// Arguments for the test harness, e.g. `cargo xtask test -- --nocapture`
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// Build the switch's binary (without the testbed; static, for musl)
    /// and its Debian package: target/dist/fabriclb_VERSION_ARCH.deb
    Dist,
    /// Run setup, then the data-plane benchmarks (program cost, balance, forwarding cost, adaptive routing); writes target/bench/ (must run as root)
    Bench,
    /// Run build, then `fabriclb testbed demo`; with no arguments, then also the
    /// slow-spine, slow-spine-lossless, bgp-slow-spine, spine-slowdown, cross-traffic, link-down, restart, bgp-drain, sonic and te-override scenarios (JSON in target/demo/)
    Demo {
        /// Extra arguments for `fabriclb testbed demo`
        #[arg(last = true)]
        args: Vec<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run_command(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            // Pass a failed child's exit code through so callers (CI, `demo`
            // scripts) see the real status rather than a generic 1.
            let code = err
                .downcast_ref::<Failed>()
                .and_then(|f| f.exit_code())
                .and_then(|c| u8::try_from(c).ok())
                .filter(|&c| c != 0)
                .unwrap_or(1);
            ExitCode::from(code)
        }
    }
}

fn run_command(command: Cmd) -> Result<()> {
    let root = workspace_root();
    match command {
        Cmd::Setup => setup::setup(&root),
        Cmd::Lint => setup::build_tools(&root).and_then(|()| lint(&root)),
        Cmd::Build => build(&root),
        Cmd::Test { args } => test(&root, &args),
        Cmd::Bench => bench(&root),
        Cmd::Dist => setup::build_tools(&root).and_then(|()| dist::dist(&root).map(drop)),
        Cmd::Demo { args } => demo(&root, &args),
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}

fn build(root: &Path) -> Result<()> {
    setup::build_tools(root)?;
    run(cargo(root).args(["build", "--release", "-p", "lb-userspace"]))
        .context("release build failed")
}

fn test(root: &Path, harness_args: &[String]) -> Result<()> {
    // Checked before anything slow so a non-root run fails in milliseconds
    // instead of after fmt and clippy.
    if !setup::is_root()? {
        bail!(
            "`cargo xtask test` must run as root: the tests attach XDP programs \
             and create network namespaces"
        );
    }
    setup::setup(root)?;
    lint(root)?;
    retry::test_step(root, harness_args).context("step `test` failed")?;
    // After the tests, which built the development binary, and before the
    // bench, which builds the release one with the tooling again.
    println!("xtask test: package: cargo xtask dist, then installed into an empty root");
    let package = dist::dist(root).context("step `package` failed")?;
    product::check(
        root,
        &package.binary,
        &target_dir(root).join("debug/fabriclb"),
    )
    .context("step `product` failed")?;
    install::check(root, &package.deb).context("step `package` failed")?;
    targets::cross_check(root).context("step `cross-build` failed")?;
    step(
        "parser campaign",
        cargo(root)
            .env("PARSER_CAMPAIGN_SECONDS", PARSER_CAMPAIGN_SECONDS)
            .args(["test", "-p", "lb-userspace", "--test", "parser"])
            .args(["--", "--ignored", "--exact", "campaign"]),
    )?;
    step(
        "bench (quick)",
        cargo(root).env("FABRICLB_BENCH_QUICK", "1").args(BENCH),
    )
}

/// What `test` checks before the suite, and needs no root: the layout,
/// rustfmt and clippy (the product alone and the eBPF crate too).
fn lint(root: &Path) -> Result<()> {
    println!(
        "xtask test: layout: at most {} lines a file; the product imports no test tooling",
        layout::MAX_LINES
    );
    layout::check(root).context("step `layout` failed")?;
    step("fmt", cargo(root).args(["fmt", "--all", "--", "--check"]))?;
    // lb-ebpf is its own workspace, so `--all` skips it. Its rust-toolchain.toml
    // pins a minimal-profile nightly without rustfmt, hence `+stable`. Its
    // packages are named: `--all` there would reach the host workspace too,
    // through lb-common.
    step(
        "fmt (lb-ebpf)",
        Command::new("cargo").current_dir(root).args([
            "+stable",
            "fmt",
            "--manifest-path",
            "lb-ebpf/Cargo.toml",
            "--package",
            "lb-ebpf",
            "--package",
            "lb-ebpf-frame",
            "--",
            "--check",
        ]),
    )?;
    step(
        "clippy",
        cargo(root).args([
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ]),
    )?;
    // What ships: the product without the tooling, whose cfg'd-out code
    // can leave imports and items unused that the full build uses.
    step(
        "clippy (product)",
        cargo(root).args([
            "clippy",
            "-p",
            "lb-userspace",
            "--no-default-features",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ]),
    )?;
    step(
        "clippy (lb-ebpf, bpfel-unknown-none)",
        &mut ebpf_clippy(root),
    )?;
    Ok(())
}

/// How long the test run's parser campaign runs on random seeds: a
/// minute of CI's budget; the README's 15 minutes are run by hand.
const PARSER_CAMPAIGN_SECONDS: &str = "60";

/// `cargo` arguments that run the data-plane benchmarks.
const BENCH: [&str; 5] = ["bench", "-p", "lb-userspace", "--bench", "dataplane"];

/// Clippy on the eBPF crate for its own target, with the toolchain its
/// rust-toolchain.toml pins: `--workspace` above never reaches it.
fn ebpf_clippy(root: &Path) -> Command {
    let mut cmd = Command::new("cargo");
    // The outer cargo's toolchain and flags must not leak in (as in
    // lb-userspace/build.rs, which builds the same crate): lb-ebpf's
    // rust-toolchain.toml picks the toolchain.
    for var in [
        "RUSTUP_TOOLCHAIN",
        "RUSTC",
        "RUSTC_WRAPPER",
        "RUSTFLAGS",
        "CARGO",
        "CARGO_TARGET_DIR",
    ] {
        cmd.env_remove(var);
    }
    cmd.current_dir(root.join("lb-ebpf"))
        .args([
            "clippy",
            "--release",
            "--locked",
            "--target",
            "bpfel-unknown-none",
            "-Z",
            "build-std=core",
            "--target-dir",
        ])
        .arg(target_dir(root).join("bpf"))
        .args(["--", "-D", "warnings"]);
    cmd
}

fn bench(root: &Path) -> Result<()> {
    setup::setup(root)?;
    step("bench", cargo(root).args(BENCH))
}

/// The scenarios a bare `cargo xtask demo` runs after the default demo: the
/// adaptive-routing results, failover, a hitless restart (about 10 s), a
/// spine drained by BGP (about 15 s), the leaf driven from SONiC's
/// CONFIG_DB (about 15 s), a controller's overrides (about 30 s), and
/// four leaves steering at once around a slow port (about 75 s) and a
/// slowed spine (about 40 s), and 64 QPs over 16 spines beside
/// `fabriclb simulate`'s prediction (about 20 s).
const HEADLINE_SCENARIOS: [&str; 14] = [
    "slow-spine",
    "slow-spine-lossless",
    "bgp-slow-spine",
    "spine-slowdown",
    "cross-traffic",
    "link-down",
    "restart",
    "bgp-drain",
    "sonic",
    "te-override",
    "fabric-slow-link",
    "fabric-bgp",
    "fabric-herd",
    "simulate-16",
];

fn demo(root: &Path, args: &[String]) -> Result<()> {
    setup::setup(root)?;
    build(root)?;
    let bin = target_dir(root).join("release").join("fabriclb");
    let demo = |extra: &[&str]| {
        run(Command::new(&bin)
            .current_dir(root)
            .args(["testbed", "demo"])
            .args(extra))
    };
    if !args.is_empty() {
        return demo(&args.iter().map(String::as_str).collect::<Vec<_>>());
    }
    demo(&[])?;
    std::fs::create_dir_all(root.join("target/demo")).context("creating target/demo")?;
    for name in HEADLINE_SCENARIOS {
        demo(&[
            "--scenario",
            name,
            "--json",
            &format!("target/demo/{name}.json"),
        ])?;
    }
    println!(
        "xtask demo: the scenarios' reports are in {0}/target/demo/NAME.json, their charts \
         beside them as NAME.svg",
        root.display()
    );
    Ok(())
}

/// Honours `CARGO_TARGET_DIR` so `demo` finds the binary `build` just produced.
pub(crate) fn target_dir(root: &Path) -> PathBuf {
    match env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => root.join(dir),
        None => root.join("target"),
    }
}

pub(crate) fn cargo(root: &Path) -> Command {
    let mut cmd = Command::new("cargo");
    cmd.current_dir(root);
    cmd
}

fn step(name: &str, cmd: &mut Command) -> Result<()> {
    println!("xtask test: {name}: {}", describe(cmd));
    run(cmd).with_context(|| format!("step `{name}` failed"))
}

/// A child process that ran but exited unsuccessfully.
#[derive(Debug)]
struct Failed {
    command: String,
    status: ExitStatus,
}

impl Failed {
    fn exit_code(&self) -> Option<i32> {
        self.status
            .code()
            .or_else(|| self.status.signal().map(|s| 128 + s))
    }
}

impl fmt::Display for Failed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` failed ({})", self.command, self.status)
    }
}

impl std::error::Error for Failed {}

/// Runs `cmd` with inherited stdio, failing unless it exits successfully.
pub(crate) fn run(cmd: &mut Command) -> Result<()> {
    let command = describe(cmd);
    let status = cmd
        .status()
        .with_context(|| format!("failed to start `{command}`"))?;
    if !status.success() {
        return Err(Failed { command, status }.into());
    }
    Ok(())
}

/// Runs `cmd` and returns its stdout, failing unless it exits successfully.
pub(crate) fn capture(cmd: &mut Command) -> Result<String> {
    let command = describe(cmd);
    let out = cmd
        .output()
        .with_context(|| format!("failed to start `{command}`"))?;
    if !out.status.success() {
        bail!(
            "`{command}` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8(out.stdout).with_context(|| format!("`{command}` printed non-UTF-8 output"))
}

fn describe(cmd: &Command) -> String {
    let mut parts = vec![cmd.get_program().to_string_lossy().into_owned()];
    parts.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
    parts.join(" ")
}
