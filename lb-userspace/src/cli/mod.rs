//! The `fabriclb` command line: one module per subcommand, each with its
//! arguments and its body; this file only parses and dispatches.

pub mod check_config;
mod docs;
mod explain;
#[cfg(feature = "tooling")]
mod generate;
mod names;
mod pins;
mod reload;
mod run;
mod simulate;
mod status;
mod stop;
#[cfg(feature = "tooling")]
mod testbed;
mod watch;

use clap::{Parser, Subcommand};

/// fabriclb: an XDP load balancer for AI-training fabrics.
#[derive(Parser)]
#[command(name = "fabriclb", version = fabriclb::VERSION, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Load the XDP program, program it from the config and forward until
    /// SIGINT or SIGTERM, which leave it forwarding (pinned in bpffs) for
    /// the next `run` to take over.
    Run(run::RunArgs),
    /// Ask the running daemon to reload its config; fails with the
    /// daemon's reason when it refused the config and kept the running one.
    Reload(reload::ReloadArgs),
    /// Stop the daemon of an instance, leaving its program forwarding;
    /// with --detach remove the program and its maps for good.
    Stop(stop::StopArgs),
    /// Validate config files without touching the kernel.
    CheckConfig(check_config::CheckConfigArgs),
    /// Per group: mode, next hops, their loads and counters, flowlet
    /// table occupancy, verdict counters; read from the pinned maps.
    Status(status::StatusArgs),
    /// The running daemon's flow events, live: flowlets that moved (and
    /// why: the choice, a failover, an override, a drain), overrides
    /// that fell back, next hops leaving and coming back, drains ending.
    Watch(watch::WatchArgs),
    /// What the data plane does with a packet (described, or each frame
    /// of a pcap file): verdict, route, group, hash, bucket, flowlet
    /// state, next hop.
    Explain(explain::ExplainArgs),
    /// A capture or a described collective through a config's choice, in
    /// memory: per mode, each next hop's share, busiest over mean,
    /// flowlets and moves, in-message reorders. No switch, no root.
    Simulate(simulate::SimulateArgs),
    /// Print shell completions for fabriclb: bash, zsh, fish, elvish or
    /// powershell (the package installs bash's, zsh's and fish's).
    Completions { shell: clap_complete::Shell },
    /// Write the man pages (roff) into a directory, as the package
    /// installs them: fabriclb.1 and fabriclb-SUBCOMMAND.1 for each.
    #[command(hide = true)]
    Man { dir: std::path::PathBuf },
    /// A leaf-spine fabric in network namespaces, for trying fabriclb out.
    #[cfg(feature = "tooling")]
    Testbed {
        #[command(subcommand)]
        command: testbed::TestbedCommand,
    },
    /// Send RoCEv2 traffic shaped like a collective (ring all-reduce or
    /// all-to-all) through an AF_PACKET TX ring.
    #[cfg(feature = "tooling")]
    Gen(generate::GenArgs),
}

impl Cli {
    pub fn run(self) -> anyhow::Result<()> {
        match self.command {
            Command::Run(args) => run::run(args),
            Command::Reload(args) => reload::run(args),
            Command::Stop(args) => stop::run(args),
            Command::CheckConfig(args) => check_config::run(args),
            Command::Status(args) => status::run(args),
            Command::Explain(args) => explain::run(args),
            Command::Simulate(args) => simulate::run(args),
            Command::Watch(args) => watch::run(args),
            Command::Completions { shell } => docs::completions(shell),
            Command::Man { dir } => docs::man(&dir),
            #[cfg(feature = "tooling")]
            Command::Testbed { command } => testbed::run(command),
            #[cfg(feature = "tooling")]
            Command::Gen(args) => generate::run(args),
        }
    }
}

/// The exit status of a command that failed with `error`: 78 (sysexits'
/// `EX_CONFIG`) when a config was refused, by `check-config`, by `run` at
/// start or by the daemon asked to `reload`, so that a unit can tell
/// systemd not to restart into the same config
/// (`RestartPreventExitStatus=78`); 1 for any other failure. Usage errors
/// exit with 2 before a command runs (clap's).
pub fn exit_status(error: &anyhow::Error) -> u8 {
    let refused = error.chain().any(|cause| {
        cause.is::<fabriclb::config::ConfigError>()
            || cause.is::<check_config::InvalidConfigs>()
            || cause.is::<reload::Refused>()
    });
    if refused { EXIT_CONFIG } else { 1 }
}

/// sysexits.h's `EX_CONFIG`.
pub const EXIT_CONFIG: u8 = 78;
