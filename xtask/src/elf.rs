//! The little of ELF the package's checks read: which machine a binary is
//! for, and whether it needs a dynamic loader or shared libraries at all
//! (the switch's binary must need neither, so that it runs on any
//! distribution's libc, or none).

use std::fs;
use std::path::Path;

use anyhow::{Context, Result, bail, ensure};

pub const EM_X86_64: u16 = 62;
pub const EM_AARCH64: u16 = 183;
const PT_DYNAMIC: u32 = 2;
const PT_INTERP: u32 = 3;
const DT_NEEDED: u64 = 1;

/// How a binary is linked.
#[derive(Debug, PartialEq, Eq)]
pub struct Linking {
    pub machine: u16,
    /// It names a dynamic loader (`PT_INTERP`).
    pub interpreter: bool,
    /// The shared libraries it names (`DT_NEEDED`).
    pub needed: usize,
}

impl Linking {
    /// Says, or refuses, that it runs without a loader or a library.
    pub fn ensure_static(&self, what: &str, machine: u16) -> Result<()> {
        ensure!(
            self.machine == machine,
            "{what} is for ELF machine {}, not {machine}",
            self.machine
        );
        ensure!(
            !self.interpreter && self.needed == 0,
            "{what} is not static: {self:?}"
        );
        Ok(())
    }
}

/// Refuses `binary` unless it is for `machine` and needs no loader or
/// library.
pub fn ensure_static(binary: &Path, machine: u16) -> Result<()> {
    let bytes = fs::read(binary).with_context(|| format!("reading {}", binary.display()))?;
    linking(&bytes)?.ensure_static(&binary.display().to_string(), machine)
}

/// Reads a 64-bit little-endian ELF file's program headers.
pub fn linking(bytes: &[u8]) -> Result<Linking> {
    ensure!(
        bytes.len() >= 64 && bytes.starts_with(b"\x7fELF"),
        "not an ELF file"
    );
    ensure!(
        bytes[4] == 2 && bytes[5] == 1,
        "not a 64-bit little-endian ELF file"
    );
    let u16_at = |at: usize| -> Result<u16> { Ok(u16::from_le_bytes(slice(bytes, at)?)) };
    let u32_at = |at: usize| -> Result<u32> { Ok(u32::from_le_bytes(slice(bytes, at)?)) };
    let u64_at = |at: usize| -> Result<u64> { Ok(u64::from_le_bytes(slice(bytes, at)?)) };
    let machine = u16_at(18)?;
    let (phoff, phentsize, phnum) = (u64_at(32)? as usize, u16_at(54)? as usize, u16_at(56)?);
    let mut linking = Linking {
        machine,
        interpreter: false,
        needed: 0,
    };
    for header in (0..usize::from(phnum)).map(|i| phoff + i * phentsize) {
        match u32_at(header)? {
            PT_INTERP => linking.interpreter = true,
            PT_DYNAMIC => {
                let (offset, size) = (u64_at(header + 8)? as usize, u64_at(header + 32)? as usize);
                for entry in (offset..offset + size).step_by(16) {
                    match u64_at(entry)? {
                        0 => break,
                        DT_NEEDED => linking.needed += 1,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    Ok(linking)
}

fn slice<const N: usize>(bytes: &[u8], at: usize) -> Result<[u8; N]> {
    match bytes.get(at..at + N) {
        Some(s) => Ok(s.try_into()?),
        None => bail!("ELF file cut short at byte {at}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ELF header with `headers` program headers (type, offset, size)
    /// and the dynamic entries `dynamic` at offset 0x100.
    fn elf(machine: u16, headers: &[(u32, u64, u64)], dynamic: &[u64]) -> Vec<u8> {
        let mut bytes = vec![0; 0x200];
        bytes[..6].copy_from_slice(b"\x7fELF\x02\x01");
        bytes[18..20].copy_from_slice(&machine.to_le_bytes());
        bytes[32..40].copy_from_slice(&64u64.to_le_bytes());
        bytes[54..56].copy_from_slice(&56u16.to_le_bytes());
        bytes[56..58].copy_from_slice(&(headers.len() as u16).to_le_bytes());
        for (i, &(kind, offset, size)) in headers.iter().enumerate() {
            let at = 64 + i * 56;
            bytes[at..at + 4].copy_from_slice(&kind.to_le_bytes());
            bytes[at + 8..at + 16].copy_from_slice(&offset.to_le_bytes());
            bytes[at + 32..at + 40].copy_from_slice(&size.to_le_bytes());
        }
        for (i, tag) in dynamic.iter().enumerate() {
            let at = 0x100 + i * 16;
            bytes[at..at + 8].copy_from_slice(&tag.to_le_bytes());
        }
        bytes
    }

    #[test]
    fn a_static_pie_has_a_dynamic_section_but_no_loader_and_no_library() {
        let static_pie = elf(EM_X86_64, &[(PT_DYNAMIC, 0x100, 0x40)], &[0x6ffffffb, 0]);
        let found = linking(&static_pie).unwrap();
        assert!(found.ensure_static("it", EM_X86_64).is_ok(), "{found:?}");
        assert!(found.ensure_static("it", EM_AARCH64).is_err());

        let dynamic = elf(
            EM_X86_64,
            &[(PT_INTERP, 0, 0), (PT_DYNAMIC, 0x100, 0x40)],
            &[DT_NEEDED, DT_NEEDED, 0],
        );
        assert_eq!(
            linking(&dynamic).unwrap(),
            Linking {
                machine: EM_X86_64,
                interpreter: true,
                needed: 2
            }
        );
        assert!(linking(b"#!/bin/sh\n").is_err());
    }
}
