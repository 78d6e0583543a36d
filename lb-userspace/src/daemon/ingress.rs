//! The program on the config's ingress interfaces, one rule at start,
//! reload and refresh: an interface that does not exist (yet) is a warning
//! and gets the program when it appears; one that exists but refuses the
//! program is an error (start-up fails, a reload is refused).

use anyhow::Result;
use tracing::{error, info, warn};

use super::links::Ongoing;
use super::state::{Attached, Running, attach, ifindex};
use crate::config::{Switch, XdpModeSetting};
use crate::dataplane::Dataplane;

/// One ingress interface of the config, and the program on it while it has
/// one.
pub(super) struct Ingress {
    pub(super) interface: String,
    pub(super) attached: Option<Attached>,
}

fn ongoing_key(interface: &str) -> String {
    format!("ingress {interface}")
}

impl Ingress {
    /// `interface` with the program attached, or waiting for it to appear.
    pub(super) fn new(
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

/// Takes the program off every ingress interface, on the way out.
pub(super) fn detach_all(dp: &mut Dataplane, ingress: Vec<Ingress>) {
    for mut one in ingress {
        one.detach(dp);
    }
}

impl Running {
    /// Follows the ingress interfaces between reloads: attaches the program
    /// to one that appeared, and again to one deleted and created anew
    /// (the program went with the old device); says once while one is
    /// missing or refuses the program.
    pub(super) fn reattach_ingress(&mut self, dp: &mut Dataplane) {
        let mode = self.config.switch.xdp_mode;
        for ingress in &mut self.ingress {
            let interface = ingress.interface.clone();
            let key = ongoing_key(&interface);
            let now = ifindex(&interface);
            match (&ingress.attached, now) {
                (Some(attached), Some(now)) if attached.ifindex == now => continue,
                (Some(_), None) => {
                    ingress.detach(dp);
                    self.ongoing.started(key, || {
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
            match ingress.attach_if_present(dp, mode, &mut self.ongoing) {
                Ok(()) if ingress.attached.is_some() => {
                    info!(interface, "ingress interface appeared: program attached")
                }
                Ok(()) => {}
                Err(e) => self.ongoing.started(format!("{key} refused"), || {
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
    pub(super) fn move_ingress(&mut self, dp: &mut Dataplane, new: &Switch) -> Result<()> {
        let old_mode = self.config.switch.xdp_mode;
        let (mut kept, removed): (Vec<Ingress>, Vec<Ingress>) = std::mem::take(&mut self.ingress)
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
                Some(ingress) => ingress.attach_if_present(dp, new.xdp_mode, &mut self.ongoing),
                None => Ingress::new(dp, interface, new.xdp_mode, &mut self.ongoing)
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
                    if let Err(e) = ingress.attach_if_present(dp, old_mode, &mut self.ongoing) {
                        error!(
                            interface = ingress.interface,
                            "putting the program back: {e:#}"
                        );
                    }
                }
            }
            kept.extend(removed);
            self.ingress = kept;
            return Err(e);
        }
        detach_all(dp, removed);
        kept.extend(added);
        kept.sort_by_key(|i| new.interfaces.iter().position(|n| n == &i.interface));
        self.ingress = kept;
        Ok(())
    }
}
