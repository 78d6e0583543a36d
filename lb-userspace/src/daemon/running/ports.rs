//! The ingress ports' MACs and the DLB MAC kept in the port maps and on
//! the ports' unicast addresses.

use super::Running;
use crate::config::format_mac;
use crate::daemon::ports::NO_MAC;
use crate::dataplane::Dataplane;
use crate::netlink::ifindex;
use crate::netlink::{Netlink, own_macs};
use lb_common::abi::PortMacs;
use tracing::{info, warn};

impl Running {
    /// Brings the port entries to the attached ingress ports and the
    /// config's DLB MAC: a port's changed MAC rewritten, the DLB MAC added
    /// to (and a former one taken off) each port's unicast addresses, the
    /// entries of ports no longer attached removed with the DLB MAC they
    /// had. A failure is said once while it lasts; the rest goes on.
    pub(super) async fn sync_ports(&mut self, netlink: &Netlink, dp: &mut Dataplane) {
        let dlb = self.config.switch.dlb_mac.unwrap_or(NO_MAC);
        let written = match dp.port_macs() {
            Ok(written) => written,
            Err(e) => {
                warn!("reading the ingress ports' MACs: {e}");
                return;
            }
        };
        let attached: Vec<(String, u32)> = self
            .ingress
            .attached()
            .map(|(interface, index)| (interface.to_owned(), index))
            .collect();
        let macs = own_macs();
        for (interface, index) in &attached {
            // Gone since it was attached: the next link event says so.
            let Some(&own) = macs.get(interface) else {
                continue;
            };
            let want = PortMacs {
                ifindex: *index,
                own,
                dlb,
            };
            let had = written.iter().find(|p| p.ifindex == *index).copied();
            if had == Some(want) {
                continue;
            }
            let had_dlb = had.map_or(NO_MAC, |p| p.dlb);
            if had_dlb != dlb {
                self.unicast(netlink, interface, *index, had_dlb, false)
                    .await;
                self.unicast(netlink, interface, *index, dlb, true).await;
            }
            if let Err(e) = dp.set_port_macs(want) {
                warn!(interface, "writing the port's MACs: {e}");
            }
        }
        for gone in written
            .iter()
            .filter(|p| !attached.iter().any(|(_, index)| *index == p.ifindex))
        {
            // A port deleted took its addresses along.
            if let Ok(name) = nix::net::if_::if_indextoname(gone.ifindex) {
                let name = name.to_string_lossy().into_owned();
                self.unicast(netlink, &name, gone.ifindex, gone.dlb, false)
                    .await;
            }
            if let Err(e) = dp.remove_port_macs(gone.ifindex) {
                warn!(ifindex = gone.ifindex, "removing a port's MACs: {e}");
            }
        }
    }

    /// Adds `mac` to, or takes it off, the unicast addresses of `interface`
    /// (index `index`); nothing for no MAC.
    async fn unicast(
        &mut self,
        netlink: &Netlink,
        interface: &str,
        index: u32,
        mac: [u8; 6],
        add: bool,
    ) {
        if mac == NO_MAC {
            return;
        }
        let mac_text = format_mac(mac);
        let key = format!("unicast {index} {mac_text}");
        let done = if add {
            netlink.add_unicast(index, mac).await
        } else {
            netlink.del_unicast(index, mac).await
        };
        match done {
            Ok(()) => {
                self.ongoing.ended(&key);
                let did = if add {
                    "accepted"
                } else {
                    "no longer accepted"
                };
                info!(interface, mac = mac_text, "DLB MAC {did} on the port");
            }
            // A port deleted took its addresses along.
            Err(_) if !add && ifindex(interface).is_none() => {}
            Err(e) => self.ongoing.started(key, || {
                let what = if add { "adding" } else { "removing" };
                warn!(
                    interface,
                    mac = mac_text,
                    "{what} the DLB MAC as a unicast address of the port: {e}"
                )
            }),
        }
    }
}
