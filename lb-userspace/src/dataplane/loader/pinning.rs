//! An instance kept in bpffs beyond the daemon's life: every map of the
//! production object and the program's link on each ingress interface are
//! pinned under [`PinDir`], so a daemon killed, restarted or upgraded
//! leaves forwarding running with its last tables, and the next one takes
//! them over.
//!
//! A starting daemon loads the program afresh and swaps it onto the pinned
//! links with `bpf_link_update`, never detaching. A map whose pinned
//! definition equals the object's (type, key and value sizes, entries,
//! flags) is reused, flowlet state and counters included; one that
//! differs (an upgrade's new layout, another `flowlet_table_size`) is
//! created anew, pinned beside the old one as `next-NAME`, and renamed
//! over it once every link runs the program that uses it: the old program
//! keeps its old map until the swap.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use aya::EbpfLoader;
use aya::maps::MapData;
use aya::programs::links::{FdLink, PinnedLink};
use aya::programs::xdp::{XdpLink, XdpLinkId};
use lb_common::abi as names;
use tracing::{info, warn};

use super::{Dataplane, DataplaneError, OBJECT, Result};
use crate::dataplane::pins::PinDir;

/// Why an instance cannot be pinned or taken over. Each message says its
/// cause itself, so none has a `source`: a chain would repeat it.
#[derive(Debug, thiserror::Error)]
pub enum PinningError {
    #[error(
        "{root} is not a bpffs and mounting one there failed ({cause}); mount one \
         (mount -t bpf bpf {root}) or pass --bpffs DIR"
    )]
    NotBpffs { root: String, cause: nix::Error },
    #[error(
        "{root}: this process runs in a mount namespace of its own (as under ip netns \
         exec), where a bpffs dies with it, pins and program along, and mounting one in \
         the namespace it came from failed ({cause}); mount one there (mount -t bpf bpf \
         /run/fabriclb/bpf outside the namespace) and pass --bpffs /run/fabriclb/bpf"
    )]
    Ephemeral { root: String, cause: nix::Error },
    #[error("{path}: {cause}")]
    Io { path: String, cause: std::io::Error },
    #[error("another fabriclb (pid {pid}) runs instance {dir}")]
    Locked { dir: String, pid: String },
    #[error("reading the XDP object's map definitions: {0}")]
    Object(aya_obj::ParseError),
    #[error("pinning {what} at {path}: {cause}")]
    Pin {
        what: String,
        path: String,
        cause: Box<dyn std::error::Error + Send + Sync>,
    },
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> PinningError + '_ {
    move |cause| PinningError::Io {
        path: path.display().to_string(),
        cause,
    }
}

fn pin_error(
    what: &str,
    path: &Path,
    source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
) -> DataplaneError {
    DataplaneError::Pinning(PinningError::Pin {
        what: what.to_owned(),
        path: path.display().to_string(),
        cause: source.into(),
    })
}

/// A map's definition as the kernel compares it: type, key and value
/// sizes, entries, flags.
type Definition = [u32; 5];

/// A flag the kernel adds to every devmap itself: no difference between
/// the object's definition and the pinned map.
const KERNEL_ADDED_FLAGS: u32 = aya_obj::generated::BPF_F_RDONLY_PROG;

/// What a starting daemon found pinned, map by map.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Pinned with the object's definition: reused.
    pub reused: Vec<String>,
    /// Not pinned yet: created and pinned at load.
    pub created: Vec<String>,
    /// Pinned with another definition: created anew and pinned once the
    /// links run the new program.
    pub replaced: Vec<String>,
}

impl Plan {
    /// Whether `pin` is one of the object's maps or a staged one.
    fn knows(&self, pin: &str) -> bool {
        let name = pin.strip_prefix("next-").unwrap_or(pin);
        [&self.reused, &self.created, &self.replaced]
            .iter()
            .any(|names| names.iter().any(|n| n == name))
    }
}

/// An instance's pin directory, locked for as long as this lives, and
/// what loading it will do.
pub struct Pinned {
    pins: PinDir,
    /// An exclusive `flock` on the directory: one daemon per instance.
    _lock: File,
    plan: Plan,
    /// Whether the directory held no map of this object when opened and
    /// the start has not committed yet: then dropping removes the pins,
    /// so that a daemon that fails to start leaves nothing attached or
    /// pinned behind it.
    provisional: bool,
}

/// Opens and locks `pins`' directory (created if missing).
fn lock(pins: &PinDir) -> std::result::Result<File, PinningError> {
    let dir = pins.dir();
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let file = File::open(dir).map_err(io(dir))?;
    // SAFETY: a plain flock on a descriptor this function owns.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            return Err(PinningError::Locked {
                dir: dir.display().to_string(),
                pid: holder(dir).map_or_else(|| "unknown".into(), |p| p.to_string()),
            });
        }
        return Err(io(dir)(e));
    }
    Ok(file)
}

/// The process holding the `flock` on `dir`, from `/proc/locks`.
pub fn holder(dir: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(dir).ok()?;
    let (major, minor) = (
        nix::sys::stat::major(meta.dev()),
        nix::sys::stat::minor(meta.dev()),
    );
    let wanted = format!("{major:02x}:{minor:02x}:{}", meta.ino());
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    // "1: FLOCK  ADVISORY  WRITE 1234 00:2e:5678 0 EOF"
    locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        (fields.get(1) == Some(&"FLOCK") && fields.get(5) == Some(&wanted.as_str()))
            .then(|| fields.get(4)?.parse().ok())
            .flatten()
    })
}

/// The definitions of the production object's maps, `FL_FLOWLETS` sized
/// `flowlet_table_size`; data sections (`.rodata`) left out.
fn definitions(
    flowlet_table_size: u32,
) -> std::result::Result<BTreeMap<String, Definition>, PinningError> {
    let object = aya_obj::Object::parse(OBJECT).map_err(PinningError::Object)?;
    Ok(object
        .maps
        .iter()
        .filter(|(name, _)| !name.starts_with('.'))
        .map(|(name, map)| {
            let entries = if name == names::FLOWLETS {
                flowlet_table_size
            } else {
                map.max_entries()
            };
            let definition = [
                map.map_type(),
                map.key_size(),
                map.value_size(),
                entries,
                map.map_flags() & !KERNEL_ADDED_FLAGS,
            ];
            (name.clone(), definition)
        })
        .collect())
}

/// The definition of the map pinned at `path`; `None` when nothing is.
fn pinned_definition(path: &Path) -> Option<Definition> {
    let info = MapData::from_pin(path).ok()?.info().ok()?;
    let map_type = info.map_type().ok()? as u32;
    Some([
        map_type,
        info.key_size(),
        info.value_size(),
        info.max_entries(),
        info.map_flags() & !KERNEL_ADDED_FLAGS,
    ])
}

/// Where a map of a new layout waits until the links run the program
/// that uses it.
fn staged(pins: &PinDir, name: &str) -> PathBuf {
    // bpffs refuses names with a dot.
    pins.dir().join(format!("next-{name}"))
}

impl Pinned {
    /// Mounts bpffs at `bpffs` if needed, locks `instance`'s directory and
    /// compares what is pinned there with the object's maps.
    pub fn open(
        bpffs: &Path,
        instance: &str,
        flowlet_table_size: u32,
    ) -> std::result::Result<Self, PinningError> {
        let pins = PinDir::new(&crate::dataplane::bpffs::persistent(bpffs)?, instance);
        let lock = lock(&pins)?;
        let mut plan = Plan::default();
        for (name, wanted) in definitions(flowlet_table_size)? {
            // Left by an upgrade that never finished: its maps are not
            // what this one wants either.
            let _ = std::fs::remove_file(staged(&pins, &name));
            match pinned_definition(&pins.map(&name)) {
                None => plan.created.push(name),
                Some(found) if found == wanted => plan.reused.push(name),
                Some(found) => {
                    info!(map = name, ?found, ?wanted, "pinned map has another layout");
                    plan.replaced.push(name);
                }
            }
        }
        let provisional = plan.reused.is_empty() && plan.replaced.is_empty();
        Ok(Self {
            pins,
            _lock: lock,
            plan,
            provisional,
        })
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    pub fn dir(&self) -> &Path {
        self.pins.dir()
    }

    /// Where the loader puts each map: reused and created maps at their
    /// pins, replaced ones at their staging pins.
    fn pin_paths(&self) -> Vec<(&str, PathBuf)> {
        let kept = self.plan.reused.iter().chain(&self.plan.created);
        let mut paths: Vec<(&str, PathBuf)> =
            kept.map(|n| (n.as_str(), self.pins.map(n))).collect();
        for name in &self.plan.replaced {
            paths.push((name, staged(&self.pins, name)));
        }
        paths
    }
}

impl Dataplane {
    /// [`Dataplane::load`] onto the pinned instance `pinned`: its maps
    /// reused where their layout is the object's, the rest created and
    /// pinned. Nothing is attached or swapped yet.
    pub fn load_pinned(flowlet_table_size: u32, pinned: Pinned) -> Result<Self> {
        let paths = pinned.pin_paths();
        let mut loader = EbpfLoader::new();
        super::size_flowlets(&mut loader, &flowlet_table_size);
        for (name, path) in &paths {
            loader.map_pin_path(name, path.as_path());
        }
        let mut dataplane = Self::from_loader(&mut loader, OBJECT)?;
        dataplane.pinned = Some(pinned);
        Ok(dataplane)
    }

    /// The program on `interface` through the link pinned for it, swapped
    /// onto it atomically (`bpf_link_update`); `None` when no link is
    /// pinned or the pinned one lost its device (its pin is removed).
    pub fn adopt_link(&mut self, interface: &str) -> Result<Option<XdpLinkId>> {
        let Some(pinned) = &self.pinned else {
            return Ok(None);
        };
        let path = pinned.pins.link(interface);
        let Ok(link) = PinnedLink::from_pin(&path) else {
            return Ok(None);
        };
        let swapped = XdpLink::try_from(FdLink::from(link))
            .map_err(|e| pin_error("link", &path, e))
            .and_then(|link| {
                self.program()?
                    .attach_to_link(link)
                    .map_err(|source| DataplaneError::Attach {
                        interface: interface.to_owned(),
                        source,
                    })
            });
        match swapped {
            Ok(id) => {
                self.note_attached(interface);
                Ok(Some(id))
            }
            Err(e) => {
                // A device deleted since takes its link's program along
                // (ENOLINK); attaching anew is what is left.
                warn!(
                    interface,
                    "pinned link not taken over ({e}); attaching anew"
                );
                let _ = std::fs::remove_file(&path);
                Ok(None)
            }
        }
    }

    /// Pins the link `id` of `interface` just made, so it outlives this
    /// process, and gives it back to the program.
    pub(super) fn pin_link(&mut self, interface: &str, id: XdpLinkId) -> Result<XdpLinkId> {
        let Some(pinned) = &self.pinned else {
            return Ok(id);
        };
        let path = pinned.pins.link(interface);
        let program = self.program()?;
        let link = program
            .take_link(id)
            .map_err(|e| pin_error("link", &path, e))?;
        let link = FdLink::try_from(link).map_err(|e| pin_error("link", &path, e))?;
        let link = FdLink::from(link.pin(&path).map_err(|e| pin_error("link", &path, e))?);
        let link = XdpLink::try_from(link).map_err(|e| pin_error("link", &path, e))?;
        // The same program: the kernel leaves the device alone.
        program
            .attach_to_link(link)
            .map_err(|source| DataplaneError::Attach {
                interface: interface.to_owned(),
                source,
            })
    }

    /// Removes `interface`'s link pin: with the program's own descriptor
    /// closed, the link goes and the program with it.
    pub(super) fn unpin_link(&self, interface: &str) {
        if let Some(pinned) = &self.pinned {
            let path = pinned.pins.link(interface);
            if let Err(e) = std::fs::remove_file(&path)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                warn!(interface, "removing {}: {e}", path.display());
            }
        }
    }

    /// Once every link of the config's `interfaces` runs this program:
    /// removes the pinned links of interfaces the config no longer has
    /// (the old program goes from them) and renames the maps of a new
    /// layout over the old pins, which frees the old maps.
    pub fn commit_pins(&mut self, interfaces: &[String]) -> Result<()> {
        let Some(pinned) = &mut self.pinned else {
            return Ok(());
        };
        pinned.provisional = false;
        let entries = std::fs::read_dir(pinned.pins.dir())
            .map_err(|e| pin_error("links", pinned.pins.dir(), e))?;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let stale = match name.strip_prefix("link-") {
                Some(interface) => !interfaces.iter().any(|i| i == interface),
                None => !pinned.plan.knows(&name),
            };
            if !stale {
                continue;
            }
            std::fs::remove_file(entry.path()).map_err(|e| pin_error(&name, &entry.path(), e))?;
            match name.strip_prefix("link-") {
                Some(interface) => info!(interface, "detached: no longer an ingress interface"),
                None => info!(map = name, "removed: the program no longer has it"),
            }
        }
        for name in std::mem::take(&mut pinned.plan.replaced) {
            let (from, to) = (staged(&pinned.pins, &name), pinned.pins.map(&name));
            std::fs::rename(&from, &to).map_err(|e| pin_error(&name, &to, e))?;
            info!(map = name, "replaced with the new layout");
            pinned.plan.reused.push(name);
        }
        Ok(())
    }

    /// Whether this data plane took over maps a pinned instance held.
    pub fn took_over(&self) -> bool {
        self.pinned
            .as_ref()
            .is_some_and(|p| !p.plan.reused.is_empty())
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        if !self.provisional {
            return;
        }
        let dir = self.pins.dir().display().to_string();
        match remove_instance(&self.pins) {
            Ok(_) => info!(pins = dir, "start failed: the new instance's pins removed"),
            Err(e) => warn!(
                pins = dir,
                "start failed, and removing the new instance's pins: {e}"
            ),
        }
    }
}

/// Removes an instance for good: every pin (which detaches the program
/// from its interfaces and frees the maps once nothing else holds them)
/// and the directory.
pub fn remove_instance(pins: &PinDir) -> std::result::Result<usize, PinningError> {
    let dir = pins.dir();
    let mut removed = 0;
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(io(dir)(e)),
    };
    for entry in entries {
        let path = entry.map_err(io(dir))?.path();
        std::fs::remove_file(&path).map_err(io(&path))?;
        removed += 1;
    }
    std::fs::remove_dir(dir).map_err(io(dir))?;
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bpffs of the test's own, unmounted (pins and all) when dropped.
    struct Mount(PathBuf);

    impl Mount {
        fn new(tag: &str) -> Self {
            let dir = std::env::temp_dir().join(format!("fl{}-{tag}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("dir");
            crate::dataplane::mount_bpffs(&dir).expect("mount bpffs (needs root)");
            Self(dir)
        }
    }

    impl Drop for Mount {
        fn drop(&mut self) {
            let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
            let _ = std::fs::remove_dir(&self.0);
        }
    }

    fn all_maps() -> Vec<String> {
        definitions(1).expect("object").into_keys().collect()
    }

    /// The kernel's view of the maps a load pinned equals the object's
    /// definitions (flags it adds itself aside), so a restart with the same
    /// flowlet table reuses every map; another size replaces the flowlet
    /// table alone, and a map the object no longer has is unpinned. While
    /// one daemon holds the instance, a second is refused with its pid. A
    /// new instance whose start never committed is removed.
    #[test]
    fn a_pinned_instance_is_reused_unless_its_layout_changed() {
        let mount = Mount::new("pinning");
        let pinned = Pinned::open(&mount.0, "t", 1024).expect("open");
        assert_eq!(pinned.plan().created, all_maps());
        assert!(pinned.plan().reused.is_empty() && pinned.plan().replaced.is_empty());
        let dir = pinned.dir().display().to_string();
        match Pinned::open(&mount.0, "t", 1024) {
            Err(PinningError::Locked { dir: locked, pid }) => {
                assert_eq!((locked, pid), (dir, std::process::id().to_string()))
            }
            other => panic!("not refused: {:?}", other.as_ref().map(Pinned::plan)),
        }
        let dataplane = Dataplane::load_pinned(1024, pinned).expect("load");
        assert!(!dataplane.took_over());
        drop(dataplane);
        // A start that fails before committing leaves nothing pinned.
        let pins = PinDir::new(&mount.0, "t");
        assert!(!pins.dir().exists());
        let pinned = Pinned::open(&mount.0, "t", 1024).expect("open anew");
        let mut dataplane = Dataplane::load_pinned(1024, pinned).expect("load anew");
        dataplane.commit_pins(&[]).expect("commit");
        drop(dataplane);

        let again = Pinned::open(&mount.0, "t", 1024).expect("open again");
        assert_eq!(
            again.plan(),
            &Plan {
                reused: all_maps(),
                ..Plan::default()
            }
        );
        drop(again);
        // A map an older object had and this one does not.
        let old = MapData::from_pin(pins.map(names::ROUTES_V4)).expect("pinned");
        old.pin(pins.map("FL_OLD")).expect("pin");
        let upgraded = Pinned::open(&mount.0, "t", 2048).expect("open upgraded");
        assert_eq!(upgraded.plan().replaced, [names::FLOWLETS]);
        assert_eq!(upgraded.plan().reused.len(), all_maps().len() - 1);
        let mut dataplane = Dataplane::load_pinned(2048, upgraded).expect("load upgraded");
        assert!(dataplane.took_over());
        let staged = staged(&pins, names::FLOWLETS);
        assert!(staged.exists());
        dataplane.commit_pins(&[]).expect("commit");
        assert!(!staged.exists());
        assert!(!pins.map("FL_OLD").exists());
        drop(dataplane);
        let committed = Pinned::open(&mount.0, "t", 2048).expect("open committed");
        assert_eq!(committed.plan().reused, all_maps());
    }
}
