//! The capabilities `fabriclb run` needs: checked before it loads
//! anything, and after start-up cut down to what reloads and refreshes
//! use, so a flaw in what the daemon parses later (config, telemetry
//! answers, netlink) cannot reach the rest of root's powers.

use caps::{CapSet, Capability, CapsHashSet};
use tracing::warn;

/// What start-up uses: creating maps and loading the program (CAP_BPF),
/// an XDP program and attaching it (CAP_NET_ADMIN), the verifier's pointer
/// arithmetic the program relies on (CAP_PERFMON), raw sockets for
/// neighbour probes (CAP_NET_RAW).
const AT_START: [Capability; 4] = [
    Capability::CAP_BPF,
    Capability::CAP_NET_ADMIN,
    Capability::CAP_PERFMON,
    Capability::CAP_NET_RAW,
];

/// What may still be used once started. CAP_BPF: kernels before 6.5 with
/// unprivileged BPF disabled (most distributions' default) refuse every
/// bpf() call without it, map writes and link creation included.
/// CAP_NET_ADMIN: where the kernel has no XDP bpf links, aya attaches an
/// interface a reload adds, or one re-created, over netlink. CAP_NET_RAW:
/// neighbour probes over raw sockets. Nothing is loaded after start, so
/// CAP_PERFMON goes.
const KEPT: [Capability; 3] = [
    Capability::CAP_BPF,
    Capability::CAP_NET_ADMIN,
    Capability::CAP_NET_RAW,
];

#[derive(Debug, thiserror::Error)]
pub enum PrivilegeError {
    #[error("fabriclb run needs {}; missing: {}", names(&AT_START), names(missing))]
    Missing { missing: Vec<Capability> },
    #[error("reading this process's capabilities: {0}")]
    Read(#[source] caps::errors::CapsError),
}

/// Refuses, naming what lacks, unless this thread has every capability
/// start-up uses.
pub fn require_at_start() -> Result<(), PrivilegeError> {
    let effective = caps::read(None, CapSet::Effective).map_err(PrivilegeError::Read)?;
    let missing = missing(&effective);
    if missing.is_empty() {
        Ok(())
    } else {
        Err(PrivilegeError::Missing { missing })
    }
}

/// What of [`AT_START`] `effective` lacks. CAP_SYS_ADMIN stands in for
/// CAP_BPF and CAP_PERFMON, as the kernel lets it.
fn missing(effective: &CapsHashSet) -> Vec<Capability> {
    let admin = effective.contains(&Capability::CAP_SYS_ADMIN);
    AT_START
        .into_iter()
        .filter(|cap| {
            let covered = admin && matches!(cap, Capability::CAP_BPF | Capability::CAP_PERFMON);
            !covered && !effective.contains(cap)
        })
        .collect()
}

/// What to keep of `permitted`: [`KEPT`], and CAP_SYS_ADMIN if it stands
/// in for a CAP_BPF the process was not given.
fn kept(permitted: &CapsHashSet) -> CapsHashSet {
    let mut kept: CapsHashSet = KEPT
        .into_iter()
        .filter(|cap| permitted.contains(cap))
        .collect();
    if !permitted.contains(&Capability::CAP_BPF) && permitted.contains(&Capability::CAP_SYS_ADMIN) {
        kept.insert(Capability::CAP_SYS_ADMIN);
    }
    kept
}

pub(super) fn names<'a>(caps: impl IntoIterator<Item = &'a Capability>) -> String {
    let names: Vec<String> = caps.into_iter().map(Capability::to_string).collect();
    names.join(", ")
}

pub(super) fn drop_to_kept() -> Result<CapsHashSet, caps::errors::CapsError> {
    let keep = kept(&caps::read(None, CapSet::Permitted)?);
    if caps::has_cap(None, CapSet::Effective, Capability::CAP_SETPCAP)? {
        for cap in caps::read(None, CapSet::Bounding)?.difference(&keep) {
            caps::drop(None, CapSet::Bounding, *cap)?;
        }
    } else {
        warn!("no CAP_SETPCAP: the bounding set stays as it was given");
    }
    nix::sys::prctl::set_no_new_privs().map_err(|e| format!("setting no_new_privs: {e}"))?;
    caps::clear(None, CapSet::Ambient)?;
    caps::clear(None, CapSet::Inheritable)?;
    // The effective set may never hold more than the permitted one.
    caps::set(None, CapSet::Effective, &keep)?;
    caps::set(None, CapSet::Permitted, &keep)?;
    Ok(keep)
}

#[cfg(test)]
mod tests {
    use caps::Capability::{
        CAP_BPF, CAP_DAC_OVERRIDE, CAP_NET_ADMIN, CAP_NET_RAW, CAP_PERFMON, CAP_SETPCAP,
        CAP_SYS_ADMIN,
    };
    use caps::CapsHashSet;

    use super::{PrivilegeError, kept, missing};

    fn set(caps: &[caps::Capability]) -> CapsHashSet {
        caps.iter().copied().collect()
    }

    #[test]
    fn start_up_names_what_is_missing_in_one_line() {
        let error = PrivilegeError::Missing {
            missing: missing(&set(&[
                CAP_BPF,
                CAP_NET_ADMIN,
                CAP_NET_RAW,
                CAP_DAC_OVERRIDE,
            ])),
        };
        assert_eq!(
            error.to_string(),
            "fabriclb run needs CAP_BPF, CAP_NET_ADMIN, CAP_PERFMON, CAP_NET_RAW; \
             missing: CAP_PERFMON"
        );
        assert_eq!(
            missing(&set(&[])),
            [CAP_BPF, CAP_NET_ADMIN, CAP_PERFMON, CAP_NET_RAW]
        );
        assert_eq!(
            missing(&set(&[CAP_BPF, CAP_NET_ADMIN, CAP_PERFMON, CAP_NET_RAW])),
            []
        );
    }

    /// The kernel lets CAP_SYS_ADMIN do what CAP_BPF and CAP_PERFMON do,
    /// not what CAP_NET_ADMIN or CAP_NET_RAW do.
    #[test]
    fn sys_admin_stands_in_for_bpf_and_perfmon() {
        assert_eq!(
            missing(&set(&[CAP_SYS_ADMIN, CAP_NET_ADMIN, CAP_NET_RAW])),
            []
        );
        assert_eq!(
            missing(&set(&[CAP_SYS_ADMIN])),
            [CAP_NET_ADMIN, CAP_NET_RAW]
        );
    }

    #[test]
    fn kept_is_what_reloads_use_of_what_was_permitted() {
        let root: CapsHashSet = caps::all();
        assert_eq!(kept(&root), set(&[CAP_BPF, CAP_NET_ADMIN, CAP_NET_RAW]));
        assert_eq!(
            kept(&set(&[CAP_BPF, CAP_NET_ADMIN, CAP_PERFMON, CAP_SETPCAP])),
            set(&[CAP_BPF, CAP_NET_ADMIN])
        );
        assert_eq!(
            kept(&set(&[CAP_SYS_ADMIN, CAP_NET_ADMIN, CAP_NET_RAW])),
            set(&[CAP_SYS_ADMIN, CAP_NET_ADMIN, CAP_NET_RAW])
        );
    }
}
