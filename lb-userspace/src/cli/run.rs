//! `fabriclb run`: the daemon.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use fabriclb::daemon;
use fabriclb::telemetry::counters_db::Address;

use super::pins::PinArgs;
use super::reload::ControlArgs;

#[derive(clap::Args)]
pub struct RunArgs {
    #[arg(long, short)]
    config: PathBuf,
    /// Write a Prometheus text-format snapshot of the counters here.
    #[arg(long)]
    metrics_file: Option<PathBuf>,
    /// Serve the same exposition over HTTP at `GET /metrics`: PORT (on
    /// 127.0.0.1) or ADDRESS:PORT, e.g. 127.0.0.1:9464.
    #[arg(long, value_name = "[ADDRESS:]PORT", value_parser = daemon::parse_listen)]
    metrics_listen: Option<SocketAddr>,
    /// How often the metrics file is rewritten, in milliseconds (1 or more).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    metrics_interval_ms: u64,
    /// How often links and neighbours are re-read, in milliseconds (1 or
    /// more), as a backstop: their events take effect at once.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    refresh_interval_ms: u64,
    /// How often the neighbour of each IP next hop is probed (one ARP
    /// request or neighbour solicitation), in milliseconds (1 or more): a
    /// next hop whose MAC changes unannounced is followed within about
    /// this long. Each tick also has the kernel check neighbours it no
    /// longer confirms (STALE) and resolve missing ones.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..))]
    probe_interval_ms: u64,
    /// Reload only on SIGHUP, not also when the config file changes.
    #[arg(long)]
    no_watch: bool,
    /// SONiC's Redis (unix:/var/run/redis/redis.sock or redis://HOST:PORT):
    /// its CONFIG_DB hash and ARS settings over the file's, followed live;
    /// the next hops' counters published to its COUNTERS_DB.
    #[arg(long, value_name = "ADDRESS")]
    sonic: Option<Address>,
    #[command(flatten)]
    pins: PinArgs,
    #[command(flatten)]
    control: ControlArgs,
}

pub fn run(args: RunArgs) -> anyhow::Result<()> {
    // Refused now rather than warned about at every interval.
    if let Some(path) = &args.metrics_file {
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        if let Some(dir) = dir.filter(|d| !d.is_dir()) {
            anyhow::bail!(
                "--metrics-file {}: the directory {} does not exist",
                path.display(),
                dir.display()
            );
        }
    }
    // Before anything is loaded: one line naming what lacks, not the
    // verifier's refusal.
    daemon::require_at_start()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(daemon::run(daemon::Options {
        config: args.config,
        metrics_file: args.metrics_file,
        metrics_interval: Duration::from_millis(args.metrics_interval_ms),
        metrics_listen: args.metrics_listen,
        refresh_interval: Duration::from_millis(args.refresh_interval_ms),
        probe_interval: Duration::from_millis(args.probe_interval_ms),
        watch_config: !args.no_watch,
        bpffs: args.pins.bpffs,
        instance: args.pins.instance,
        run_dir: args.control.run_dir,
        sonic: args.sonic,
    }))
}
