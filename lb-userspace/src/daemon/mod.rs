//! The daemon behind `fabriclb run`. Each concern owns its state behind
//! narrow methods and imports nothing of the running daemon: [`adopt`]
//! starts onto a pinned instance; [`ingress`] keeps the program on the
//! ingress interfaces and [`ports`] their MACs in the maps;
//! [`config_file`] watches the config file; [`links`] resolves next hops
//! against the kernel's links and neighbours and probes them,
//! [`link_events`] follows their events; [`kernel_routes`] learns routes
//! and groups from the kernel's routing table; [`local`] follows the box's
//! own addresses; [`telemetry`] turns path telemetry into path quality;
//! [`peer_load`] tells each CPU the next-hop loads the others placed;
//! [`metrics_file`] renders the counters and [`http`] serves them;
//! [`privileges`] checks the capabilities at start; [`sonic`] lays
//! SONiC's settings over the config file; [`control`] takes `fabriclb
//! reload`'s requests and [`notify`] tells systemd how the daemon is.
//! [`running`] is the daemon above them: what it holds, the event loop,
//! and the handlers that carry each event from its concern into the
//! others and the tables.

mod adopt;
mod config_file;
pub mod control;
pub mod flow_events;
mod http;
mod ingress;
mod kernel_routes;
mod link_events;
mod links;
mod loads;
mod local;
mod metrics_file;
mod notify;
mod peer_load;
mod ports;
mod privileges;
mod running;
mod sonic;
mod telemetry;

pub use http::{ListenError, parse_listen};
pub use privileges::{PrivilegeError, require_at_start};
pub use running::{Options, run};
pub use sonic::effective_config;

/// The next request a listener's task hands the event loop (a scrape, a
/// reload): never, without a listener or once its task has stopped, so
/// the loop's `select!` simply waits on its other events.
async fn next_request<T>(requests: Option<&mut tokio::sync::mpsc::Receiver<T>>) -> T {
    match requests {
        Some(requests) => match requests.recv().await {
            Some(request) => request,
            None => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
}
