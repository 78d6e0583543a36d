//! fabriclb on a SONiC switch: the operator's hashing and adaptive-routing
//! settings read from SONiC's Redis and laid over the config file, and the
//! next hops' counters published where SONiC's tooling reads counters.
//!
//! Read (database numbers from sonic-buildimage's `database_config.json`,
//! separators from sonic-swss-common's `schema.h`: `|` in CONFIG_DB, `:`
//! in APPL_DB and COUNTERS_DB):
//!
//! | database | key | field | becomes | follows |
//! |---|---|---|---|---|
//! | CONFIG_DB (4) | `SWITCH_HASH\|GLOBAL` | `ecmp_hash@` (or `ecmp_hash`): `SRC_IP,DST_IP,IP_PROTOCOL,L4_SRC_PORT,L4_DST_PORT,RDMA_BTH_DEST_QP` | every group's `hash_fields` | `sonic-hash.yang` |
//! | APPL_DB (0) | `SWITCH_TABLE:switch` | `ecmp_hash_seed` | `switch.hash_seed` | swss `switch.json`, `switchorch.cpp` |
//! | CONFIG_DB | `ARS_PROFILE\|<name>` | `algorithm`, `sampling_interval`, `past_load_*`, `current_load_min_value`/`_max_value`, `future_load_*` | `[ars_profile]` (the file's units) | `sonic-ars.yang` |
//! | CONFIG_DB | `ARS_PROFILE\|<name>` | `ars_nhg_path_selector_mode` (`global`, `interface`, `nexthop`), `default_ars_object` | which ARS object a group takes | `sonic-ars.yang` |
//! | CONFIG_DB | `ARS_OBJECT\|<name>` | `assign_mode` (`per_flowlet_quality`, `per_packet_quality`), `flowlet_idle_time` | the group's `mode` (`flowlet`, `per-packet`) and `flowlet_gap_us` | `sonic-ars.yang` |
//! | CONFIG_DB | `ARS_INTERFACE\|<port>`, `ARS_NEXTHOP\|default\|<ip>` | `ars_obj_name` | the ARS object of next hops on that port, or to that IP | `sonic-ars.yang` |
//! | APPL_DB | `ROUTE_TABLE:<prefix>` (the default VRF's) | `nexthop`, `ifname`, `weight`, `nexthop_group`, `blackhole`, `protocol` | the routes of groups with `sonic_routes` | `swss-schema.md`, `routeorch.cpp` |
//! | APPL_DB | `NEXTHOP_GROUP_TABLE:<id>` | `nexthop`, `ifname`, `weight` | a route's next hops by `nexthop_group` | `nhgorch.cpp` |
//! | APPL_DB | `FABRICLB_OVERRIDE_TABLE:<name>` | `dst`, `src`, `ingress`, `dest_qp`, `nexthop`, `ifname`, `vlan` | overrides after the file's `[[override]]`s | fabriclb's own, written by a traffic-engineering controller ([`overrides`]) |
//!
//! A group takes an ARS object the way SONiC gives one to a next-hop
//! group: by its members (a group learned from routes by its learned next
//! hops, the daemon laying the overlay over them too). In `interface` mode (SONiC's default) each next
//! hop's egress interface is looked up in `ARS_INTERFACE` (SONiC names a
//! port's netdev after the port, `Ethernet0`), in `nexthop` mode its IP in
//! `ARS_NEXTHOP`, in `global` mode every group takes `default_ars_object`.
//! A group whose next hops all lead to one object takes its mode and idle
//! time; one none of whose next hops do keeps the file's; one split
//! between objects (or between an object and none) is refused with its
//! keys and keeps the file's. No `ARS_PROFILE` row: no ARS at all, as in
//! SONiC.
//!
//! Fields SONiC has and fabriclb cannot apply (`max_flows`,
//! `ipv4_enable`, `primary_path_threshold`, `scaling_factor`, the per
//! packet type and LAG hash lists, ...) are not read. A field that is
//! neither, or a value out of its range, is logged once with its key,
//! field and reason and ignored; the rest applies.
//!
//! Written, at the metrics tick, to COUNTERS_DB (2): per next hop a hash
//! `COUNTERS:fabriclb:<group>|<interface>|<address>` with `packets`,
//! `bytes`, `sprayed_packets`, `quality`, `usable` (`1`/`0`) and, with
//! telemetry, `quality_band`; and the name map
//! `COUNTERS_FABRICLB_NEXTHOP_NAME_MAP`, `<group>|<interface>|<address>`
//! -> `fabriclb:<group>|<interface>|<address>`, as SONiC's
//! `COUNTERS_PORT_NAME_MAP` maps a port to its counters' key. Only current
//! next hops: keys of next hops gone are deleted.
//!
//! [`rows`] is what is read, [`overlay`] what it means for a config (pure),
//! [`routes`] APPL_DB's routes read into prefixes and next hops (pure),
//! [`overrides`] a controller's override rows (pure),
//! [`follow`] the thread that reads and follows Redis, [`publish`] the
//! thread that writes the counters.

pub mod follow;
pub mod overlay;
pub mod overrides;
pub mod publish;
pub mod routes;
pub mod rows;

pub use follow::Follower;
pub use overlay::{Overlay, Refusal};
pub use overrides::OverrideRows;
pub use publish::{NextHopCounters, Publisher};
pub use routes::ApplRoutes;
pub use rows::Rows;

/// SONiC's database numbers (`database_config.json`).
pub const APPL_DB: i64 = 0;
pub const COUNTERS_DB: i64 = 2;
pub const CONFIG_DB: i64 = 4;
/// Where portsorch writes each port's operational state (its speed).
pub const STATE_DB: i64 = 6;
