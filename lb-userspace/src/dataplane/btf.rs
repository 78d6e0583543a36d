//! What the transmit-error tracepoints need of the running kernel's type
//! information (BTF, `/sys/kernel/btf/vmlinux`): where a struct keeps a
//! member, and what a raw tracepoint passes. Only the little this needs;
//! every kind is still walked, to find where the next type starts.

use std::collections::HashMap;

/// The kernel's types, as `/sys/kernel/btf/vmlinux` holds them.
pub const VMLINUX: &str = "/sys/kernel/btf/vmlinux";

const MAGIC: u16 = 0xeb9f;

const KIND_INT: u32 = 1;
const KIND_PTR: u32 = 2;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_ENUM: u32 = 6;
const KIND_TYPEDEF: u32 = 8;
const KIND_VOLATILE: u32 = 9;
const KIND_CONST: u32 = 10;
const KIND_RESTRICT: u32 = 11;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_VAR: u32 = 14;
const KIND_DATASEC: u32 = 15;
const KIND_DECL_TAG: u32 = 17;
const KIND_TYPE_TAG: u32 = 18;
const KIND_ENUM64: u32 = 19;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BtfError {
    #[error("not BTF (bad magic or header)")]
    Header,
    #[error("type section cut short at byte {0}")]
    Truncated(usize),
}

/// One type: its kind, name, size or referenced type, and its members
/// (struct, union) or parameters (function prototype) as name, type and
/// bit offset.
#[derive(Clone, Debug)]
struct Type {
    kind: u32,
    name: u32,
    size_or_type: u32,
    members: Vec<(u32, u32, u32)>,
}

/// A parsed BTF blob.
pub struct Btf {
    types: Vec<Type>,
    strings: Vec<u8>,
    /// Name -> ids of the types of that name.
    by_name: HashMap<String, Vec<u32>>,
}

/// A parameter or member's type, seen through typedefs and qualifiers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shape {
    /// A pointer to a struct of this name.
    StructPointer(String),
    /// Any other pointer.
    Pointer,
    /// An integer or enum of this many bytes.
    Integer(u32),
    Other,
}

impl Btf {
    pub fn parse(data: &[u8]) -> Result<Self, BtfError> {
        let u16_at = |at: usize| {
            data.get(at..at + 2)
                .map(|b| u16::from_le_bytes([b[0], b[1]]))
        };
        let u32_at = |at: usize| {
            data.get(at..at + 4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        };
        if u16_at(0) != Some(MAGIC) {
            return Err(BtfError::Header);
        }
        let field = |at| u32_at(at).map(|v| v as usize).ok_or(BtfError::Header);
        let header_len = field(4)?;
        let (type_off, type_len) = (field(8)?, field(12)?);
        let (str_off, str_len) = (field(16)?, field(20)?);
        let strings = data
            .get(header_len + str_off..header_len + str_off + str_len)
            .ok_or(BtfError::Header)?
            .to_vec();
        let (start, end) = (header_len + type_off, header_len + type_off + type_len);
        // Id 0 is void.
        let mut types = vec![Type {
            kind: 0,
            name: 0,
            size_or_type: 0,
            members: Vec::new(),
        }];
        let mut at = start;
        while at < end {
            let word = |i: usize| u32_at(at + 4 * i).ok_or(BtfError::Truncated(at));
            let (name, info, size_or_type) = (word(0)?, word(1)?, word(2)?);
            let (kind, vlen) = ((info >> 24) & 0x1f, (info & 0xffff) as usize);
            let bitfields = info >> 31 == 1;
            at += 12;
            let mut members = Vec::new();
            let extra = match kind {
                KIND_INT | KIND_VAR | KIND_DECL_TAG => 4,
                KIND_ARRAY => 12,
                KIND_STRUCT | KIND_UNION => {
                    for i in 0..vlen {
                        let base = at + 12 * i;
                        let read = |j: usize| u32_at(base + 4 * j).ok_or(BtfError::Truncated(base));
                        let offset = read(2)?;
                        let bits = if bitfields {
                            offset & 0xff_ffff
                        } else {
                            offset
                        };
                        members.push((read(0)?, read(1)?, bits));
                    }
                    12 * vlen
                }
                KIND_ENUM => 8 * vlen,
                KIND_FUNC_PROTO => {
                    for i in 0..vlen {
                        let base = at + 8 * i;
                        let read = |j: usize| u32_at(base + 4 * j).ok_or(BtfError::Truncated(base));
                        members.push((read(0)?, read(1)?, 0));
                    }
                    8 * vlen
                }
                KIND_DATASEC | KIND_ENUM64 => 12 * vlen,
                _ => 0,
            };
            at += extra;
            types.push(Type {
                kind,
                name,
                size_or_type,
                members,
            });
        }
        if at != end {
            return Err(BtfError::Truncated(end));
        }
        let mut btf = Self {
            types,
            strings,
            by_name: HashMap::new(),
        };
        for id in 1..btf.types.len() as u32 {
            let name = btf.name(btf.types[id as usize].name).to_owned();
            if !name.is_empty() {
                btf.by_name.entry(name).or_default().push(id);
            }
        }
        Ok(btf)
    }

    fn name(&self, offset: u32) -> &str {
        let rest = self.strings.get(offset as usize..).unwrap_or_default();
        let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        std::str::from_utf8(&rest[..end]).unwrap_or_default()
    }

    fn named(&self, name: &str, kind: u32) -> Option<&Type> {
        self.by_name
            .get(name)?
            .iter()
            .map(|&id| &self.types[id as usize])
            .find(|t| t.kind == kind)
    }

    /// Byte offset of `member` in struct `name` (or the struct typedef
    /// `name` names, as `possible_net_t`); `None` when either is missing or
    /// the member is a bitfield.
    pub fn member_offset(&self, name: &str, member: &str) -> Option<u32> {
        let structure = match self.named(name, KIND_STRUCT) {
            Some(t) => t,
            None => self
                .resolve(self.named(name, KIND_TYPEDEF)?.size_or_type)
                .filter(|t| t.kind == KIND_STRUCT)?,
        };
        let bits = structure
            .members
            .iter()
            .find(|(n, _, _)| self.name(*n) == member)?
            .2;
        (bits % 8 == 0).then_some(bits / 8)
    }

    /// The type `id` refers to past typedefs and qualifiers.
    fn resolve(&self, mut id: u32) -> Option<&Type> {
        loop {
            let t = self.types.get(id as usize)?;
            match t.kind {
                KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => {
                    id = t.size_or_type;
                }
                _ => return Some(t),
            }
        }
    }

    fn shape(&self, id: u32) -> Shape {
        match self.resolve(id) {
            Some(t) if t.kind == KIND_PTR => match self.resolve(t.size_or_type) {
                Some(to) if to.kind == KIND_STRUCT => {
                    Shape::StructPointer(self.name(to.name).into())
                }
                _ => Shape::Pointer,
            },
            Some(t) if matches!(t.kind, KIND_INT | KIND_ENUM) => Shape::Integer(t.size_or_type),
            _ => Shape::Other,
        }
    }

    /// What raw tracepoint `event` passes, in order: the parameters of the
    /// kernel's `btf_trace_<event>` type past its first (the context).
    pub fn tracepoint_arguments(&self, event: &str) -> Option<Vec<Shape>> {
        let typedef = self.named(&format!("btf_trace_{event}"), KIND_TYPEDEF)?;
        let pointer = self.resolve(typedef.size_or_type)?;
        let proto = self.types.get(pointer.size_or_type as usize)?;
        if pointer.kind != KIND_PTR || proto.kind != KIND_FUNC_PROTO {
            return None;
        }
        Some(
            proto
                .members
                .iter()
                .skip(1)
                .map(|&(_, ty, _)| self.shape(ty))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A BTF blob of `types` (each its three words and its extra words)
    /// and `strings`.
    fn blob(types: &[Vec<u32>], strings: &[u8]) -> Vec<u8> {
        let type_bytes: Vec<u8> = types
            .iter()
            .flatten()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        let mut out = Vec::new();
        out.extend(MAGIC.to_le_bytes());
        out.extend([1u8, 0]);
        for word in [
            24,
            0,
            type_bytes.len() as u32,
            type_bytes.len() as u32,
            strings.len() as u32,
        ] {
            out.extend(word.to_le_bytes());
        }
        out.extend(type_bytes);
        out.extend(strings);
        out
    }

    fn info(kind: u32, vlen: u32) -> u32 {
        (kind << 24) | vlen
    }

    /// `struct net_device { int ifindex; struct net *net; }` at bytes 0
    /// and 8, a bitfield after them, and
    /// `btf_trace_xdp_devmap_xmit(void *, const struct net_device *, int)`.
    fn kernel() -> Btf {
        let strings =
            b"\0int\0net_device\0ifindex\0net\0flag\0btf_trace_xdp_devmap_xmit\0possible_net_t\0";
        let name = |s: &str| {
            let at = strings
                .windows(s.len() + 2)
                .position(|w| w[0] == 0 && &w[1..=s.len()] == s.as_bytes() && w[s.len() + 1] == 0)
                .expect("string");
            at as u32 + 1
        };
        let types = [
            // 1: int
            vec![name("int"), info(KIND_INT, 0), 4, 32],
            // 2: struct net_device
            vec![
                name("net_device"),
                info(KIND_STRUCT, 3) | 1 << 31,
                24,
                name("ifindex"),
                1,
                0,
                name("net"),
                3,
                64,
                name("flag"),
                1,
                (1 << 24) | 129,
            ],
            // 3: void *
            vec![0, info(KIND_PTR, 0), 0],
            // 4: const struct net_device
            vec![0, info(KIND_CONST, 0), 2],
            // 5: const struct net_device *
            vec![0, info(KIND_PTR, 0), 4],
            // 6: void (*)(void *, const struct net_device *, int)
            vec![0, info(KIND_FUNC_PROTO, 3), 0, 0, 3, 0, 5, 0, 1],
            // 7: the pointer to it
            vec![0, info(KIND_PTR, 0), 6],
            // 8: typedef btf_trace_xdp_devmap_xmit
            vec![name("btf_trace_xdp_devmap_xmit"), info(KIND_TYPEDEF, 0), 7],
            // 9: struct { void *net; } at byte 0
            vec![0, info(KIND_STRUCT, 1), 8, name("net"), 3, 0],
            // 10: typedef possible_net_t
            vec![name("possible_net_t"), info(KIND_TYPEDEF, 0), 9],
        ];
        Btf::parse(&blob(&types, strings)).expect("parses")
    }

    #[test]
    fn finds_member_offsets_in_bytes() {
        let btf = kernel();
        assert_eq!(btf.member_offset("net_device", "ifindex"), Some(0));
        assert_eq!(btf.member_offset("net_device", "net"), Some(8));
        // Bit 129 is no byte's start.
        assert_eq!(btf.member_offset("net_device", "flag"), None);
        assert_eq!(btf.member_offset("net_device", "nd_net"), None);
        assert_eq!(btf.member_offset("net", "net_cookie"), None);
        assert_eq!(btf.member_offset("possible_net_t", "net"), Some(0));
    }

    #[test]
    fn reads_a_raw_tracepoints_arguments_past_the_context() {
        assert_eq!(
            kernel().tracepoint_arguments("xdp_devmap_xmit"),
            Some(vec![
                Shape::StructPointer("net_device".into()),
                Shape::Integer(4)
            ])
        );
        assert_eq!(kernel().tracepoint_arguments("xdp_redirect_err"), None);
    }

    #[test]
    fn refuses_what_is_not_btf() {
        assert_eq!(Btf::parse(b"\x7fELF").err(), Some(BtfError::Header));
        // Two members announced, one word given.
        let cut = blob(&[vec![0, info(KIND_STRUCT, 2), 8, 0]], b"\0");
        assert!(matches!(Btf::parse(&cut), Err(BtfError::Truncated(_))));
    }

    /// The running kernel's own, as the daemon reads it.
    #[test]
    fn reads_the_running_kernels_types() {
        let data = std::fs::read(VMLINUX).expect("kernel BTF");
        let btf = Btf::parse(&data).expect("parses");
        assert!(btf.member_offset("net_device", "ifindex").is_some());
        assert!(btf.member_offset("net", "net_cookie").is_some());
        assert!(btf.member_offset("possible_net_t", "net").is_some());
    }
}
