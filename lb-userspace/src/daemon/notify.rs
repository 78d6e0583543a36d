//! What the service manager is told (`Type=notify`, sd_notify(3)): READY
//! once every port is attached, RELOADING with the monotonic time before
//! each reload and READY after it, and a STATUS naming the config in force
//! or the reload refused. Nothing is sent where no manager listens
//! (`NOTIFY_SOCKET` unset); a message that cannot be sent is said once.

use sd_notify::NotifyState;
use tracing::warn;

/// The manager's socket, if the daemon was started by one.
pub(super) struct ServiceManager {
    listening: bool,
    failed_once: bool,
}

impl ServiceManager {
    pub(super) fn from_env() -> Self {
        Self {
            listening: std::env::var_os("NOTIFY_SOCKET").is_some(),
            failed_once: false,
        }
    }

    /// Forwarding, with `status` saying what from.
    pub(super) fn ready(&mut self, status: &str) {
        self.send(&[NotifyState::Ready, NotifyState::Status(status)]);
    }

    /// A reload begins: until the next [`ServiceManager::ready`], systemd
    /// holds `systemctl reload` and the unit shows "reloading".
    pub(super) fn reloading(&mut self) {
        match NotifyState::monotonic_usec_now() {
            Ok(now) => self.send(&[NotifyState::Reloading, now]),
            Err(e) => self.failed(&e),
        }
    }

    fn send(&mut self, states: &[NotifyState]) {
        if !self.listening {
            return;
        }
        if let Err(e) = sd_notify::notify(states) {
            self.failed(&e);
        }
    }

    fn failed(&mut self, e: &std::io::Error) {
        if !self.failed_once {
            self.failed_once = true;
            warn!("telling the service manager (NOTIFY_SOCKET): {e}");
        }
    }
}
