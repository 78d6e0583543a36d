//! Keeping a next hop's neighbour entry fresh.
//!
//! Traffic that XDP forwards never confirms the kernel's neighbour entry,
//! so it goes STALE and keeps its MAC: a peer whose MAC changes while its
//! link stays up is never asked again. A probe asks it: one broadcast ARP
//! request (IPv4) or one neighbour solicitation to the target's
//! solicited-node group (IPv6), sent from the box's own address on the
//! interface. The peer answers by unicast, and the kernel's neighbour code
//! updates the entry it already has: the answer confirms it (REACHABLE,
//! and a confirmation with the same MAC does not restart the ARP
//! `locktime` window) or, when the MAC differs, replaces it, for ARP once
//! the entry last changed more than `locktime` (1 s) ago, for IPv6 at once
//! (the advertisement's override flag). An entry the kernel does not have
//! is not created by an answer: the kernel resolves those itself
//! ([`super::solicit`]).
//!
//! Needs CAP_NET_RAW (an `AF_PACKET` socket per interface, bound with
//! protocol 0, so it receives nothing). The sockets are kept from probe to
//! probe: closing a packet socket waits for an RCU grace period
//! (`synchronize_net`), tens of milliseconds on a busy machine, and a
//! socket per probe held the daemon's loop up for most of each 50 ms
//! probe tick, delaying the very neighbour events the probes provoke.

mod frame;

use std::collections::HashMap;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, OwnedFd};

use nix::errno::Errno;
use nix::sys::socket::{AddressFamily, MsgFlags, SockFlag, SockType};

use super::Address;

#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("no {family} address on interface {ifindex} to ask from")]
    NoSource { family: &'static str, ifindex: u32 },
    #[error("{step} on interface {ifindex}: {errno}")]
    Socket {
        step: &'static str,
        ifindex: u32,
        #[source]
        errno: Errno,
    },
}

/// The probing sockets, one per interface probed from.
#[derive(Debug, Default)]
pub struct Prober {
    sockets: HashMap<u32, OwnedFd>,
}

impl Prober {
    /// Asks `target` for its MAC out of interface `ifindex` (the one its
    /// neighbour entry is on), from one of `addresses` on that interface.
    pub fn probe(
        &mut self,
        ifindex: u32,
        addresses: &[Address],
        target: IpAddr,
    ) -> Result<(), ProbeError> {
        let source = source(addresses, ifindex, target).ok_or(ProbeError::NoSource {
            family: if target.is_ipv4() { "IPv4" } else { "IPv6" },
            ifindex,
        })?;
        let fail = |step| {
            move |errno| ProbeError::Socket {
                step,
                ifindex,
                errno,
            }
        };
        let socket = match self.sockets.entry(ifindex) {
            std::collections::hash_map::Entry::Occupied(socket) => socket.into_mut(),
            std::collections::hash_map::Entry::Vacant(slot) => {
                let socket = nix::sys::socket::socket(
                    AddressFamily::Packet,
                    SockType::Raw,
                    SockFlag::SOCK_CLOEXEC,
                    None,
                )
                .map_err(fail("socket(AF_PACKET)"))?;
                bind(&socket, ifindex).map_err(fail("bind"))?;
                slot.insert(socket)
            }
        };
        let sent = own_mac(socket).and_then(|mac| match (source, target) {
            (IpAddr::V4(source), IpAddr::V4(target)) => {
                send(socket, &frame::arp_request(mac, source, target))
            }
            (IpAddr::V6(source), IpAddr::V6(target)) => {
                send(socket, &frame::neighbour_solicitation(mac, source, target))
            }
            _ => unreachable!("source() picks the target's family"),
        });
        // A socket whose interface went (or was made anew under the same
        // index) is made again at the next probe.
        sent.map_err(|errno| {
            self.sockets.remove(&ifindex);
            fail("send")(errno)
        })
    }

    /// Closes the sockets of interfaces not in `probed`: they went, or no
    /// next hop is behind them any more.
    pub fn keep_only(&mut self, probed: impl Fn(u32) -> bool) {
        self.sockets.retain(|&ifindex, _| probed(ifindex));
    }
}

fn send(socket: &OwnedFd, frame: &[u8]) -> nix::Result<()> {
    nix::sys::socket::send(socket.as_raw_fd(), frame, MsgFlags::empty()).map(drop)
}

/// Binds `socket` to interface `ifindex`, for sending only.
fn bind(socket: &OwnedFd, ifindex: u32) -> nix::Result<()> {
    let address = libc::sockaddr_ll {
        sll_family: libc::AF_PACKET as u16,
        // Protocol 0: bound for sending only.
        sll_protocol: 0,
        sll_ifindex: i32::try_from(ifindex).map_err(|_| Errno::ENODEV)?,
        sll_hatype: 0,
        sll_pkttype: 0,
        sll_halen: 0,
        sll_addr: [0; 8],
    };
    // SAFETY: `address` is a sockaddr_ll and the length its size.
    Errno::result(unsafe {
        libc::bind(
            socket.as_raw_fd(),
            (&raw const address).cast::<libc::sockaddr>(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// The MAC of the interface `socket` is bound to, as it is now (the kernel
/// reads the device at each call): a VLAN interface's may differ from its
/// parent's, a port's may be changed, and the peer records the one the
/// probe carries.
fn own_mac(socket: &OwnedFd) -> nix::Result<[u8; 6]> {
    // SAFETY: all-zero is a valid sockaddr_ll.
    let mut address: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `address`.
    Errno::result(unsafe {
        libc::getsockname(
            socket.as_raw_fd(),
            (&raw mut address).cast::<libc::sockaddr>(),
            &mut len,
        )
    })?;
    match address.sll_halen {
        6 => {
            let mut mac = [0; 6];
            mac.copy_from_slice(&address.sll_addr[..6]);
            Ok(mac)
        }
        // Not Ethernet (a tunnel, a loopback): nothing to ask.
        _ => Err(Errno::EAFNOSUPPORT),
    }
}

/// The address on `ifindex` a probe for `target` is sent from: of the
/// target's family, one whose prefix holds the target first, then (IPv6) a
/// link-local one, which every peer on the link can answer, then any.
pub fn source(addresses: &[Address], ifindex: u32, target: IpAddr) -> Option<IpAddr> {
    addresses
        .iter()
        .filter(|a| a.ifindex == ifindex && a.addr.is_ipv4() == target.is_ipv4())
        .min_by_key(|a| {
            let on_link = contains(a, target);
            let link_local = matches!(a.addr, IpAddr::V6(v6) if v6.is_unicast_link_local());
            (!on_link, !link_local)
        })
        .map(|a| a.addr)
}

/// Whether `target` is within `address`'s prefix.
fn contains(address: &Address, target: IpAddr) -> bool {
    let (a, t, width) = match (address.addr, target) {
        (IpAddr::V4(a), IpAddr::V4(t)) => (a.to_bits().into(), t.to_bits().into(), 32),
        (IpAddr::V6(a), IpAddr::V6(t)) => (a.to_bits(), t.to_bits(), 128),
        _ => return false,
    };
    let len = u32::from(address.prefix_len).min(width);
    // A shift by the whole width (prefix length 0) leaves nothing to compare.
    (a ^ t).checked_shr(width - len).unwrap_or(0) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(ifindex: u32, cidr: &str) -> Address {
        let (addr, len) = cidr.split_once('/').expect("cidr");
        Address {
            ifindex,
            addr: addr.parse().expect("address"),
            prefix_len: len.parse().expect("prefix length"),
            broadcast: None,
        }
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("address")
    }

    #[test]
    fn the_source_is_the_interfaces_address_on_the_targets_subnet() {
        let addresses = [
            address(3, "10.0.0.1/24"),
            address(4, "198.18.2.9/24"),
            address(3, "198.18.2.1/24"),
            address(3, "fe80::1/64"),
        ];
        assert_eq!(
            source(&addresses, 3, ip("198.18.2.2")),
            Some(ip("198.18.2.1"))
        );
        // Off every subnet: still asked, from the interface's address.
        assert_eq!(source(&addresses, 3, ip("192.0.2.7")), Some(ip("10.0.0.1")));
        assert_eq!(source(&addresses, 5, ip("198.18.2.2")), None);
    }

    #[test]
    fn an_ipv6_source_is_on_the_targets_prefix_or_else_link_local() {
        let addresses = [
            address(3, "2001:db8:1::1/64"),
            address(3, "fe80::1/64"),
            address(3, "2001:db8:2::1/64"),
            address(3, "198.18.2.1/24"),
        ];
        assert_eq!(
            source(&addresses, 3, ip("2001:db8:2::9")),
            Some(ip("2001:db8:2::1"))
        );
        assert_eq!(
            source(&addresses, 3, ip("2001:db8:7::9")),
            Some(ip("fe80::1"))
        );
        assert_eq!(source(&addresses, 3, ip("fe80::2")), Some(ip("fe80::1")));
        assert_eq!(source(&addresses[3..], 3, ip("fe80::2")), None);
    }

    #[test]
    fn a_prefix_holds_exactly_the_addresses_that_share_its_bits() {
        let a = address(1, "198.18.2.1/31");
        assert!(contains(&a, ip("198.18.2.0")));
        assert!(!contains(&a, ip("198.18.2.2")));
        assert!(contains(&address(1, "198.18.2.1/32"), ip("198.18.2.1")));
        assert!(!contains(&address(1, "198.18.2.1/32"), ip("198.18.2.2")));
        assert!(contains(&address(1, "0.0.0.0/0"), ip("203.0.113.9")));
        assert!(contains(&address(1, "2001:db8::1/0"), ip("::1")));
        assert!(!contains(&address(1, "2001:db8::1/64"), ip("198.18.2.1")));
    }
}
