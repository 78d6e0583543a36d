//! A flow event as `fabriclb watch` and the daemon's log show it: the
//! data plane's ids turned into the config's names.

use std::fmt;
use std::net::IpAddr;

use lb_common::abi::events::{
    CAUSE_CHOICE, CAUSE_DRAIN, CAUSE_FAILOVER, CAUSE_OVERRIDE, EVENT_MOVE, EVENT_OVERRIDE_FALLBACK,
};
use lb_common::packet::parse::FlowFields;
use serde::{Deserialize, Serialize};

use crate::config::NextHopSpec;

/// What happened.
pub const FLOWLET_MOVE: &str = "flowlet_move";
pub const OVERRIDE_FALLBACK: &str = "override_fallback";
pub const NEXT_HOP_DOWN: &str = "next_hop_down";
pub const NEXT_HOP_UP: &str = "next_hop_up";
pub const DRAIN_ENDED: &str = "drain_ended";

/// One event, a JSON line of `fabriclb watch --json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WatchEvent {
    /// Wall clock, ns since the epoch.
    pub time_unix_ns: u64,
    pub event: String,
    /// Why: a move's `choice`, `failover`, `override` or `drain`; a next
    /// hop's `unusable` or `usable`. A short word of a few: metrics count
    /// by it.
    pub cause: String,
    /// A next hop's reason for being unusable, in the log's words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub group: String,
    /// The destination whose qualities steered it, when not the group's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow: Option<Flow>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<PathEnd>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<PathEnd>,
    /// How long the flow had been idle, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gap_us: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "override")]
    pub override_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u32>,
}

/// A flow's five-tuple and RoCEv2 destination QP.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Flow {
    pub protocol: u8,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub src_port: u16,
    pub dst_port: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qp: Option<u32>,
}

impl Flow {
    pub fn of(fields: &FlowFields) -> Self {
        let address = |bytes: [u8; 16]| -> IpAddr {
            if fields.is_ipv6 {
                bytes.into()
            } else {
                [bytes[0], bytes[1], bytes[2], bytes[3]].into()
            }
        };
        Self {
            protocol: fields.protocol,
            src: address(fields.src),
            dst: address(fields.dst),
            src_port: fields.src_port,
            dst_port: fields.dst_port,
            qp: (fields.dest_qp != 0).then_some(fields.dest_qp),
        }
    }
}

/// One side of a move: the next hop as the metrics label it, and how the
/// choice saw it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PathEnd {
    pub interface: String,
    pub address: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan: Option<u16>,
    /// Path quality toward the destination (1024 is telemetry's
    /// default, a path's worth with none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<u32>,
    /// Its telemetry's band then (0 best, 7 worst), where it has some.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub band: Option<u32>,
    /// Recent load as the choice weighed it, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_bytes: Option<u64>,
}

impl WatchEvent {
    /// A group's event, now.
    pub fn of_group(event: &str, cause: impl Into<String>, group: impl Into<String>) -> Self {
        Self {
            time_unix_ns: super::now_unix_ns(),
            event: event.into(),
            cause: cause.into(),
            group: group.into(),
            reason: None,
            destination: None,
            flow: None,
            from: None,
            to: None,
            gap_us: None,
            override_name: None,
            cpu: None,
        }
    }

    /// Next hop `spec` of `group` became usable, or not for `reason`: its
    /// flows fail over (or its buckets come back) now.
    pub fn of_next_hop(
        group: &str,
        spec: &NextHopSpec,
        usable: bool,
        reason: Option<String>,
    ) -> Self {
        let end = PathEnd::of(spec);
        let (event, cause, from, to) = if usable {
            (NEXT_HOP_UP, "usable", None, Some(end))
        } else {
            (NEXT_HOP_DOWN, "unusable", Some(end), None)
        };
        Self {
            from,
            to,
            reason,
            ..Self::of_group(event, cause, group)
        }
    }
}

impl PathEnd {
    /// Next hop `spec`, named as the metrics label it; nothing seen of it.
    pub fn of(spec: &NextHopSpec) -> Self {
        Self {
            interface: spec.interface.clone(),
            address: spec.addr.to_string(),
            vlan: spec.vlan,
            quality: None,
            band: None,
            load_bytes: None,
        }
    }
}

/// What a line of `fabriclb watch`'s stream holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum WatchLine {
    Event(Box<WatchEvent>),
    /// Events this client missed: it read slower than they came.
    Lost {
        lost: u64,
    },
}

/// The names of a data-plane event's kind and cause.
pub fn kind_name(kind: u32) -> &'static str {
    match kind {
        EVENT_MOVE => FLOWLET_MOVE,
        EVENT_OVERRIDE_FALLBACK => OVERRIDE_FALLBACK,
        _ => "unknown",
    }
}

pub fn cause_name(cause: u32) -> &'static str {
    match cause {
        CAUSE_CHOICE => "choice",
        CAUSE_FAILOVER => "failover",
        CAUSE_OVERRIDE => "override",
        CAUSE_DRAIN => "drain",
        _ => "unknown",
    }
}

fn protocol(number: u8) -> String {
    match number {
        6 => "tcp".into(),
        17 => "udp".into(),
        n => format!("proto {n}"),
    }
}

impl fmt::Display for Flow {
    /// `udp 10.0.0.1:49152 -> 10.1.2.3:4791 qp 0x1a2b`, as `explain`
    /// takes a packet.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let end = |ip: IpAddr, port: u16| match ip {
            IpAddr::V4(ip) => format!("{ip}:{port}"),
            IpAddr::V6(ip) => format!("[{ip}]:{port}"),
        };
        write!(
            f,
            "{} {} -> {}",
            protocol(self.protocol),
            end(self.src, self.src_port),
            end(self.dst, self.dst_port)
        )?;
        if let Some(qp) = self.qp {
            write!(f, " qp {qp:#x}")?;
        }
        Ok(())
    }
}

impl fmt::Display for PathEnd {
    /// `up3 10.0.4.1 (quality 128, band 7, load 45056 B)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.interface, self.address)?;
        if let Some(vlan) = self.vlan {
            write!(f, " vlan {vlan}")?;
        }
        let mut seen = Vec::new();
        if let Some(quality) = self.quality {
            seen.push(format!("quality {quality}"));
        }
        if let Some(band) = self.band {
            seen.push(format!("band {band}"));
        }
        if let Some(load) = self.load_bytes {
            seen.push(format!("load {load} B"));
        }
        if !seen.is_empty() {
            write!(f, " ({})", seen.join(", "))?;
        }
        Ok(())
    }
}

impl fmt::Display for WatchEvent {
    /// One line: time of day (UTC), group, what and why, the flow, from
    /// and to, the gap.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let of_day = self.time_unix_ns % (86_400 * 1_000_000_000);
        let (secs, micros) = (of_day / 1_000_000_000, of_day % 1_000_000_000 / 1_000);
        write!(
            f,
            "{:02}:{:02}:{:02}.{micros:06} {} {} ({})",
            secs / 3600,
            secs / 60 % 60,
            secs % 60,
            self.group,
            self.event,
            self.reason.as_deref().unwrap_or(&self.cause)
        )?;
        if let Some(destination) = &self.destination {
            write!(f, " toward {destination}")?;
        }
        if let Some(name) = &self.override_name {
            write!(f, " override {name}")?;
        }
        if let Some(flow) = &self.flow {
            write!(f, " {flow}")?;
        }
        match (&self.from, &self.to) {
            (Some(from), Some(to)) => write!(f, ": {from} -> {to}")?,
            (Some(from), None) => write!(f, ": {from}")?,
            (None, Some(to)) => write!(f, ": -> {to}")?,
            (None, None) => {}
        }
        if let Some(gap) = self.gap_us {
            write!(f, " after {gap} us idle")?;
        }
        Ok(())
    }
}
