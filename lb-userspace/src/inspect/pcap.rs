//! The classic pcap format (what `tcpdump -w` writes), Ethernet captures
//! only: a 24-byte file header whose magic gives the byte order, then
//! records of a 16-byte header and the captured bytes. Small enough to
//! read by hand; pcapng is refused with a pointer to `editcap -F pcap`.

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum PcapError {
    #[error("not a pcap file (magic {0:#010x})")]
    Magic(u32),
    #[error("a pcapng file; convert it with `editcap -F pcap IN OUT`")]
    Pcapng,
    #[error("link type {0}, not Ethernet (1)")]
    LinkType(u32),
    #[error("cut short inside {0}")]
    Truncated(&'static str),
}

const LINKTYPE_ETHERNET: u32 = 1;
const PCAPNG_MAGIC: u32 = 0x0a0d_0d0a;

/// One captured frame and when it was captured, ns since the epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub at_ns: u64,
    pub frame: Vec<u8>,
}

/// The frames of a pcap file, in order.
pub fn frames(file: &[u8]) -> Result<Vec<Vec<u8>>, PcapError> {
    Ok(records(file)?.into_iter().map(|r| r.frame).collect())
}

/// The records of a pcap file, in order.
pub fn records(file: &[u8]) -> Result<Vec<Record>, PcapError> {
    let header = file
        .get(..24)
        .ok_or(PcapError::Truncated("the file header"))?;
    let magic = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
    // Microsecond and nanosecond timestamps, written either way round.
    let (little, fraction_ns) = match magic {
        0xa1b2_c3d4 => (true, 1_000),
        0xa1b2_3c4d => (true, 1),
        0xd4c3_b2a1 => (false, 1_000),
        0x4d3c_b2a1 => (false, 1),
        PCAPNG_MAGIC => return Err(PcapError::Pcapng),
        other => return Err(PcapError::Magic(other)),
    };
    let word = |b: &[u8]| {
        let b = [b[0], b[1], b[2], b[3]];
        if little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        }
    };
    // The upper bits of the link-type field carry FCS flags.
    let link_type = word(&header[20..24]) & 0x0fff_ffff;
    if link_type != LINKTYPE_ETHERNET {
        return Err(PcapError::LinkType(link_type));
    }
    let mut records = Vec::new();
    let mut rest = &file[24..];
    while !rest.is_empty() {
        let record = rest
            .get(..16)
            .ok_or(PcapError::Truncated("a record header"))?;
        let captured = word(&record[8..12]) as usize;
        let data = rest
            .get(16..16 + captured)
            .ok_or(PcapError::Truncated("a record"))?;
        records.push(Record {
            at_ns: u64::from(word(&record[..4])) * 1_000_000_000
                + u64::from(word(&record[4..8])) * fraction_ns,
            frame: data.to_vec(),
        });
        rest = &rest[16 + captured..];
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A capture of `frames` as `tcpdump -w` writes it, in either byte order.
    fn write(frames: &[&[u8]], little: bool) -> Vec<u8> {
        let word = |w: u32| {
            if little {
                w.to_le_bytes()
            } else {
                w.to_be_bytes()
            }
        };
        let half = |h: u16| {
            if little {
                h.to_le_bytes()
            } else {
                h.to_be_bytes()
            }
        };
        let mut out = Vec::new();
        out.extend(word(0xa1b2_c3d4));
        out.extend(half(2));
        out.extend(half(4));
        out.extend(word(0));
        out.extend(word(0));
        out.extend(word(65535));
        out.extend(word(LINKTYPE_ETHERNET));
        for (i, frame) in frames.iter().enumerate() {
            out.extend(word(1_700_000_000 + i as u32));
            out.extend(word(250));
            out.extend(word(frame.len() as u32));
            out.extend(word(frame.len() as u32 + 10));
            out.extend_from_slice(frame);
        }
        out
    }

    #[test]
    fn reads_frames_in_both_byte_orders() {
        let frames: [&[u8]; 3] = [&[1, 2, 3], &[], &[9; 70]];
        for little in [true, false] {
            let read = super::frames(&write(&frames, little)).unwrap();
            assert_eq!(read, frames.map(<[u8]>::to_vec), "little-endian {little}");
            let times: Vec<u64> = (records(&write(&frames, little)).unwrap().iter())
                .map(|r| r.at_ns)
                .collect();
            let second = 1_700_000_000_000_000_000;
            assert_eq!(
                times,
                [0, 1, 2].map(|i| second + i * 1_000_000_000 + 250_000)
            );
        }
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        let mut pcap = write(&[&[1, 2, 3]], true);
        assert_eq!(
            frames(&pcap[..pcap.len() - 1]).unwrap_err().to_string(),
            "cut short inside a record"
        );
        assert_eq!(
            frames(&pcap[..30]).unwrap_err().to_string(),
            "cut short inside a record header"
        );
        assert_eq!(
            frames(&pcap[..10]).unwrap_err().to_string(),
            "cut short inside the file header"
        );
        pcap[20] = 113;
        assert_eq!(
            frames(&pcap).unwrap_err().to_string(),
            "link type 113, not Ethernet (1)"
        );
        pcap[..4].copy_from_slice(&PCAPNG_MAGIC.to_le_bytes());
        assert_eq!(
            frames(&pcap).unwrap_err().to_string(),
            "a pcapng file; convert it with `editcap -F pcap IN OUT`"
        );
        pcap[..4].copy_from_slice(b"GET ");
        assert_eq!(
            frames(&pcap).unwrap_err().to_string(),
            "not a pcap file (magic 0x20544547)"
        );
    }
}
