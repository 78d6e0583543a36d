//! Looking into a running instance from outside the daemon: `status` (what
//! the maps hold and counted) and `explain` (what the data plane does with
//! a given packet). Both read the maps only ([`maps`]), from the pins or
//! through a loaded program, so they work whether the daemon runs or not;
//! `explain` reads them through [`view::MapView`], which [`offline`] also
//! answers from a config's tables built in memory, with no instance.

pub mod cpu_state;
pub mod describe;
pub mod explain;
pub mod interfaces;
pub mod maps;
pub mod names;
pub mod offline;
pub mod pcap;
pub mod status;
pub mod view;

use lb_common::abi::GroupEntry;
use lb_common::select::flowlet::MODE_ECMP;
use lb_common::select::hash::HashFields;

use crate::config::{Mode, Spray};
use names::Names;

/// The config's name for a data-plane `code` among `names`.
fn name_of<T: Copy>(names: &[(&str, T)], code_of: fn(T) -> u32, code: u32, what: &str) -> String {
    names.iter().find(|(_, v)| code_of(*v) == code).map_or_else(
        || format!("unknown {what} {code}"),
        |(name, _)| (*name).to_owned(),
    )
}

/// A group's mode as the config spells it.
pub fn mode_name(code: u32) -> String {
    name_of(&Mode::NAMES, Mode::code, code, "mode")
}

/// A group's mode, and while it drains to ECMP the mode it left.
pub fn mode_line(g: &GroupEntry) -> String {
    match g.draining {
        MODE_ECMP => mode_name(g.mode),
        from => format!("{} (draining from {})", mode_name(g.mode), mode_name(from)),
    }
}

/// A group's spray rule as the config spells it.
pub fn spray_name(code: u32) -> String {
    name_of(&Spray::NAMES, Spray::code, code, "spray")
}

/// The hash fields' config names, in hash order.
pub fn hash_field_names(bits: u32) -> Vec<&'static str> {
    HashFields::NAMES
        .iter()
        .filter(|(_, f)| HashFields(bits).contains(*f))
        .map(|(name, _)| *name)
        .collect()
}

/// `spines (id 0): mode flowlet, gap 256us, spray self-contained, hash
/// src_ip,dst_ip, seed 0x5eed1234, generation 2, 4 members`.
pub fn group_line(id: u32, g: &GroupEntry, names: &Names) -> String {
    format!(
        "{}: mode {}, gap {}us, spray {}, hash {}, seed {:#010x}, generation {}, {} members",
        names.group(id),
        mode_line(g),
        g.flowlet_gap_ns / 1000,
        spray_name(g.spray),
        hash_field_names(g.hash_fields).join(","),
        g.hash_seed,
        g.generation,
        g.member_count
    )
}
