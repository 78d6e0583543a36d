//! The daemon behind `fabriclb run`: [`event_loop`] starts it and
//! dispatches events; [`state`] is what it holds; [`reload`] applies a new
//! config live; [`links`] keeps next hops in step with the kernel's links
//! and neighbours, [`link_events`] as they change; [`kernel_routes`]
//! learns routes and groups from the kernel's routing table; [`local`] keeps the
//! box's own addresses local in the route tries; [`telemetry`] turns path
//! telemetry into path quality; [`metrics_file`] writes the counters out
//! and [`http`] serves them; [`privileges`] checks the capabilities at
//! start and drops those it no longer needs; [`adopt`] starts onto a
//! pinned instance, taking over what it holds; [`sonic`] lays SONiC's
//! settings over the config file and publishes counters to its Redis.

mod adopt;
mod config_file;
mod event_loop;
mod http;
mod ingress;
mod kernel_routes;
mod link_events;
mod links;
mod local;
mod metrics_file;
mod ports;
mod privileges;
mod reload;
mod sonic;
mod state;
mod telemetry;

pub use event_loop::{Options, run};
pub use http::{ListenError, parse_listen};
pub use privileges::{PrivilegeError, require_at_start};
pub use sonic::effective_config;
