//! The running daemon: what it holds, each concern's state in a type of
//! that concern's own (the config file's watch, links and neighbours, the
//! box's addresses, the kernel's routes, telemetry, SONiC, the ingress
//! ports, the service manager), and the handlers that carry an event from
//! one concern into the others and into the tables. The concerns' modules know nothing of this
//! one: the daemon room's imports run one way, from here down.

mod event_loop;
mod flow_events;
mod kernel_routes;
mod link_events;
mod links;
mod local;
mod metrics;
mod peer_load;
mod ports;
mod privileges;
mod reload;
mod sonic;
mod telemetry;

pub use event_loop::{Options, run};

use crate::config::Config;
use crate::daemon::config_file::ConfigWatch;
use crate::daemon::flow_events::FlowEvents;
use crate::daemon::ingress::IngressPorts;
use crate::daemon::kernel_routes::KernelWatch;
use crate::daemon::link_events::LinkWatch;
use crate::daemon::links::Ongoing;
use crate::daemon::loads::Loads;
use crate::daemon::local::Follower;
use crate::daemon::notify::ServiceManager;
use crate::daemon::peer_load::PeerLoads;
use crate::daemon::sonic::Sonic;
use crate::daemon::telemetry::Telemetry;
use crate::dataplane::tables::Tables;

/// What the daemon runs on: the config in force, the tables it made, the
/// box's own addresses, where the program is attached, and the paths'
/// telemetry.
struct Running {
    /// What the tables are built from: the file's config with the routes
    /// and groups learned from the kernel in place of the groups that
    /// follow it.
    config: Config,
    /// The config as the file has it (with SONiC's settings over it under
    /// `--sonic`).
    file: Config,
    /// The kernel's routes, for the groups that follow them.
    kernel: KernelWatch,
    /// The config file's version in force, and a changed one settling.
    watch: ConfigWatch,
    tables: Tables,
    local: Follower,
    /// Links and neighbours, followed by events.
    links: LinkWatch,
    ingress: IngressPorts,
    telemetry: Telemetry,
    /// What the other CPUs' flows put on each next hop, told to each CPU.
    peer_loads: PeerLoads,
    /// What the refreshes keep finding wrong, logged once each.
    ongoing: Ongoing,
    /// `run --sonic`: SONiC's settings, which `file` has over the config
    /// file's.
    sonic: Option<Sonic>,
    /// systemd, when it started the daemon: told when it is ready and
    /// around each reload.
    manager: ServiceManager,
    /// Whether the last load took the config, and when the one in force
    /// was: for the metrics.
    loads: Loads,
    /// The data plane's flow events and the daemon's own, to the log and
    /// `fabriclb watch`.
    flow_events: FlowEvents,
}
