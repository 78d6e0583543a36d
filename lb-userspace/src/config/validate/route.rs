//! The `[[route]]` tables.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use lb_common::limits::MAX_ROUTES;
use toml::Spanned;

use crate::config::diagnostics::{ConfigError, Ctx};
use crate::config::raw::RawRoute;
use crate::config::schema::{Group, Prefix, Route};

impl Ctx<'_> {
    pub(super) fn routes(
        &self,
        raw: Vec<Spanned<RawRoute>>,
        groups: &[Group],
    ) -> Result<Vec<Route>, ConfigError> {
        self.table_count(&raw, "route", MAX_ROUTES)?;
        // Group names are unique, so the first match is the only one.
        let by_name: Vec<(&str, usize)> = groups
            .iter()
            .enumerate()
            .map(|(i, g)| (g.name.as_str(), i))
            .collect();
        let mut seen = HashMap::new();
        let mut routes = Vec::with_capacity(raw.len());
        for route in raw {
            let route = route.into_inner();
            let prefix = self.prefix(&route.prefix)?;
            self.unique(
                &mut seen,
                prefix,
                route.prefix.span(),
                format_args!("prefix {prefix}"),
            )?;
            let group = self.lookup(&route.group, &by_name, "unknown group", "defined groups")?;
            routes.push(Route { prefix, group });
        }
        Ok(routes)
    }

    fn prefix(&self, text: &Spanned<String>) -> Result<Prefix, ConfigError> {
        let s = text.get_ref().as_str();
        let invalid = |why: String| self.error(text.span(), format!("invalid prefix {s:?}: {why}"));
        let Some((addr, len)) = s.split_once('/') else {
            return Err(invalid(
                "expected address/length, e.g. \"10.1.0.0/16\" or \"2001:db8::/32\"".into(),
            ));
        };
        let Ok(addr) = addr.parse::<IpAddr>() else {
            return Err(invalid(format!("{addr:?} is not an IPv4 or IPv6 address")));
        };
        let (family, max) = match addr {
            IpAddr::V4(_) => ("IPv4", 32),
            IpAddr::V6(_) => ("IPv6", 128),
        };
        let parsed = if len.is_empty() || !len.bytes().all(|b| b.is_ascii_digit()) {
            None
        } else {
            // Saturates on absurd lengths so they report as out of range.
            Some(len.parse::<u32>().unwrap_or(u32::MAX))
        };
        let Some(len) = parsed else {
            return Err(invalid(format!("length {len:?} is not a number")));
        };
        let Some(len) = u8::try_from(len).ok().filter(|&l| l <= max) else {
            return Err(invalid(format!(
                "length {len} is out of range for {family} (0..={max})"
            )));
        };
        let masked = Prefix {
            addr: mask(addr, len),
            len,
        };
        if masked.addr != addr {
            return Err(self.error(
                text.span(),
                format!("prefix {s:?} has host bits set; did you mean \"{masked}\"?"),
            ));
        }
        Ok(masked)
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
