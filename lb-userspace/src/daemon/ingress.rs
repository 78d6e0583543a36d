//! The program on the config's ingress interfaces, one rule at start,
//! reload and refresh: an interface that does not exist (yet) is a warning
//! and gets the program when it appears; one that exists but refuses the
//! program is an error (start-up fails, a reload is refused).

use anyhow::Result;
use aya::programs::XdpMode;
use aya::programs::xdp::XdpLinkId;
use tracing::{error, info, warn};

use super::links::Ongoing;
use crate::config::{Switch, XdpModeSetting};
use crate::dataplane::{Dataplane, occupant};
use crate::netlink::ifindex;

/// The config's ingress interfaces, in its order, each with the program
/// on it while it has one, and the XDP mode they were attached in.
pub(super) struct IngressPorts {
    ports: Vec<Ingress>,
    mode: XdpModeSetting,
}

impl IngressPorts {
    /// The program onto `switch`'s ingress interfaces, as start-up attaches
    /// it: one that is missing waits for it, one that refuses it fails.
    pub(super) fn attach(
        dp: &mut Dataplane,
        switch: &Switch,
        ongoing: &mut Ongoing,
    ) -> Result<Self> {
        let ports = switch
            .interfaces
            .iter()
            .map(|interface| Ingress::new(dp, interface, switch.xdp_mode, ongoing))
            .collect::<Result<_>>()?;
        Ok(Self {
            ports,
            mode: switch.xdp_mode,
        })
    }

    /// The interfaces that have the program, and the device each went onto.
    pub(super) fn attached(&self) -> impl Iterator<Item = (&str, u32)> {
        self.ports
            .iter()
            .filter_map(|i| Some((i.interface.as_str(), i.attached.as_ref()?.ifindex)))
    }

    /// Follows the ingress interfaces between reloads: attaches the program
    /// to one that appeared, and again to one deleted and created anew
    /// (the program went with the old device); says once while one is
    /// missing or refuses the program.
    pub(super) fn reattach(&mut self, dp: &mut Dataplane, ongoing: &mut Ongoing) {
        let mode = self.mode;
        for ingress in &mut self.ports {
            let interface = ingress.interface.clone();
            let key = ongoing_key(&interface);
            let now = ifindex(&interface);
            match (&ingress.attached, now) {
                (Some(attached), Some(now)) if attached.ifindex == now => continue,
                (Some(_), None) => {
                    ingress.detach(dp);
                    ongoing.started(key, || {
                        warn!(
                            interface,
                            "ingress interface gone; attaching again when it comes back"
                        )
                    });
                    continue;
                }
                (Some(_), Some(_)) => ingress.detach(dp),
                (None, _) => {}
            }
            match ingress.attach_if_present(dp, mode, ongoing) {
                Ok(()) if ingress.attached.is_some() => {
                    info!(interface, "ingress interface appeared: program attached")
                }
                Ok(()) => {}
                Err(e) => ongoing.started(format!("{key} refused"), || {
                    warn!(
                        interface,
                        "ingress interface present but not attached: {e:#}"
                    )
                }),
            }
        }
    }

    /// Moves the program onto `new`'s ingress interfaces, as start-up would
    /// attach it. If one that exists refuses the program, everything is
    /// put back as it was and the error returned, so a config that cannot
    /// start is not taken by a reload either.
    pub(super) fn move_to(
        &mut self,
        dp: &mut Dataplane,
        new: &Switch,
        ongoing: &mut Ongoing,
    ) -> Result<()> {
        let old_mode = self.mode;
        let (mut kept, removed): (Vec<Ingress>, Vec<Ingress>) = std::mem::take(&mut self.ports)
            .into_iter()
            .partition(|i| new.interfaces.contains(&i.interface));
        let remoded = new.xdp_mode != old_mode;
        // An interface takes one XDP program: the old mode's goes first.
        if remoded {
            kept.iter_mut().for_each(|i| i.detach(dp));
        }
        let mut added = Vec::new();
        let mut failed = None;
        for interface in &new.interfaces {
            let result = match kept.iter_mut().find(|i| &i.interface == interface) {
                Some(ingress) => ingress.attach_if_present(dp, new.xdp_mode, ongoing),
                None => Ingress::new(dp, interface, new.xdp_mode, ongoing)
                    .map(|ingress| added.push(ingress)),
            };
            if let Err(e) = result {
                failed = Some(e);
                break;
            }
        }
        if let Some(e) = failed {
            detach_all(dp, added);
            if remoded {
                for ingress in &mut kept {
                    ingress.detach(dp);
                    if let Err(e) = ingress.attach_if_present(dp, old_mode, ongoing) {
                        error!(
                            interface = ingress.interface,
                            "putting the program back: {e:#}"
                        );
                    }
                }
            }
            kept.extend(removed);
            self.ports = kept;
            return Err(e);
        }
        detach_all(dp, removed);
        kept.extend(added);
        kept.sort_by_key(|i| new.interfaces.iter().position(|n| n == &i.interface));
        self.ports = kept;
        self.mode = new.xdp_mode;
        Ok(())
    }
}

/// One ingress interface of the config, and the program on it while it has
/// one.
struct Ingress {
    interface: String,
    attached: Option<Attached>,
}

fn ongoing_key(interface: &str) -> String {
    format!("ingress {interface}")
}

impl Ingress {
    /// `interface` with the program attached, or waiting for it to appear.
    fn new(
        dp: &mut Dataplane,
        interface: &str,
        mode: XdpModeSetting,
        ongoing: &mut Ongoing,
    ) -> Result<Self> {
        let mut ingress = Self {
            interface: interface.to_owned(),
            attached: None,
        };
        ingress.attach_if_present(dp, mode, ongoing)?;
        Ok(ingress)
    }

    /// Attaches the program unless it is already there or the interface
    /// does not exist; the latter is said once until it appears.
    fn attach_if_present(
        &mut self,
        dp: &mut Dataplane,
        mode: XdpModeSetting,
        ongoing: &mut Ongoing,
    ) -> Result<()> {
        if self.attached.is_some() {
            return Ok(());
        }
        let key = ongoing_key(&self.interface);
        if ifindex(&self.interface).is_none() {
            ongoing.started(key, || {
                warn!(
                    interface = self.interface,
                    "ingress interface does not exist; attaching when it appears"
                )
            });
            return Ok(());
        }
        self.attached = Some(attach(dp, &self.interface, mode)?);
        ongoing.ended(&key);
        Ok(())
    }

    /// Takes the program off; an interface deleted meanwhile took it along,
    /// which only leaves aya's record of it to drop.
    fn detach(&mut self, dp: &mut Dataplane) {
        if let Some(attached) = self.attached.take() {
            let gone = ifindex(&self.interface) != Some(attached.ifindex);
            match (dp.detach(&self.interface, attached.link), gone) {
                (_, true) => {}
                (Ok(()), false) => info!(interface = self.interface, "detached"),
                (Err(e), false) => warn!(interface = self.interface, "detaching: {e}"),
            }
        }
    }
}

/// Takes the program off every ingress interface in `ingress`.
fn detach_all(dp: &mut Dataplane, ingress: Vec<Ingress>) {
    for mut one in ingress {
        one.detach(dp);
    }
}

/// The program on one ingress interface that has it.
struct Attached {
    link: XdpLinkId,
    /// The device it went onto: one deleted and created again under the
    /// same name has another, and no program.
    ifindex: u32,
}

fn attach(dp: &mut Dataplane, interface: &str, setting: XdpModeSetting) -> Result<Attached> {
    if let Some(attached) = super::adopt::link(dp, interface, setting)?.map(|link| Attached {
        link,
        ifindex: ifindex(interface).unwrap_or(0),
    }) {
        return Ok(attached);
    }
    super::ports::note_port(dp, interface)?;
    let mut attach_in = |mode| {
        dp.attach(interface, mode)
            .map_err(|e| occupant::attach_error(interface, e))
    };
    let (link, mode) = match setting {
        XdpModeSetting::Driver => (attach_in(XdpMode::Driver)?, "driver"),
        XdpModeSetting::Generic => (attach_in(XdpMode::Skb)?, "generic"),
        XdpModeSetting::Auto => match attach_in(XdpMode::Driver) {
            Ok(link) => (link, "driver"),
            Err(e) if e.mode_refused() => {
                warn!(
                    interface,
                    "driver mode refused ({e}); falling back to generic mode, which is much slower"
                );
                (attach_in(XdpMode::Skb)?, "generic")
            }
            Err(e) => return Err(e.into()),
        },
    };
    info!(interface, mode, "attached");
    Ok(Attached {
        link,
        ifindex: ifindex(interface).unwrap_or(0),
    })
}
