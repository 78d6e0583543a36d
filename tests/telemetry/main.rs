//! Each telemetry source against the real thing it reads: rtnetlink in a
//! namespace of the test's own, a `redis-server` the test starts on a
//! private socket, `prometheus-node-exporter` in a namespace. Each test
//! also feeds its source silence and garbage. `sonic`: `run --sonic`'s
//! reader and publisher against the same `redis-server`.

mod counters_db;
mod linux;
mod remote;
mod sonic;
