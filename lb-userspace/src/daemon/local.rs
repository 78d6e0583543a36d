//! The box's own addresses, followed live into the route tries so that
//! whatever is addressed to the box reaches the kernel whatever the routes
//! say: one dump at start, then each RTM_NEWADDR/RTM_DELADDR as it comes.
//! Should the event stream fail, or the kernel drop events, the addresses
//! are read again on the refresh tick instead.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};

use tracing::{debug, error, info, warn};

use crate::dataplane::DataplaneError;
use crate::dataplane::tables::Tables;
use crate::netlink::{Address, AddressEvent, AddressEvents, Netlink, NetlinkError};

#[derive(Debug, thiserror::Error)]
pub(super) enum LocalError {
    #[error("reading the box's addresses: {0}")]
    Read(#[from] NetlinkError),
    #[error("writing the local addresses: {0}")]
    Write(#[from] DataplaneError),
}

/// An address is the same address while its interface, value and prefix
/// length stay; the kernel re-announces it when only its flags change.
type Key = (u32, IpAddr, u8);

/// The box's addresses as last heard, and how news of them arrives.
pub(super) struct Follower {
    known: BTreeMap<Key, Option<Ipv4Addr>>,
    /// `None` after the stream failed: the refresh tick reads instead.
    events: Option<AddressEvents>,
    /// Events were lost: the next refresh tick reads everything again.
    stale: bool,
}

impl Follower {
    /// Subscribes to address events, then reads every address, so that
    /// nothing changes unseen in between. Only the read must succeed.
    pub(super) async fn start(netlink: &Netlink) -> Result<Self, LocalError> {
        let events = match AddressEvents::subscribe() {
            Ok(events) => Some(events),
            Err(e) => {
                warn!("no address events ({e}); reading addresses every refresh tick instead");
                None
            }
        };
        let mut follower = Self {
            known: BTreeMap::new(),
            events,
            stale: false,
        };
        follower.replace(netlink.addresses().await?, false);
        info!(
            addresses = follower.known.len(),
            "following the box's own addresses"
        );
        Ok(follower)
    }

    /// What the route tries hold as local: every address, and for IPv4 the
    /// broadcast it was given and its subnet's, as the kernel's local table
    /// has them (none for /31 and /32).
    pub(super) fn local(&self) -> BTreeSet<IpAddr> {
        let mut local = BTreeSet::new();
        for (&(_, addr, len), broadcast) in &self.known {
            local.insert(addr);
            local.extend(broadcast.map(IpAddr::V4));
            if let (IpAddr::V4(a), 0..=30) = (addr, len) {
                let host_bits = u32::MAX >> len;
                local.insert(IpAddr::V4(Ipv4Addr::from(a.to_bits() | host_bits)));
            }
        }
        local
    }

    /// The box's addresses as last heard, what probes are sent from.
    pub(super) fn addresses(&self) -> Vec<Address> {
        self.known
            .iter()
            .map(|(&(ifindex, addr, prefix_len), &broadcast)| Address {
                ifindex,
                addr,
                prefix_len,
                broadcast,
            })
            .collect()
    }

    /// The events that have arrived: waits for one, takes whatever came
    /// with it. Never returns while there is no stream; `None` when the
    /// stream just failed.
    pub(super) async fn events(&mut self) -> Option<Vec<AddressEvent>> {
        match &mut self.events {
            Some(stream) => stream.batch().await,
            None => std::future::pending().await,
        }
    }

    /// Takes a batch of events (`None`: the stream stopped, and the
    /// refresh tick reads instead); returns whether what is known changed.
    pub(super) fn take(&mut self, events: Option<Vec<AddressEvent>>) -> bool {
        let Some(events) = events else {
            warn!("address events stopped; reading addresses every refresh tick instead");
            self.events = None;
            return false;
        };
        let mut changed = false;
        for event in events {
            changed |= self.apply(event);
        }
        changed
    }

    /// Whether events were lost, or a write failed: the addresses must be
    /// read again.
    pub(super) fn stale(&self) -> bool {
        self.stale
    }

    /// A write of what is known failed: read again at the next refresh.
    pub(super) fn mark_stale(&mut self) {
        self.stale = true;
    }

    /// Whether the addresses must be read now, because events were lost or
    /// the stream failed; tries to subscribe again if it did.
    pub(super) fn needs_read(&mut self) -> bool {
        if self.events.is_some() && !self.stale {
            return false;
        }
        if self.events.is_none() {
            match AddressEvents::subscribe() {
                Ok(events) => {
                    info!("address events resumed");
                    self.events = Some(events);
                }
                Err(e) => debug!("address events still unavailable: {e}"),
            }
        }
        true
    }

    /// Applies one event to what is known; returns whether it changed it.
    fn apply(&mut self, event: AddressEvent) -> bool {
        match event {
            AddressEvent::Added(a) => {
                let changed = self.known.insert(key(&a), a.broadcast) != Some(a.broadcast);
                if changed {
                    info!(ifindex = a.ifindex, "local address added: {}", a.addr);
                }
                changed
            }
            AddressEvent::Removed(a) => {
                let changed = self.known.remove(&key(&a)).is_some();
                if changed {
                    info!(ifindex = a.ifindex, "local address removed: {}", a.addr);
                }
                changed
            }
            AddressEvent::Lost => {
                warn!("address events lost; reading the addresses again");
                self.stale = true;
                false
            }
        }
    }

    /// Makes `addresses` what is known; logs each difference when `log`.
    pub(super) fn replace(&mut self, addresses: Vec<Address>, log: bool) {
        let fresh: BTreeMap<Key, Option<Ipv4Addr>> =
            addresses.iter().map(|a| (key(a), a.broadcast)).collect();
        if log {
            for (&(ifindex, addr, _), _) in
                self.known.iter().filter(|(k, _)| !fresh.contains_key(k))
            {
                info!(ifindex, "local address removed: {addr}");
            }
            for (&(ifindex, addr, _), _) in
                fresh.iter().filter(|(k, _)| !self.known.contains_key(k))
            {
                info!(ifindex, "local address added: {addr}");
            }
        }
        self.known = fresh;
        self.stale = false;
    }
}

fn key(a: &Address) -> Key {
    (a.ifindex, a.addr, a.prefix_len)
}

/// Puts the follower's local addresses into `tables`, saying if some
/// did not fit.
pub(super) fn program(follower: &Follower, tables: &mut Tables) {
    let left_out = tables.set_local(&follower.local());
    if left_out > 0 {
        error!(
            left_out,
            "more local addresses than the route tables have room for; \
             those left out are forwarded like any other destination"
        );
    }
}

/// Logs each configured route a local address starts or stops shadowing.
pub(super) fn report_shadowed(before: Option<&Tables>, after: &Tables) {
    let was = before.map(Tables::shadowed).unwrap_or_default();
    let now = after.shadowed();
    for prefix in now.iter().filter(|p| !was.contains(p)) {
        warn!("route {prefix} is shadowed by a local address while the address exists");
    }
    for prefix in was.iter().filter(|p| !now.contains(p)) {
        if after.routes.iter().any(|(p, _)| p == prefix) {
            info!("route {prefix} is in force again: no local address shadows it");
        }
    }
}

#[cfg(test)]
mod tests;
