//! Next hops follow the kernel's link and neighbour events as they come
//! (RTM_NEWLINK/DELLINK: up, down, carrier, deletion; RTM_NEWNEIGH/
//! DELNEIGH: resolved, failed, new MAC, deleted): a next hop whose carrier
//! drops or whose neighbour fails leaves its group within milliseconds,
//! not at the next refresh, which stays as a backstop. Events lost, or a
//! stream that failed, make the daemon read everything again at once.

use tracing::{info, warn};

use super::links::Snapshot;
use crate::netlink::probe::Prober;
use crate::netlink::{LinkEvent, LinkEvents};

/// Links and neighbours as last heard, and how news of them arrives.
pub(super) struct LinkWatch {
    /// `None` after the stream failed: the refresh subscribes again.
    events: Option<LinkEvents>,
    /// What next hops are resolved against: the last read, with every
    /// event since applied.
    pub(super) view: Snapshot,
    /// The sockets the neighbours are probed from.
    pub(super) prober: Prober,
}

/// Subscribes to link and neighbour events; call before reading the links
/// and neighbours, so nothing changes unseen in between.
pub(super) fn subscribe() -> Option<LinkEvents> {
    match LinkEvents::subscribe() {
        Ok(events) => Some(events),
        Err(e) => {
            warn!("no link and neighbour events ({e}); next hops follow them at each refresh only");
            None
        }
    }
}

impl LinkWatch {
    /// Follows `events` from `view`, read after subscribing.
    pub(super) fn new(events: Option<LinkEvents>, view: Snapshot) -> Self {
        Self {
            events,
            view,
            prober: Prober::default(),
        }
    }

    /// The events that have arrived; never returns while there is no
    /// stream, `None` when the stream just failed.
    pub(super) async fn events(&mut self) -> Option<Vec<LinkEvent>> {
        match &mut self.events {
            Some(stream) => stream.batch().await,
            None => std::future::pending().await,
        }
    }

    /// Whether events arrive: without them, what changed is only seen
    /// when read.
    pub(super) fn following(&self) -> bool {
        self.events.is_some()
    }

    /// The stream failed: subscribe again (or at the refresh).
    pub(super) fn stopped(&mut self) {
        self.events = None;
        self.resubscribe();
    }

    /// Subscribes again if the stream failed; call before reading.
    pub(super) fn resubscribe(&mut self) {
        if self.events.is_none() {
            self.events = LinkEvents::subscribe().ok();
            if self.events.is_some() {
                info!("link and neighbour events resumed");
            }
        }
    }
}
