//! Link and neighbour events into the next hops at once; lost events or a
//! failed stream read everything again.

use std::collections::HashSet;

use super::Running;
use crate::daemon::links::Snapshot;
use crate::dataplane::Dataplane;
use crate::netlink::{LinkEvent, Netlink};
use tracing::warn;

impl Running {
    /// Applies link and neighbour events at once and rewrites the next
    /// hops they changed; on lost events or a failed stream, reads links
    /// and neighbours again first.
    pub(super) async fn link_events(
        &mut self,
        events: Option<Vec<LinkEvent>>,
        netlink: &Netlink,
        dp: &mut Dataplane,
    ) {
        let mut read_again = false;
        let mut links_changed = false;
        match events {
            None => {
                warn!("link and neighbour events stopped; reading links and neighbours again");
                self.links.stopped();
                read_again = true;
            }
            Some(events) => {
                let mut lost_neighbours = HashSet::new();
                for event in events {
                    if let LinkEvent::Neighbour {
                        key: (ifindex, _),
                        entry: None,
                    } = event
                    {
                        lost_neighbours.insert(ifindex);
                    }
                    read_again |= event == LinkEvent::Lost;
                    links_changed |= !matches!(event, LinkEvent::Neighbour { .. });
                    if let Some(ifindex) = event.port_down() {
                        self.kernel.port_down(ifindex);
                    }
                    self.links.view.apply(event, &self.config);
                }
                if read_again {
                    warn!("link and neighbour events lost; reading links and neighbours again");
                } else if !lost_neighbours.is_empty() {
                    // A port that loses its carrier has its neighbours
                    // flushed, and the kernel tells of them before it
                    // tells of the carrier: read now, the next hops they
                    // take out say the port is down, not that their MAC
                    // is missing.
                    self.links.view.read_links(netlink, &lost_neighbours).await;
                }
            }
        }
        if read_again {
            match Snapshot::take(netlink, &self.config, &mut self.ongoing).await {
                Ok(view) => self.links.view = view,
                Err(e) => warn!("reading links and neighbours: {e:#}"),
            }
        }
        // The next hops first: until they are written the program goes on
        // sending into a link that is down.
        if let Err(e) = self.rewrite_nexthops(dp) {
            warn!("writing next hops after link or neighbour events: {e}");
        }
        if read_again || links_changed {
            // A link back up comes without neighbours (the kernel flushes
            // them when the carrier goes): ask now, not at the refresh.
            self.links
                .view
                .solicit_unconfirmed(&self.config, &mut self.ongoing);
            // An ingress interface created again gets the program now,
            // and one whose MAC changed its new entry.
            self.ingress.reattach(dp, &mut self.ongoing);
            self.sync_ports(netlink, dp).await;
        }
    }
}
