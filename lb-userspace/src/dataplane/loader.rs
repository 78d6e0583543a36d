//! The loaded XDP program and typed access to its maps.

#[cfg(test)]
use std::collections::BTreeSet;

use aya::{
    Ebpf, EbpfError, EbpfLoader,
    maps::{Array, MapData, MapError, xdp::XdpMapError},
    programs::{ProgramError, Xdp, XdpMode, xdp::XdpLinkId},
};
use lb_common::abi::{self as names, GroupEntry, GroupStats, NextHop, NextHopStats, VerdictCount};
use lb_common::limits::BUCKETS_PER_GROUP;
use lb_common::verdict::Reason;

use super::Maps;
use super::kernel_floor;
use super::tables::route_table::PoolFull;
use super::tx_errors::TxCounting;

mod events;
mod overrides;
mod peer_load;
mod pinning;
mod ports;
mod routes;
mod tx_counting;
pub use peer_load::LoadRow;
pub use pinning::{Pinned, PinningError, Plan, holder, remove_instance};

/// The production XDP object, built from lb-ebpf by the build script: the
/// forwarding program, the transmit-error tracepoints and their maps,
/// nothing else.
static OBJECT: &[u8] = aya::include_bytes_aligned!(env!("FABRICLB_BPF_OBJECT"));

/// Each message says its cause itself, once (see [`said`]), so it has no
/// `source`: a chain would repeat it.
#[derive(Debug)]
pub enum DataplaneError {
    Load(EbpfError),
    Program {
        name: &'static str,
        source: ProgramError,
    },
    MissingMap {
        name: &'static str,
    },
    Map {
        name: &'static str,
        source: MapError,
    },
    DevMap {
        ifindex: u32,
        source: XdpMapError,
    },
    Attach {
        interface: String,
        source: ProgramError,
    },
    Pinning(PinningError),
    RouteTable(PoolFull),
}

impl std::fmt::Display for DataplaneError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Load(e) => write!(f, "loading the XDP object: {}", said(e)),
            Self::Program { name, source } => write!(f, "XDP program {name}: {}", said(source)),
            Self::MissingMap { name } => write!(f, "map {name} missing from the XDP object"),
            Self::Map { name, source } => {
                let cause = said(source);
                // Some of aya's map errors name the map already.
                if cause.contains(name) {
                    f.write_str(&cause)
                } else {
                    write!(f, "map {name}: {cause}")
                }
            }
            Self::DevMap { ifindex, source } => {
                write!(f, "devmap entry for ifindex {ifindex}: {}", said(source))
            }
            Self::Attach {
                interface,
                source: ProgramError::UnknownInterface { .. },
            } => write!(f, "attaching to {interface}: no such interface"),
            Self::Attach { interface, source } => {
                write!(f, "attaching to {interface}: {}", said(source))
            }
            Self::Pinning(e) => write!(f, "{}", said(e)),
            Self::RouteTable(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for DataplaneError {}

impl From<EbpfError> for DataplaneError {
    fn from(error: EbpfError) -> Self {
        Self::Load(error)
    }
}

/// How many of the verifier's last lines an error keeps: the reason it
/// refused is at the end, followed by its statistics.
const VERIFIER_LINES: usize = 6;

/// `error` and its causes in one message, each said once: aya's
/// transparent variants show their source's text and then give it as their
/// source too, and a refused program carries the verifier's whole log
/// (tens of kilobytes), of which only the end says why.
pub(crate) fn said(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = String::new();
    let mut next = Some(error);
    while let Some(error) = next {
        let part = if let Some(ProgramError::LoadError {
            io_error,
            verifier_log,
        }) = error.downcast_ref::<ProgramError>()
        {
            let log = verifier_log.to_string();
            let lacks = kernel_floor::missing_helper(&log)
                .map(|lacks| format!("{lacks}: "))
                .unwrap_or_default();
            format!(
                "{lacks}the kernel refused to load it ({io_error}); the verifier said:\n{}",
                verifier_tail(&log, VERIFIER_LINES)
            )
        } else if let Some(MapError::CreateError { name, io_error }) =
            error.downcast_ref::<MapError>()
            && let Some(lacks) = kernel_floor::missing_map_type(name, io_error.raw_os_error())
        {
            format!("{lacks}: {error}")
        } else {
            error.to_string()
        };
        if !text.contains(&part) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&part);
        }
        next = error.source();
    }
    text
}

/// The last `keep` lines of a verifier log, saying how many came before.
fn verifier_tail(log: &str, keep: usize) -> String {
    let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    let cut = lines.len().saturating_sub(keep);
    let tail = lines[cut..].join("\n");
    if cut == 0 {
        tail
    } else {
        format!("[{cut} earlier lines cut]\n{tail}")
    }
}

type Result<T> = std::result::Result<T, DataplaneError>;

pub(super) fn map_err(name: &'static str) -> impl Fn(MapError) -> DataplaneError {
    move |source| DataplaneError::Map { name, source }
}

/// The program and its maps, loaded into the kernel. Dropping it detaches
/// every attachment and frees the maps.
pub struct Dataplane {
    ebpf: Ebpf,
    pub maps: Maps,
    /// `None` when the running kernel's tracepoints could not be used
    /// (said once at load) or the object has none (the benchmark's).
    tx_counting: Option<TxCounting>,
    /// The bpffs instance, when the maps and links outlive the process.
    pinned: Option<Pinned>,
}

pub(super) fn take<T>(ebpf: &mut Ebpf, name: &'static str) -> Result<T>
where
    T: TryFrom<aya::maps::Map, Error = MapError>,
{
    let map = ebpf
        .take_map(name)
        .ok_or(DataplaneError::MissingMap { name })?;
    T::try_from(map).map_err(map_err(name))
}

/// Writes the entries of `group`'s slice of a per-group table that differ
/// from `current`.
fn write_table(
    map: &mut Array<MapData, u32>,
    name: &'static str,
    group: u32,
    current: Option<&[u32]>,
    wanted: &[u32],
) -> Result<()> {
    let base = group * BUCKETS_PER_GROUP;
    for (i, &new) in (0u32..).zip(wanted) {
        if current.and_then(|c| c.get(i as usize)) != Some(&new) {
            map.set(base + i, new, 0).map_err(map_err(name))?;
        }
    }
    Ok(())
}

/// Gives the flowlet table `size` entries, and the program the size it
/// indexes the table modulo: the two must agree.
fn size_flowlets<'a>(loader: &mut EbpfLoader<'a>, size: &'a u32) {
    loader
        .map_max_entries(names::FLOWLETS, *size)
        .override_global(names::FLOWLET_TABLE_SIZE, size, true);
}

/// Flowlet table entries read to estimate how many are held.
pub const OCCUPANCY_SAMPLES: u32 = 1024;

impl Dataplane {
    /// Loads the production object and the program into the kernel
    /// (verifier included) without attaching it to any interface; the
    /// flowlet table holds `flowlet_table_size` flows. Transmit errors are
    /// counted once [`Self::count_tx_errors`] is called.
    pub fn load(flowlet_table_size: u32) -> Result<Self> {
        Self::load_object(OBJECT, flowlet_table_size)
    }

    /// [`Self::load`] for another object with the forwarding program and
    /// maps, such as the benchmark's, whose other programs
    /// [`Self::load_program`] then loads onto the same maps.
    pub fn load_object(object: &[u8], flowlet_table_size: u32) -> Result<Self> {
        Self::load_sized(object, &[(names::FLOWLETS, flowlet_table_size)])
    }

    /// [`Self::load_object`] with each named map holding as many entries
    /// as given: the benchmark's cost curves fill tables past the limits
    /// a config may ask for.
    pub fn load_sized(object: &[u8], max_entries: &[(&str, u32)]) -> Result<Self> {
        let mut loader = EbpfLoader::new();
        for (name, entries) in max_entries {
            if *name == names::FLOWLETS {
                size_flowlets(&mut loader, entries);
            } else {
                loader.map_max_entries(name, *entries);
            }
        }
        Self::from_loader(&mut loader, object)
    }

    fn from_loader(loader: &mut EbpfLoader, object: &[u8]) -> Result<Self> {
        let mut ebpf = loader.load(object)?;
        Self::program_of(&mut ebpf)?
            .load()
            .map_err(|source| DataplaneError::Program {
                name: names::PROGRAM,
                source,
            })?;
        let maps = Maps::typed(
            |name| {
                ebpf.take_map(name)
                    .ok_or(DataplaneError::MissingMap { name })
            },
            |name, source| DataplaneError::Map { name, source },
        )?;
        let mut dataplane = Self {
            maps,
            tx_counting: None,
            pinned: None,
            ebpf,
        };
        dataplane.bind_route_record()?;
        Ok(dataplane)
    }

    fn program_of(ebpf: &mut Ebpf) -> Result<&mut Xdp> {
        Self::named_program(ebpf, names::PROGRAM)
    }

    fn named_program<'a>(ebpf: &'a mut Ebpf, name: &'static str) -> Result<&'a mut Xdp> {
        let program = ebpf.program_mut(name).ok_or(DataplaneError::Program {
            name,
            source: ProgramError::NotLoaded,
        })?;
        program
            .try_into()
            .map_err(|source| DataplaneError::Program { name, source })
    }

    /// The forwarding program.
    pub fn program(&mut self) -> Result<&mut Xdp> {
        Self::program_of(&mut self.ebpf)
    }

    /// A program of the object by name (loaded or not).
    pub fn named(&mut self, name: &'static str) -> Result<&mut Xdp> {
        Self::named_program(&mut self.ebpf, name)
    }

    /// A map of the object the typed fields do not hold (the benchmark's).
    pub fn other_map(&mut self, name: &str) -> Option<&mut aya::maps::Map> {
        self.ebpf.map_mut(name)
    }

    /// Loads another program of the object (the benchmark entry points),
    /// sharing this data plane's maps, and returns it.
    pub fn load_program(&mut self, name: &'static str) -> Result<&mut Xdp> {
        let program = Self::named_program(&mut self.ebpf, name)?;
        program
            .load()
            .map_err(|source| DataplaneError::Program { name, source })?;
        Ok(program)
    }

    pub fn attach(&mut self, interface: &str, mode: XdpMode) -> Result<XdpLinkId> {
        let attached = self.program()?.attach(interface, mode);
        let link = attached.map_err(|source| DataplaneError::Attach {
            interface: interface.to_owned(),
            source,
        })?;
        let link = self.pin_link(interface, link)?;
        self.note_attached(interface);
        Ok(link)
    }

    /// Takes the program off `interface`, pinned link included.
    pub fn detach(&mut self, interface: &str, link: XdpLinkId) -> Result<()> {
        self.unpin_link(interface);
        self.program()?
            .detach(link)
            .map_err(|source| DataplaneError::Program {
                name: names::PROGRAM,
                source,
            })
    }

    /// Packets per verdict reason, summed over CPUs.
    pub fn verdict_counts(&self) -> Result<[u64; Reason::COUNT as usize]> {
        Ok(self.verdict_totals()?.map(|count| count.packets))
    }

    /// Packets and bytes per verdict reason, summed over CPUs.
    pub fn verdict_totals(&self) -> Result<[VerdictCount; Reason::COUNT as usize]> {
        self.maps.verdict_totals().map_err(map_err(names::VERDICTS))
    }

    /// One next hop's counters, summed over CPUs (its recent load is
    /// per CPU and left out).
    pub fn nexthop_stats(&self, id: u32) -> Result<NextHopStats> {
        let per_cpu = self
            .maps
            .nexthop_stats
            .get(&id, 0)
            .map_err(map_err(names::NEXTHOP_STATS))?;
        Ok(per_cpu
            .iter()
            .fold(NextHopStats::default(), |acc, s| NextHopStats {
                packets: acc.packets + s.packets,
                bytes: acc.bytes + s.bytes,
                sprayed: acc.sprayed + s.sprayed,
                load: Default::default(),
            }))
    }

    /// One group's counters, summed over CPUs.
    pub fn group_stats(&self, id: u32) -> Result<GroupStats> {
        let per_cpu = self
            .maps
            .group_stats
            .get(&id, 0)
            .map_err(map_err(names::GROUP_STATS))?;
        Ok(per_cpu
            .iter()
            .fold(GroupStats::default(), |acc, s| GroupStats {
                new_flowlets: acc.new_flowlets + s.new_flowlets,
                flowlet_moves: acc.flowlet_moves + s.flowlet_moves,
                sprayed: acc.sprayed + s.sprayed,
                pinned: acc.pinned + s.pinned,
            }))
    }

    /// Entries of the flowlet table (of `capacity`) that hold state of
    /// one of `generations` on some CPU, as `fabriclb status` counts
    /// them, estimated from [`OCCUPANCY_SAMPLES`] entries spread evenly
    /// over the table: flows land on entries by hash, so a stride samples
    /// them fairly, while counting them all reads every entry (65536
    /// reads at the default size), too much for every metrics tick.
    pub fn flowlet_entries_estimate(&self, capacity: u32, generations: &[u32]) -> Result<u64> {
        let stride = (capacity / OCCUPANCY_SAMPLES).max(1);
        let (mut read, mut held) = (0u64, 0u64);
        for index in (0..capacity).step_by(stride as usize) {
            let states = (self.maps.flowlets.get(&index, 0)).map_err(map_err(names::FLOWLETS))?;
            read += 1;
            held += u64::from(states.iter().any(|s| generations.contains(&s.generation)));
        }
        Ok((held * u64::from(capacity)).checked_div(read).unwrap_or(0))
    }

    pub fn set_path_quality(&mut self, id: u32, quality: u32) -> Result<()> {
        self.maps
            .path_quality
            .set(id, quality, 0)
            .map_err(map_err(names::PATH_QUALITY))
    }

    pub fn set_group(&mut self, id: u32, entry: GroupEntry) -> Result<()> {
        self.maps
            .groups
            .set(id, entry, 0)
            .map_err(map_err(names::GROUPS))
    }

    pub fn set_nexthop(&mut self, id: u32, nexthop: NextHop) -> Result<()> {
        self.maps
            .nexthops
            .set(id, nexthop, 0)
            .map_err(map_err(names::NEXTHOPS))
    }

    /// Writes the buckets of `group` that differ from `current`, or all of
    /// them when the map's content is not known.
    pub fn write_buckets(
        &mut self,
        group: u32,
        current: Option<&[u32]>,
        wanted: &[u32],
    ) -> Result<()> {
        write_table(
            &mut self.maps.buckets,
            names::BUCKETS,
            group,
            current,
            wanted,
        )
    }

    /// [`Self::write_buckets`] for the spray sequence.
    pub fn write_spray(
        &mut self,
        group: u32,
        current: Option<&[u32]>,
        wanted: &[u32],
    ) -> Result<()> {
        write_table(&mut self.maps.spray, names::SPRAY, group, current, wanted)
    }

    pub fn add_port(&mut self, ifindex: u32) -> Result<()> {
        self.maps
            .devmap
            .insert(ifindex, ifindex, None, 0)
            .map_err(|source| DataplaneError::DevMap { ifindex, source })
    }

    /// Removes a port; one the kernel already dropped (its device went
    /// away, which empties its devmap slot) is no error.
    pub fn remove_port(&mut self, ifindex: u32) -> Result<()> {
        already_gone(self.maps.devmap.remove(ifindex), names::DEVMAP)
    }
}

/// A removal whose entry was already absent has done what it was asked to.
pub(super) fn already_gone(
    removed: std::result::Result<(), MapError>,
    name: &'static str,
) -> Result<()> {
    match removed {
        Err(MapError::SyscallError(e)) if e.io_error.raw_os_error() == Some(nix::libc::ENOENT) => {
            Ok(())
        }
        other => other.map_err(map_err(name)),
    }
}

/// The names of the programs and maps `object` declares, as aya reads them.
/// Creates the maps (needs root) but loads no program.
#[cfg(test)]
pub(crate) fn declared(object: &[u8]) -> (BTreeSet<String>, BTreeSet<String>) {
    let ebpf = Ebpf::load(object).expect("create the object's maps (needs root)");
    let programs = ebpf.programs().map(|(name, _)| name.to_owned()).collect();
    let maps = ebpf
        .maps()
        .map(|(name, _)| name.to_owned())
        // aya makes each data section (`.rodata`: constant tables) a map
        // named after it; those are not maps the program declares.
        .filter(|name| !name.starts_with('.'))
        .collect();
    (programs, maps)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use aya::maps::MapError;
    use aya::programs::ProgramError;
    use aya::sys::SyscallError;
    use aya_obj::VerifierLog;

    use super::{DataplaneError, OBJECT, declared, names, verifier_tail};

    fn os_error(code: i32) -> std::io::Error {
        std::io::Error::from_raw_os_error(code)
    }

    /// Production carries the forwarding program and its maps, and the
    /// transmit-error tracepoints and theirs, nothing else: the
    /// benchmark's and the testbed's live in objects of their own.
    #[test]
    fn production_object_holds_only_the_forwarding_program_and_maps() {
        let (programs, maps) = declared(OBJECT);
        let expected_programs = [
            names::PROGRAM,
            names::tx_errors::REDIRECT_ERR_PROGRAM,
            names::tx_errors::DEVMAP_XMIT_PROGRAM,
        ];
        assert_eq!(
            programs,
            BTreeSet::from(expected_programs.map(String::from))
        );
        let forwarding = [
            names::ROUTES_V4,
            names::ROUTE4_FIRST,
            names::ROUTE4_POOL,
            names::ROUTES_V6,
            names::ROUTE6_FIRST,
            names::ROUTE6_POOL,
            names::GROUPS,
            names::OVERRIDES,
            names::OVERRIDE_STATS,
            names::BUCKETS,
            names::NEXTHOPS,
            names::DEVMAP,
            names::VERDICTS,
            names::NEXTHOP_STATS,
            names::PEER_LOAD,
            names::CLASS_LOAD,
            names::CLASS_PEER_LOAD,
            names::FLOWLETS,
            names::PATH_QUALITY,
            names::SPRAY,
            names::GROUP_STATS,
            names::SPRAY_CURSOR,
            names::LOAD_CLOCK,
            names::PORTS,
            names::PORT_SLOTS,
            names::SCRATCH,
            names::tx_errors::TX_ERRORS,
            names::tx_errors::TX_WATCH,
            names::tx_errors::INGRESS_PORTS,
            names::events::FLOW_EVENTS,
            names::events::EVENT_CONFIG,
            names::events::EVENT_BUDGET,
            names::events::EVENT_PENDING,
        ];
        assert_eq!(maps, BTreeSet::from(forwarding.map(String::from)));
        // The kernel keeps 15 bytes of a map's name; `explain` finds the
        // forwarding program's maps by theirs (the tracepoints' it never
        // opens).
        for name in forwarding.iter().take_while(|&&n| n != names::SCRATCH) {
            assert!(name.len() <= 15, "{name} is longer than the kernel keeps");
        }
    }

    /// Each message names its subject and says its cause once, also where
    /// aya's error repeats its source's text or names the map itself.
    #[test]
    fn errors_say_each_name_and_cause_once() {
        let missing = DataplaneError::Attach {
            interface: "nosuch0".into(),
            source: ProgramError::UnknownInterface {
                name: "nosuch0".into(),
            },
        };
        assert_eq!(
            missing.to_string(),
            "attaching to nosuch0: no such interface"
        );
        let occupied = DataplaneError::Attach {
            interface: "h1".into(),
            source: ProgramError::SyscallError(SyscallError {
                call: "bpf_link_create",
                io_error: os_error(17),
            }),
        };
        assert_eq!(
            occupied.to_string(),
            "attaching to h1: `bpf_link_create` failed: File exists (os error 17)"
        );
        let created = DataplaneError::Map {
            name: names::GROUPS,
            source: MapError::CreateError {
                name: names::GROUPS.into(),
                io_error: os_error(1),
            },
        };
        assert_eq!(
            created.to_string(),
            "failed to create map `FL_GROUPS`: Operation not permitted (os error 1)"
        );
        let write = DataplaneError::Map {
            name: names::GROUPS,
            source: MapError::SyscallError(SyscallError {
                call: "bpf_map_update_elem",
                io_error: os_error(7),
            }),
        };
        assert_eq!(
            write.to_string(),
            "map FL_GROUPS: `bpf_map_update_elem` failed: Argument list too long (os error 7)"
        );
        assert!(std::error::Error::source(&write).is_none());
    }

    /// A refused program's error keeps the verifier's last lines, where
    /// the reason is, and says how many it left out.
    #[test]
    fn a_refused_program_keeps_the_end_of_the_verifier_log() {
        let log: String = (0..1000)
            .map(|i| format!("{i}: (07) r2 += -24\n"))
            .chain([
                "R5 tried to add from different maps, paths or scalars\n".to_owned(),
                "verification time 1046 usec\n".to_owned(),
            ])
            .collect();
        let refused = DataplaneError::Program {
            name: names::PROGRAM,
            source: ProgramError::LoadError {
                io_error: os_error(13),
                verifier_log: VerifierLog::new(log),
            },
        };
        assert_eq!(
            refused.to_string(),
            "XDP program fabriclb: the kernel refused to load it (Permission denied \
             (os error 13)); the verifier said:\n[996 earlier lines cut]\n\
             996: (07) r2 += -24\n997: (07) r2 += -24\n998: (07) r2 += -24\n\
             999: (07) r2 += -24\n\
             R5 tried to add from different maps, paths or scalars\n\
             verification time 1046 usec"
        );
    }

    #[test]
    fn a_short_verifier_log_is_kept_whole() {
        assert_eq!(verifier_tail("a\n\nb\n", 6), "a\nb");
        assert_eq!(verifier_tail("", 6), "");
        assert_eq!(verifier_tail("a\nb\nc", 2), "[1 earlier lines cut]\nb\nc");
    }

    /// The verifier's work on the forwarding program is most of a cold
    /// start's outage (about 0.35 s for 115k instructions verified here;
    /// 164k since idle peers are weighed at drawn loads, a branch in the
    /// member walk). A member search unrolled over 64 slots made it check
    /// the rest of the path once per slot it could stop at: 366k
    /// instructions, 0.8 s.
    #[test]
    fn the_verifier_checks_the_forwarding_path_about_once() {
        let mut dataplane = super::Dataplane::load(1024).expect("load (needs root)");
        let verified = dataplane
            .program()
            .expect("the forwarding program")
            .info()
            .expect("program info")
            .verified_instruction_count()
            .expect("kernel reports verified instructions");
        assert!(verified <= 170_000, "{verified} instructions verified");
    }
}
