//! IPv4 and IPv6 prefixes as the config and SONiC's rows write them, read
//! by one parser so that both refuse a bad one with the same words.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// An IPv4 or IPv6 CIDR prefix with no host bits set and a length within
/// its family's bounds (0..=32 or 0..=128).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Prefix {
    pub addr: IpAddr,
    pub len: u8,
}

/// Why a text is not a [`Prefix`]; each says the text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PrefixError {
    #[error(
        "invalid prefix {0:?}: expected address/length, e.g. \"10.1.0.0/16\" or \"2001:db8::/32\""
    )]
    NoLength(String),
    #[error("invalid prefix {text:?}: {addr:?} is not an IPv4 or IPv6 address")]
    NotAnAddress { text: String, addr: String },
    #[error("invalid prefix {text:?}: length {len:?} is not a number")]
    LengthNotANumber { text: String, len: String },
    #[error("invalid prefix {text:?}: length {len} is out of range for {family} (0..={max})")]
    LengthOutOfRange {
        text: String,
        len: u32,
        family: &'static str,
        max: u8,
    },
    #[error("prefix {text:?} has host bits set; did you mean \"{masked}\"?")]
    HostBits { text: String, masked: Prefix },
}

impl Prefix {
    /// `address/length`, as the config writes every prefix.
    pub fn parse(text: &str) -> Result<Self, PrefixError> {
        let Some((addr, len)) = text.split_once('/') else {
            return Err(PrefixError::NoLength(text.into()));
        };
        Self::parse_parts(text, addr, Some(len))
    }

    /// `address/length`, or a bare address for its host route, as SONiC's
    /// `ROUTE_TABLE` keys write them.
    pub fn parse_or_host(text: &str) -> Result<Self, PrefixError> {
        match text.split_once('/') {
            Some((addr, len)) => Self::parse_parts(text, addr, Some(len)),
            None => Self::parse_parts(text, text, None),
        }
    }

    fn parse_parts(text: &str, addr: &str, len: Option<&str>) -> Result<Self, PrefixError> {
        let Ok(addr) = addr.parse::<IpAddr>() else {
            return Err(PrefixError::NotAnAddress {
                text: text.into(),
                addr: addr.into(),
            });
        };
        let (family, max) = match addr {
            IpAddr::V4(_) => ("IPv4", 32),
            IpAddr::V6(_) => ("IPv6", 128),
        };
        let len = match len {
            None => max,
            Some(len) if len.is_empty() || !len.bytes().all(|b| b.is_ascii_digit()) => {
                return Err(PrefixError::LengthNotANumber {
                    text: text.into(),
                    len: len.into(),
                });
            }
            // Saturates on absurd lengths so they report as out of range.
            Some(len) => {
                let len = len.parse::<u32>().unwrap_or(u32::MAX);
                u8::try_from(len).ok().filter(|&l| l <= max).ok_or(
                    PrefixError::LengthOutOfRange {
                        text: text.into(),
                        len,
                        family,
                        max,
                    },
                )?
            }
        };
        let masked = Prefix {
            addr: mask(addr, len),
            len,
        };
        if masked.addr != addr {
            return Err(PrefixError::HostBits {
                text: text.into(),
                masked,
            });
        }
        Ok(masked)
    }

    /// Whether every address of `other` is in this prefix.
    pub fn covers(&self, other: Prefix) -> bool {
        let bits = |a: IpAddr| match a {
            IpAddr::V4(a) => (u128::from(u32::from(a)) << 96, 32),
            IpAddr::V6(a) => (u128::from(a), 128),
        };
        let ((mine, max), (theirs, other_max)) = (bits(self.addr), bits(other.addr));
        if max != other_max || self.len > other.len {
            return false;
        }
        let mask = u128::MAX
            .checked_shl(128 - u32::from(self.len))
            .unwrap_or(0);
        (mine ^ theirs) & mask == 0
    }
}

impl fmt::Display for Prefix {
    /// `10.1.0.0/16`, `2001:db8::/32`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// `addr` with everything past the first `len` bits cleared.
fn mask(addr: IpAddr, len: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let m = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(a) & m))
        }
        IpAddr::V6(a) => {
            let m = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(a) & m))
        }
    }
}
