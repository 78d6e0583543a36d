//! Next hops against the links and neighbours: the backstop refresh, the
//! neighbour probes, and the rewrite of the next hops that changed.

use super::Running;
use crate::config;
use crate::daemon::flow_events::WatchEvent;
use crate::daemon::links::Snapshot;
use crate::dataplane::{Dataplane, DataplaneError};
use crate::netlink::Netlink;
use anyhow::Result;
use lb_common::abi::NEXTHOP_USABLE;
use tracing::{info, warn};

impl Running {
    /// Reads links and neighbours again and rewrites the next hops that
    /// changed; runs every refresh interval as a backstop to the events.
    pub(super) async fn refresh_nexthops(
        &mut self,
        netlink: &Netlink,
        dp: &mut Dataplane,
    ) -> Result<()> {
        self.links.resubscribe();
        let snapshot = Snapshot::take(netlink, &self.config, &mut self.ongoing).await?;
        snapshot.solicit_unconfirmed(&self.config, &mut self.ongoing);
        self.links.view = snapshot;
        Ok(self.rewrite_nexthops(dp)?)
    }

    /// Probes the neighbour of every IP next hop with a known MAC (see
    /// [`Snapshot::probe_neighbours`]) and has the kernel check those it
    /// no longer confirms ([`Snapshot::solicit_unconfirmed`]); runs every
    /// probe interval. The answers, and the kernel's verdicts, come back
    /// as neighbour events; without the event stream they are read back
    /// here.
    pub(super) async fn probe_nexthops(&mut self, netlink: &Netlink, dp: &mut Dataplane) {
        self.links
            .view
            .solicit_unconfirmed(&self.config, &mut self.ongoing);
        let addresses = self.local.addresses();
        let probed = self.links.view.probe_neighbours(
            &mut self.links.prober,
            &addresses,
            &self.config,
            &mut self.ongoing,
        );
        if probed && !self.links.following() {
            match netlink.neighbour_entries().await {
                Ok(neighbours) => self.links.view.neighbours = neighbours,
                Err(e) => warn!("reading neighbours after probing them: {e}"),
            }
            if let Err(e) = self.rewrite_nexthops(dp) {
                warn!("writing next hops after probing their neighbours: {e}");
            }
        }
    }

    /// Resolves every next hop against the links and neighbours as last
    /// heard, and writes those that changed (resilient buckets: only the
    /// flows of a next hop that goes or comes back move). On a failed
    /// write the tables stay as the maps had them, so the next change or
    /// refresh writes it all again.
    pub(super) fn rewrite_nexthops(&mut self, dp: &mut Dataplane) -> Result<(), DataplaneError> {
        let previous = self.tables.clone();
        let view = &self.links.view;
        let mut changed = false;
        for group in &previous.groups {
            for (spec, &id) in group.specs.iter().zip(&group.members) {
                let old = previous.nexthops[id as usize];
                let new = view.resolve(spec);
                if self.tables.update_nexthop(id, new) {
                    changed = true;
                    let (usable, was_usable) = (
                        new.flags & NEXTHOP_USABLE != 0,
                        old.flags & NEXTHOP_USABLE != 0,
                    );
                    if usable != was_usable {
                        let reason = view.unusable(spec).map(|r| r.to_string());
                        self.flow_events.publish(WatchEvent::of_next_hop(
                            &group.name,
                            spec,
                            usable,
                            reason,
                        ));
                    }
                    info!(
                        next_hop = %spec,
                        usable = new.flags & NEXTHOP_USABLE != 0,
                        was_usable = old.flags & NEXTHOP_USABLE != 0,
                        mac = %config::format_mac(new.dst_mac),
                        reason = view.unusable(spec).map(tracing::field::display),
                        "next hop changed"
                    );
                }
            }
        }
        if changed && let Err(e) = self.tables.write(dp, Some(&previous)) {
            self.tables = previous;
            return Err(e);
        }
        Ok(())
    }
}
