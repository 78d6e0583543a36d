//! Whose XDP program is on an interface when ours cannot go there: the
//! program and its mode from the link's `IFLA_XDP`, its name from the
//! kernel's program list, and the process holding it from
//! `/proc/*/fdinfo`.

use std::fmt;

use aya::programs::{ProgramError, loaded_programs};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_packet_route::link::{LinkAttribute, LinkMessage, LinkXdp, XdpAttached};
use rtnetlink::packet_core::{NLM_F_REQUEST, NetlinkMessage, NetlinkPayload};

use super::DataplaneError;

/// Why the program could not be attached to an interface.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error(
        "attaching to {interface}: another XDP program is attached there: {occupant}; \
         {}",
        occupant.removal(interface)
    )]
    Occupied {
        interface: String,
        occupant: Occupant,
    },
    #[error(transparent)]
    Failed(DataplaneError),
}

impl AttachError {
    /// Attaching in another mode may succeed: neither is the interface
    /// missing nor another program there.
    pub fn mode_refused(&self) -> bool {
        !matches!(
            self,
            Self::Occupied { .. }
                | Self::Failed(DataplaneError::Attach {
                    source: ProgramError::UnknownInterface { .. },
                    ..
                })
        )
    }
}

/// `error`, from attaching to `interface`, told as what is in the way when
/// another program is.
pub fn attach_error(interface: &str, error: DataplaneError) -> AttachError {
    match on(interface) {
        Some(occupant) => AttachError::Occupied {
            interface: interface.to_owned(),
            occupant,
        },
        None => AttachError::Failed(error),
    }
}

/// An XDP program attached to an interface.
#[derive(Debug)]
pub struct Occupant {
    pub prog_id: u32,
    /// `driver`, `generic`, `offload`, or `multiple` modes at once.
    pub mode: &'static str,
    /// The program's name, when the kernel lets this process read it
    /// (CAP_SYS_ADMIN).
    pub name: Option<String>,
    /// Who holds it, when a process other than this one does and may be
    /// seen doing so.
    pub holder: Option<Holder>,
}

/// A process with a descriptor of the program, or of the bpf link that
/// attached it.
#[derive(Debug, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    pub comm: String,
    pub link_id: Option<u32>,
}

impl fmt::Display for Occupant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "program id {}", self.prog_id)?;
        if let Some(name) = &self.name {
            write!(f, " {name:?}")?;
        }
        write!(f, " in {} mode, held by ", self.mode)?;
        match &self.holder {
            Some(holder) => write!(f, "pid {} ({})", holder.pid, holder.comm)?,
            None => f.write_str("unknown")?,
        }
        if let Some(link) = self.holder.as_ref().and_then(|h| h.link_id) {
            write!(f, " through bpf link {link}")?;
        }
        Ok(())
    }
}

impl Occupant {
    /// How to get it out of the way.
    fn removal(&self, interface: &str) -> String {
        match &self.holder {
            // The attachment lives as long as the link's descriptor.
            Some(Holder {
                link_id: Some(_), ..
            }) => "stop that process to remove it".to_owned(),
            _ => {
                let flag = match self.mode {
                    "driver" => "xdpdrv",
                    "generic" => "xdpgeneric",
                    "offload" => "xdpoffload",
                    _ => "xdp",
                };
                format!(
                    "remove it with `ip link set dev {interface} {flag} off` (if a bpf link \
                     holds it, stop the process holding the link or delete the link's pin)"
                )
            }
        }
    }
}

/// The XDP program on `interface` now, if any.
pub fn on(interface: &str) -> Option<Occupant> {
    let ifindex = nix::net::if_::if_nametoindex(interface).ok()?;
    let (prog_id, mode) = xdp_of(link_message(ifindex)?)?;
    Some(Occupant {
        prog_id,
        mode,
        name: program_name(prog_id),
        holder: holder(prog_id),
    })
}

/// RTM_GETLINK for one interface; `None` when the kernel does not answer
/// with it.
fn link_message(ifindex: u32) -> Option<LinkMessage> {
    use rtnetlink::sys::{Socket, protocols::NETLINK_ROUTE};
    let mut socket = Socket::new(NETLINK_ROUTE).ok()?;
    socket.bind_auto().ok()?;
    let mut request = LinkMessage::default();
    request.header.index = ifindex;
    let mut message = NetlinkMessage::from(RouteNetlinkMessage::GetLink(request));
    message.header.flags = NLM_F_REQUEST;
    message.finalize();
    let mut bytes = vec![0; message.buffer_len()];
    message.serialize(&mut bytes);
    socket.send(&bytes, 0).ok()?;
    // The kernel answers a request for one link before `send` returns.
    let (answer, _) = socket.recv_from_full().ok()?;
    match NetlinkMessage::<RouteNetlinkMessage>::deserialize(&answer)
        .ok()?
        .payload
    {
        NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewLink(link)) => Some(link),
        _ => None,
    }
}

/// The attached program's id and mode from a link's `IFLA_XDP`.
fn xdp_of(link: LinkMessage) -> Option<(u32, &'static str)> {
    let xdp = link.attributes.into_iter().find_map(|a| match a {
        LinkAttribute::Xdp(xdp) => Some(xdp),
        _ => None,
    })?;
    let mut mode = None;
    let mut prog_id = None;
    for attribute in xdp {
        match attribute {
            LinkXdp::Attached(attached) => {
                mode = match attached {
                    XdpAttached::Driver => Some("driver"),
                    XdpAttached::SocketBuffer => Some("generic"),
                    XdpAttached::Hardware => Some("offload"),
                    XdpAttached::Multiple => Some("multiple"),
                    _ => None,
                }
            }
            // With programs in several modes only the per-mode ids come.
            LinkXdp::ProgId(id) | LinkXdp::DrvProgId(id) | LinkXdp::SkbProgId(id) => {
                prog_id = prog_id.or(Some(id));
            }
            _ => {}
        }
    }
    Some((prog_id?, mode?))
}

/// The name the program was loaded with, when this process may look
/// programs up by id.
fn program_name(prog_id: u32) -> Option<String> {
    loaded_programs()
        .filter_map(Result::ok)
        .find(|program| program.id() == prog_id)
        .and_then(|program| program.name_as_str().map(str::to_owned))
}

/// A process other than this one holding program `prog_id`: one with the
/// bpf link that attached it if there is one, else one with the program.
/// Processes this one may not inspect (others' without CAP_SYS_PTRACE)
/// are passed over.
fn holder(prog_id: u32) -> Option<Holder> {
    let me = std::process::id();
    let mut with_program = None;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let is_bpf = std::fs::read_link(fd.path())
                .is_ok_and(|target| target.to_string_lossy().starts_with("anon_inode:bpf"));
            if !is_bpf {
                continue;
            }
            let info = entry.path().join("fdinfo").join(fd.file_name());
            let Some(hold) = std::fs::read_to_string(info)
                .ok()
                .and_then(|text| holds(&text, prog_id))
            else {
                continue;
            };
            let comm = std::fs::read_to_string(entry.path().join("comm"))
                .map_or_else(|_| "?".to_owned(), |c| c.trim_end().to_owned());
            match hold {
                Hold::Link(link_id) => {
                    return Some(Holder {
                        pid,
                        comm,
                        link_id: Some(link_id),
                    });
                }
                Hold::Program => {
                    with_program.get_or_insert(Holder {
                        pid,
                        comm,
                        link_id: None,
                    });
                }
            }
        }
    }
    with_program
}

/// What a bpf descriptor is of, by its fdinfo.
#[derive(Debug, PartialEq, Eq)]
enum Hold {
    Link(u32),
    Program,
}

/// Whether the descriptor whose fdinfo is `text` is program `prog_id` or
/// a link of it (a link's fdinfo carries its `link_id` and its program's
/// `prog_id`; a map's neither).
fn holds(text: &str, prog_id: u32) -> Option<Hold> {
    let field = |key: &str| {
        text.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            (k == key).then(|| v.trim().parse::<u32>().ok()).flatten()
        })
    };
    if field("prog_id")? != prog_id {
        return None;
    }
    Some(field("link_id").map_or(Hold::Program, Hold::Link))
}

#[cfg(test)]
mod tests {
    use super::{Hold, Holder, Occupant, holds};

    const LINK: &str = "pos:\t0\nflags:\t02000000\nmnt_id:\t17\nino:\t1038\n\
        link_type:\txdp\nlink_id:\t12460\nprog_tag:\t546e882c05fb207d\n\
        prog_id:\t21924\nifindex:\t2\n";
    const PROGRAM: &str = "pos:\t0\nflags:\t02000002\nmnt_id:\t17\nino:\t1038\n\
        prog_type:\t6\nprog_jited:\t1\nprog_tag:\t546e882c05fb207d\nmemlock:\t24576\n\
        prog_id:\t21924\nrun_time_ns:\t0\nrun_cnt:\t0\nrecursion_misses:\t0\n\
        verified_insns:\t117640\n";
    const MAP: &str = "pos:\t0\nflags:\t02000002\nmap_type:\t2\nkey_size:\t4\n\
        max_entries:\t21924\nmap_id:\t21924\nfrozen:\t0\n";

    /// fdinfo texts as the kernel writes them for a link, a program and a
    /// map.
    #[test]
    fn fdinfo_tells_links_and_programs_of_one_id() {
        assert_eq!(holds(LINK, 21924), Some(Hold::Link(12460)));
        assert_eq!(holds(PROGRAM, 21924), Some(Hold::Program));
        assert_eq!(holds(LINK, 21925), None);
        assert_eq!(holds(PROGRAM, 2192), None);
        assert_eq!(holds(MAP, 21924), None);
        assert_eq!(holds("", 21924), None);
    }

    #[test]
    fn an_occupant_says_what_and_whose_and_how_to_remove_it() {
        let by_link = Occupant {
            prog_id: 42,
            mode: "driver",
            name: Some("fabriclb".into()),
            holder: Some(Holder {
                pid: 1234,
                comm: "fabriclb".into(),
                link_id: Some(7),
            }),
        };
        assert_eq!(
            by_link.to_string(),
            "program id 42 \"fabriclb\" in driver mode, held by pid 1234 (fabriclb) \
             through bpf link 7"
        );
        assert_eq!(by_link.removal("h1"), "stop that process to remove it");
        let unknown = Occupant {
            prog_id: 42,
            mode: "generic",
            name: None,
            holder: None,
        };
        assert_eq!(
            unknown.to_string(),
            "program id 42 in generic mode, held by unknown"
        );
        assert_eq!(
            unknown.removal("h1"),
            "remove it with `ip link set dev h1 xdpgeneric off` (if a bpf link holds it, \
             stop the process holding the link or delete the link's pin)"
        );
    }
}
