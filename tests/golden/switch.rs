//! The switch every golden test programs: its seed, its own MAC and its
//! groups and routes.

/// Frames arrive addressed to this MAC and leave from it.
pub const LB_MAC: [u8; 6] = [0x02, 0xfa, 0xb0, 0, 0, 0x01];
pub const SEED: u32 = 0x5eed_1234;

pub const CONFIG: &str = r#"
[switch]
hash_seed = 0x5eed1234
interfaces = ["lo"]

[[group]]
name = "spines"
next_hops = [
  { interface = "lo", mac = "02:00:00:00:0a:01" },
  { interface = "lo", mac = "02:00:00:00:0a:02" },
  { interface = "lo", mac = "02:00:00:00:0a:03" },
  { interface = "lo", mac = "02:00:00:00:0a:04" },
]

[[group]]
name = "five-tuple"
hash_fields = ["src_ip", "dst_ip", "ip_protocol", "l4_src_port", "l4_dst_port"]
next_hops = [
  { interface = "lo", mac = "02:00:00:00:0b:01" },
  { interface = "lo", mac = "02:00:00:00:0b:02" },
  { interface = "lo", mac = "02:00:00:00:0b:03" },
  { interface = "lo", mac = "02:00:00:00:0b:04" },
]

[[group]]
name = "tagged"
next_hops = [{ interface = "lo", mac = "02:00:00:00:0c:01", vlan = 100 }]

[[group]]
name = "down"
next_hops = [{ interface = "lo", mac = "02:00:00:00:0d:01" }]

[[route]]
prefix = "10.1.0.0/16"
group = "spines"

[[route]]
prefix = "2001:db8:1::/48"
group = "spines"

[[route]]
prefix = "10.4.0.0/16"
group = "five-tuple"

[[route]]
prefix = "10.2.0.0/16"
group = "tagged"

[[route]]
prefix = "10.3.0.0/16"
group = "down"

[[group]]
name = "flowlet-sticky"
mode = "flowlet"
flowlet_gap_us = 1000000
next_hops = [
  { interface = "lo", mac = "02:00:00:00:0e:01" },
  { interface = "lo", mac = "02:00:00:00:0e:02" },
  { interface = "lo", mac = "02:00:00:00:0e:03" },
  { interface = "lo", mac = "02:00:00:00:0e:04" },
]

[[group]]
name = "flowlet"
mode = "flowlet"
flowlet_gap_us = 2000
next_hops = [
  { interface = "lo", mac = "02:00:00:00:0f:01" },
  { interface = "lo", mac = "02:00:00:00:0f:02" },
  { interface = "lo", mac = "02:00:00:00:0f:03" },
  { interface = "lo", mac = "02:00:00:00:0f:04" },
]

[[group]]
name = "per-packet"
mode = "per-packet"
flowlet_gap_us = 1000000
next_hops = [
  { interface = "lo", mac = "02:00:00:00:10:01" },
  { interface = "lo", mac = "02:00:00:00:10:02" },
  { interface = "lo", mac = "02:00:00:00:10:03" },
  { interface = "lo", mac = "02:00:00:00:10:04" },
]

[[group]]
name = "spray-all"
mode = "per-packet"
spray = "all"
flowlet_gap_us = 1000000
next_hops = [
  { interface = "lo", mac = "02:00:00:00:11:01" },
  { interface = "lo", mac = "02:00:00:00:11:02" },
  { interface = "lo", mac = "02:00:00:00:11:03" },
  { interface = "lo", mac = "02:00:00:00:11:04" },
]

[[route]]
prefix = "10.5.0.0/16"
group = "flowlet-sticky"

[[route]]
prefix = "10.6.0.0/16"
group = "flowlet"

[[route]]
prefix = "10.7.0.0/16"
group = "per-packet"

[[route]]
prefix = "10.8.0.0/16"
group = "spray-all"
"#;
