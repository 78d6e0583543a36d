//! The transmit-error tracepoints: checked against the running kernel,
//! attached, and read back. They count frames the forwarding program
//! redirected that never left (`lb_common::abi::tx_errors`).

use std::os::fd::AsRawFd;

use aya::{
    Ebpf,
    maps::{Array, HashMap, MapData, PerCpuHashMap},
    programs::{ProgramError, RawTracePoint},
};
use lb_common::abi::tx_errors::{self as names, TxErrors, TxWatch, devmap_xmit, redirect_err};

use super::btf::{Btf, BtfError, Shape, VMLINUX};
use super::loader::{DataplaneError, map_err, take};

/// Why transmit errors are not counted.
#[derive(Debug, thiserror::Error)]
pub enum TxErrorsUnavailable {
    #[error("reading the kernel's types ({VMLINUX}): {0}")]
    ReadBtf(#[source] std::io::Error),
    #[error("parsing the kernel's types ({VMLINUX}): {0}")]
    ParseBtf(#[source] BtfError),
    #[error("raw tracepoint {event} passes {found:?}, not the {expected:?} the program reads")]
    Arguments {
        event: &'static str,
        expected: Vec<Shape>,
        found: Option<Vec<Shape>>,
    },
    #[error("the kernel's struct {structure} has no member {member} at a byte offset")]
    Member {
        structure: &'static str,
        member: &'static str,
    },
    #[error("reading this network namespace's cookie: {0}")]
    NetnsCookie(#[source] std::io::Error),
    #[error("raw tracepoint program {name}: {source}")]
    Program {
        name: &'static str,
        #[source]
        source: ProgramError,
    },
    #[error("program {name} missing from the object")]
    Missing { name: &'static str },
    #[error(transparent)]
    Dataplane(#[from] DataplaneError),
}

/// The maps of counting transmit errors userspace touches.
pub(super) struct TxCounting {
    pub(super) counters: PerCpuHashMap<MapData, u32, TxErrors>,
    pub(super) ingress_ports: HashMap<MapData, u32, u8>,
}

fn device() -> Shape {
    Shape::StructPointer("net_device".into())
}

/// `TP_PROTO` of each tracepoint as the programs read it.
fn expected_arguments(event: &str) -> Vec<Shape> {
    let int = Shape::Integer(4);
    if event == redirect_err::EVENT {
        // dev, xdp, tgt, err, map_type, map_id, index
        let prog = Shape::StructPointer("bpf_prog".into());
        vec![
            device(),
            prog,
            Shape::Pointer,
            int.clone(),
            int.clone(),
            int.clone(),
            int,
        ]
    } else {
        // from_dev, to_dev, sent, drops, err
        vec![device(), device(), int.clone(), int.clone(), int]
    }
}

/// Where `btf`'s kernel keeps what the programs read, for `devmap_id` in
/// network namespace `netns_cookie`; an error when its tracepoints pass
/// other arguments than the programs read.
fn watch(btf: &Btf, netns_cookie: u64, devmap_id: u32) -> Result<TxWatch, TxErrorsUnavailable> {
    for event in [redirect_err::EVENT, devmap_xmit::EVENT] {
        let expected = expected_arguments(event);
        let found = btf.tracepoint_arguments(event);
        if found.as_ref() != Some(&expected) {
            return Err(TxErrorsUnavailable::Arguments {
                event,
                expected,
                found,
            });
        }
    }
    let offset = |structure, member| {
        btf.member_offset(structure, member)
            .ok_or(TxErrorsUnavailable::Member { structure, member })
    };
    Ok(TxWatch {
        netns_cookie,
        devmap_id,
        ifindex_offset: offset("net_device", "ifindex")?,
        net_offset: offset("net_device", "nd_net")? + offset("possible_net_t", "net")?,
        net_cookie_offset: offset("net", "net_cookie")?,
    })
}

/// The cookie of the network namespace this thread is in (Linux 5.14+).
fn netns_cookie() -> std::io::Result<u64> {
    let socket =
        std::net::UdpSocket::bind("0.0.0.0:0").or_else(|_| std::net::UdpSocket::bind("[::]:0"))?;
    let mut cookie = 0u64;
    let mut len = size_of::<u64>() as libc::socklen_t;
    // SAFETY: the buffer and its length are a u64's.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_NETNS_COOKIE,
            (&raw mut cookie).cast(),
            &raw mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(cookie)
}

/// Checks the running kernel against what the programs read, loads and
/// attaches them, watching the devmap `devmap_id`. Links live as long as
/// `ebpf`.
pub(super) fn attach(ebpf: &mut Ebpf, devmap_id: u32) -> Result<TxCounting, TxErrorsUnavailable> {
    let data = std::fs::read(VMLINUX).map_err(TxErrorsUnavailable::ReadBtf)?;
    let btf = Btf::parse(&data).map_err(TxErrorsUnavailable::ParseBtf)?;
    let cookie = netns_cookie().map_err(TxErrorsUnavailable::NetnsCookie)?;
    let watch = watch(&btf, cookie, devmap_id)?;
    let programs = [
        (names::REDIRECT_ERR_PROGRAM, redirect_err::EVENT),
        (names::DEVMAP_XMIT_PROGRAM, devmap_xmit::EVENT),
    ];
    // Loaded before their maps are taken: the maps' descriptors in the
    // programs' code are the object's.
    for (name, _) in programs {
        tracepoint(ebpf, name)?
            .load()
            .map_err(|source| TxErrorsUnavailable::Program { name, source })?;
    }
    let mut watched: Array<MapData, TxWatch> = take(ebpf, names::TX_WATCH)?;
    watched.set(0, watch, 0).map_err(map_err(names::TX_WATCH))?;
    for (name, event) in programs {
        tracepoint(ebpf, name)?
            .attach(event)
            .map_err(|source| TxErrorsUnavailable::Program { name, source })?;
    }
    Ok(TxCounting {
        counters: take(ebpf, names::TX_ERRORS)?,
        ingress_ports: take(ebpf, names::INGRESS_PORTS)?,
    })
}

fn tracepoint<'a>(
    ebpf: &'a mut Ebpf,
    name: &'static str,
) -> Result<&'a mut RawTracePoint, TxErrorsUnavailable> {
    ebpf.program_mut(name)
        .ok_or(TxErrorsUnavailable::Missing { name })?
        .try_into()
        .map_err(|source| TxErrorsUnavailable::Program { name, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The running kernel passes what the programs read, and has the
    /// fields they read where a device's ifindex and namespace cannot be
    /// at the same place.
    #[test]
    fn the_running_kernel_lets_the_programs_count() {
        let data = std::fs::read(VMLINUX).expect("kernel BTF");
        let btf = Btf::parse(&data).expect("parses");
        let watch = watch(&btf, 7, 9).expect("tracepoints as the programs read them");
        assert_eq!((watch.netns_cookie, watch.devmap_id), (7, 9));
        assert_ne!(watch.ifindex_offset, watch.net_offset);
        assert!(netns_cookie().expect("cookie") != 0);
    }
}
