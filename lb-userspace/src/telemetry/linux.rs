//! The `linux` source: the box's own egress queue toward each path, as
//! the kernel keeps it for the path's egress interface.
//!
//! Per poll it takes one rtnetlink dump of every qdisc and one of every
//! link (not one per interface), and for each path reads:
//!
//! - **queued bytes** = the interface's root qdisc backlog
//!   (`TCA_STATS2`/`TCA_STATS_QUEUE`, what `tc -s qdisc` prints as
//!   `backlog`) + BQL's bytes in flight, summed over the transmit queues
//!   (`/sys/class/net/<dev>/queues/tx-*/byte_queue_limits/inflight`).
//!   Only the root qdisc is read: a classful or multiqueue root counts its
//!   children already. Checked with `tc -s qdisc` on kernel 6.18: an `mq`
//!   root over four `tbf` children on a four-queue veth showed backlog
//!   812760b = 151090 + 255290 + 151090 + 255290, its children's sum, and
//!   likewise for bytes sent; an `htb` root showed its bfifo class's
//!   backlog, a `tbf` root its inner fifo's. A device without BQL (veth, dummy and other
//!   `IFF_NO_QUEUE` or lockless devices: the kernel gives them no
//!   `byte_queue_limits` directory) counts 0 in flight, as does a
//!   `noqueue` root (veth's default) for the backlog.
//! - **tx bytes** = the link's `tx_bytes` (`IFLA_STATS64`), the driver's
//!   counter.
//!
//! What it cannot see:
//!
//! - Frames fabriclb forwards. `XDP_REDIRECT` hands frames to the egress
//!   driver's `ndo_xdp_xmit` and bypasses the qdisc layer and BQL's
//!   accounting entirely, so with fabriclb forwarding in XDP the qdisc
//!   backlog shows only the kernel stack's own traffic out of that
//!   interface (control plane, anything fabriclb passed to the kernel),
//!   and BQL shows driver ring occupancy of that traffic, where the driver
//!   supports BQL (BQL counts what the stack hands the driver). Whether
//!   `tx_bytes` counts redirected frames is up to the driver; this source
//!   was not tested with XDP forwarding.
//! - Anything beyond this box: the next hop's queues, the far links.
//!
//! Where it reads: the netlink socket is opened on the first poll, in the
//! network namespace of the polling thread, and reopened on the poll after
//! any failure. sysfs, though, shows the devices of the namespace it was
//! mounted in, whichever namespace the reader is in; an interface that
//! sysfs does not show with the ifindex netlink gave is another
//! namespace's (or gone), and its BQL bytes are not counted (logged once
//! per path).
//!
//! Interfaces are followed by name: each poll's link dump resolves every
//! name again, so an interface that is deleted reads as unreachable and one
//! re-created under the same name reads again at its new index.

use std::collections::HashMap;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use super::{Reading, Source, TelemetryError};
use crate::netlink::{NetlinkError, StatsSocket};

const NAME: &str = "linux";

/// Where sysfs lists network devices.
const SYSFS_NET: &str = "/sys/class/net";

/// Reads each path's egress interface's queues on this box.
pub struct Linux {
    interfaces: Vec<String>,
    /// Opened on the first poll, dropped after a failed one.
    socket: Option<StatsSocket>,
    sysfs_net: PathBuf,
    /// Per path: whether the BQL mismatch was logged already.
    bql_warned: Vec<bool>,
}

impl Linux {
    /// One interface name per path, in the order of the readings.
    pub fn new(interfaces: Vec<String>) -> Self {
        let bql_warned = vec![false; interfaces.len()];
        Self {
            interfaces,
            socket: None,
            sysfs_net: PathBuf::from(SYSFS_NET),
            bql_warned,
        }
    }

    /// One dump of links and one of qdiscs: each link's index and tx
    /// bytes by name, each interface's root backlog by index.
    fn dump(&mut self) -> Result<Tables, NetlinkError> {
        let socket = match &mut self.socket {
            Some(socket) => socket,
            None => self.socket.insert(StatsSocket::open()?),
        };
        let links = socket
            .links()?
            .into_iter()
            .map(|link| (link.name, (link.ifindex, link.tx_bytes)))
            .collect();
        let backlogs = socket
            .qdiscs()?
            .into_iter()
            .filter(|qdisc| qdisc.is_root())
            .map(|qdisc| (qdisc.ifindex, qdisc.backlog_bytes))
            .collect();
        Ok(Tables { links, backlogs })
    }

    fn read(&mut self, path: usize, tables: &Tables) -> Result<Reading, TelemetryError> {
        let name = &self.interfaces[path];
        let &(ifindex, tx_bytes) = tables
            .links
            .get(name)
            .ok_or_else(|| unreachable(format!("interface {name} not found")))?;
        // No root qdisc listed (none yet): nothing queued in software.
        let backlog = tables.backlogs.get(&ifindex).copied().unwrap_or(0);
        let inflight = match bql_inflight(&self.sysfs_net, name, ifindex)? {
            Bql::Inflight(bytes) => bytes,
            Bql::OtherDevice => {
                if !std::mem::replace(&mut self.bql_warned[path], true) {
                    tracing::warn!(
                        "linux telemetry: {} does not show {name} at ifindex {ifindex} \
                         (sysfs is another network namespace's): its BQL bytes are not counted",
                        self.sysfs_net.display()
                    );
                }
                0
            }
        };
        Ok(Reading {
            queued_bytes: backlog.saturating_add(inflight),
            tx_bytes,
            speed_bytes_per_s: None,
            read_at: None,
        })
    }
}

impl Source for Linux {
    fn name(&self) -> &'static str {
        NAME
    }

    fn poll(&mut self) -> Vec<Result<Reading, TelemetryError>> {
        match self.dump() {
            Ok(tables) => (0..self.interfaces.len())
                .map(|path| self.read(path, &tables))
                .collect(),
            Err(e) => {
                // The next poll opens a new socket: a late answer on this
                // one would be mistaken for the next dump's.
                self.socket = None;
                let why = e.to_string();
                self.interfaces
                    .iter()
                    .map(|_| Err(unreachable(why.clone())))
                    .collect()
            }
        }
    }
}

/// One poll's view of the namespace.
struct Tables {
    /// Name -> (ifindex, tx bytes).
    links: HashMap<String, (u32, Option<u64>)>,
    /// Ifindex -> root qdisc backlog in bytes.
    backlogs: HashMap<u32, u64>,
}

fn unreachable(why: String) -> TelemetryError {
    TelemetryError::Unreachable {
        source_name: NAME,
        why,
    }
}

fn garbage(what: String, why: String) -> TelemetryError {
    TelemetryError::Garbage {
        source_name: NAME,
        what,
        why,
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Bql {
    /// Bytes in flight over all transmit queues; 0 without BQL.
    Inflight(u64),
    /// `sysfs_net` has no device `name` with index `ifindex`.
    OtherDevice,
}

/// BQL's bytes in flight on device `name` (index `ifindex`) under
/// `sysfs_net`, summed over its `tx-*` queues. A queue without
/// `byte_queue_limits` counts 0: the device keeps no BQL. A value that is
/// not a number is garbage.
fn bql_inflight(sysfs_net: &Path, name: &str, ifindex: u32) -> Result<Bql, TelemetryError> {
    let device = sysfs_net.join(name);
    let listed = fs::read_to_string(device.join("ifindex"))
        .ok()
        .and_then(|text| text.trim().parse::<u32>().ok());
    if listed != Some(ifindex) {
        return Ok(Bql::OtherDevice);
    }
    let queues = match fs::read_dir(device.join("queues")) {
        Ok(queues) => queues,
        // Gone since the dump: the next poll says so.
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Bql::Inflight(0)),
        Err(e) => {
            return Err(garbage(
                device.join("queues").display().to_string(),
                e.to_string(),
            ));
        }
    };
    let mut total = 0u64;
    for queue in queues.flatten() {
        if !queue.file_name().to_string_lossy().starts_with("tx-") {
            continue;
        }
        let file = queue.path().join("byte_queue_limits/inflight");
        let text = match fs::read_to_string(&file) {
            Ok(text) => text,
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) => return Err(garbage(file.display().to_string(), e.to_string())),
        };
        let bytes: u64 = text
            .trim()
            .parse()
            .map_err(|e| garbage(file.display().to_string(), format!("{text:?}: {e}")))?;
        total = total.saturating_add(bytes);
    }
    Ok(Bql::Inflight(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch `/sys/class/net` that goes away with it.
    struct FakeSysfs(PathBuf);

    impl FakeSysfs {
        fn new(tag: &str) -> Self {
            let root =
                std::env::temp_dir().join(format!("fabriclb-bql-{}-{tag}", std::process::id()));
            let _ = fs::remove_dir_all(&root);
            fs::create_dir_all(&root).expect("scratch sysfs");
            Self(root)
        }

        /// Device `name` at `ifindex` with one `tx-N` queue per entry of
        /// `inflight` (`None`: the queue has no BQL), and an rx queue.
        fn device(&self, name: &str, ifindex: u32, inflight: &[Option<&str>]) {
            let device = self.0.join(name);
            fs::create_dir_all(device.join("queues/rx-0")).expect("rx queue");
            fs::write(device.join("ifindex"), format!("{ifindex}\n")).expect("ifindex");
            for (n, value) in inflight.iter().enumerate() {
                let queue = device.join(format!("queues/tx-{n}"));
                fs::create_dir_all(&queue).expect("tx queue");
                if let Some(value) = value {
                    fs::create_dir_all(queue.join("byte_queue_limits")).expect("bql");
                    fs::write(queue.join("byte_queue_limits/inflight"), value).expect("inflight");
                }
            }
        }
    }

    impl Drop for FakeSysfs {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn bql_sums_the_transmit_queues() {
        let sysfs = FakeSysfs::new("sum");
        sysfs.device("eth0", 2, &[Some("1514\n"), Some("0\n"), Some("3028\n")]);
        assert_eq!(bql_inflight(&sysfs.0, "eth0", 2), Ok(Bql::Inflight(4542)));
    }

    #[test]
    fn no_bql_counts_zero() {
        let sysfs = FakeSysfs::new("none");
        sysfs.device("veth0", 7, &[None, None]);
        assert_eq!(bql_inflight(&sysfs.0, "veth0", 7), Ok(Bql::Inflight(0)));
    }

    #[test]
    fn another_namespaces_device_is_not_read() {
        let sysfs = FakeSysfs::new("other");
        sysfs.device("eth0", 2, &[Some("1514")]);
        assert_eq!(bql_inflight(&sysfs.0, "eth0", 5), Ok(Bql::OtherDevice));
        assert_eq!(bql_inflight(&sysfs.0, "eth1", 3), Ok(Bql::OtherDevice));
    }

    #[test]
    fn a_value_that_is_not_a_number_is_garbage() {
        let sysfs = FakeSysfs::new("garbage");
        sysfs.device("eth0", 2, &[Some("lots")]);
        assert!(matches!(
            bql_inflight(&sysfs.0, "eth0", 2),
            Err(TelemetryError::Garbage {
                source_name: "linux",
                ..
            })
        ));
    }
}
