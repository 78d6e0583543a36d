//! Interface names as the daemon sees them. The maps hold ifindexes,
//! which mean something only in the daemon's network namespace; `status`
//! and `explain` may run in another (the host's, while the daemon runs
//! under `ip netns exec`), where the same index names another port or
//! none. So the names are read in the namespace of the process that holds
//! the instance, by a thread that enters it.

use std::collections::BTreeMap;

use nix::sched::{CloneFlags, setns};

/// Every interface of one network namespace, by ifindex.
#[derive(Clone, Debug, Default)]
pub struct Interfaces {
    by_index: BTreeMap<u32, String>,
    /// Why these are not the daemon's, when they are not.
    note: Option<String>,
}

impl Interfaces {
    /// The interfaces of the network namespace process `pid` runs in, or
    /// of this process's when `pid` is `None` (no daemon holds the
    /// instance: the namespace it ran in is gone or unknown). When that
    /// namespace cannot be entered, this process's, with a note why.
    pub fn of_process(pid: Option<u32>) -> Self {
        let Some(pid) = pid else {
            return Self::read(None).unwrap_or_default();
        };
        Self::read(Some(pid)).unwrap_or_else(|why| Self {
            note: Some(format!(
                "interface names are this namespace's: the daemon's (pid {pid}) cannot be \
                 entered: {why}"
            )),
            ..Self::read(None).unwrap_or_default()
        })
    }

    /// `names` at ifindexes 1, 2, ... in turn: interfaces of no
    /// namespace, as a config lists them.
    pub fn numbered(names: impl IntoIterator<Item = String>) -> Self {
        Self {
            by_index: (1..).zip(names).collect(),
            note: None,
        }
    }

    /// Why the names are not the daemon's, if they are not.
    pub fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    /// The interfaces of `pid`'s network namespace (this process's for
    /// `None`), listed by a thread of their own: entering a namespace
    /// changes the thread that does it, and this one stays where it is.
    fn read(pid: Option<u32>) -> Result<Self, String> {
        std::thread::spawn(move || {
            if let Some(pid) = pid {
                let path = format!("/proc/{pid}/ns/net");
                let netns = std::fs::File::open(&path).map_err(|e| format!("{path}: {e}"))?;
                setns(netns, CloneFlags::CLONE_NEWNET).map_err(|e| format!("setns: {e}"))?;
            }
            let listed = nix::net::if_::if_nameindex().map_err(|e| format!("if_nameindex: {e}"))?;
            Ok(Self {
                by_index: (listed.iter())
                    .map(|i| (i.index(), i.name().to_string_lossy().into_owned()))
                    .collect(),
                note: None,
            })
        })
        .join()
        .map_err(|_| "the thread listing interfaces panicked".to_owned())?
    }

    /// The name of `ifindex`, `?` when there is none.
    pub fn name(&self, ifindex: u32) -> String {
        self.by_index
            .get(&ifindex)
            .cloned()
            .unwrap_or_else(|| "?".to_owned())
    }

    /// The ifindex of interface `name`.
    pub fn index(&self, name: &str) -> Option<u32> {
        (self.by_index.iter())
            .find(|(_, n)| *n == name)
            .map(|(&index, _)| index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Loopback is in every namespace at index 1; this process's own
    /// namespace is read when no daemon holds the instance.
    #[test]
    fn this_namespace_lists_loopback() {
        let interfaces = Interfaces::of_process(None);
        assert_eq!(interfaces.note(), None);
        assert_eq!(interfaces.name(1), "lo");
        assert_eq!(interfaces.index("lo"), Some(1));
        assert_eq!(interfaces.name(u32::MAX), "?");
        let own = Interfaces::of_process(Some(std::process::id()));
        assert_eq!((own.name(1).as_str(), own.note()), ("lo", None));
    }
}
