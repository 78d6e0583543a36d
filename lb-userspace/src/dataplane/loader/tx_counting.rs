//! Counting transmit errors: the tracepoints attached once the program
//! forwards, the ingress ports they watch, and their counters read back.

use aya::maps::IterableMap;
use lb_common::abi::tx_errors::{TX_ERRORS, TxErrors};
use lb_common::abi::{self as names};
use tracing::{info, warn};

use super::{Dataplane, Result, map_err};
use crate::dataplane::tx_errors;

impl Dataplane {
    /// Attaches the transmit-error tracepoints, with `ingress` the ports
    /// (name, ifindex) the program is already on; a kernel that does not let
    /// them count is said once and otherwise no error: forwarding works
    /// without them. Called after the program is attached: checking the
    /// kernel's types and loading the tracepoints takes about 0.2 s, which
    /// a cold start would otherwise spend not forwarding.
    pub fn count_tx_errors<'a>(
        &mut self,
        ingress: impl IntoIterator<Item = (&'a str, u32)>,
    ) -> Result<()> {
        let devmap_id = IterableMap::map(&self.maps.devmap)
            .info()
            .map_err(map_err(names::DEVMAP))?
            .id();
        match tx_errors::attach(&mut self.ebpf, devmap_id) {
            Ok(counting) => {
                info!("counting transmit errors");
                self.tx_counting = Some(counting);
            }
            Err(e) => warn!("transmit errors are not counted: {e}"),
        }
        for (interface, ifindex) in ingress {
            self.note_ingress(interface, ifindex);
        }
        Ok(())
    }

    /// Tells the transmit-error tracepoints that `interface` is one of the
    /// program's ingress ports, by the index it was just attached under.
    pub(super) fn note_attached(&mut self, interface: &str) {
        if self.tx_counting.is_none() {
            return;
        }
        // Attached a moment ago: only a device renamed meanwhile has no
        // index.
        match nix::net::if_::if_nametoindex(interface) {
            Ok(ifindex) => self.note_ingress(interface, ifindex),
            Err(e) => warn!(
                interface,
                "frames from it that the driver drops are not counted as transmit errors: {e}"
            ),
        }
    }

    /// Tells the transmit-error tracepoints that device `ifindex`
    /// (`interface`) is one of the program's ingress ports. Never
    /// forgotten on detach: the daemon detaches from devices that are
    /// gone, and a new device gets a new ifindex.
    fn note_ingress(&mut self, interface: &str, ifindex: u32) {
        let Some(counting) = &mut self.tx_counting else {
            return;
        };
        if let Err(e) = counting.ingress_ports.insert(ifindex, 1, 0) {
            warn!(
                interface,
                "frames from it that the driver drops are not counted as transmit errors: {e}"
            );
        }
    }

    /// Frames redirected to each egress ifindex that never left, summed
    /// over CPUs; `None` when they are not counted.
    pub fn tx_errors(&self) -> Option<Result<Vec<(u32, TxErrors)>>> {
        let counting = self.tx_counting.as_ref()?;
        Some(
            counting
                .counters
                .iter()
                .map(|entry| {
                    let (ifindex, per_cpu) = entry.map_err(map_err(TX_ERRORS))?;
                    let mut sum = TxErrors::default();
                    for cpu in per_cpu.iter() {
                        sum += *cpu;
                    }
                    Ok((ifindex, sum))
                })
                .collect(),
        )
    }
}
