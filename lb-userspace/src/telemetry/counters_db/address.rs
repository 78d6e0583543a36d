//! Where the switch's Redis listens. Two forms only, the two SONiC uses:
//! the local unix socket (`unix:/var/run/redis/redis.sock`) and TCP
//! (`redis://127.0.0.1:6379`). The database is not part of the address:
//! syncd writes its counters to COUNTERS_DB, which is database 2 on every
//! SONiC image (CONFIG_DB 4 and APPL_DB 0, which `run --sonic` reads), so
//! letting config pick another would only allow mistakes.

use std::fmt;
use std::net::Ipv6Addr;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// Redis's well-known port, used when a `redis://` address names none.
const DEFAULT_PORT: u16 = 6379;

/// Where the switch's Redis listens; parsed from config with
/// [`FromStr`], shown in logs with [`Display`](fmt::Display).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Address(Kind);

#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    Unix(PathBuf),
    Tcp { host: String, port: u16 },
}

/// Where to connect, borrowed from an [`Address`].
#[derive(Clone, Copy, Debug)]
pub(super) enum Target<'a> {
    Unix(&'a Path),
    Tcp(&'a str, u16),
}

impl Address {
    /// Where the redis crate's own connections go (`run --sonic`'s, which
    /// need no deadline per poll).
    pub fn connection_addr(&self) -> redis::ConnectionAddr {
        match &self.0 {
            Kind::Unix(path) => redis::ConnectionAddr::Unix(path.clone()),
            Kind::Tcp { host, port } => redis::ConnectionAddr::Tcp(host.clone(), *port),
        }
    }

    pub(super) fn target(&self) -> Target<'_> {
        match &self.0 {
            Kind::Unix(path) => Target::Unix(path),
            Kind::Tcp { host, port } => Target::Tcp(host, *port),
        }
    }
}

impl FromStr for Address {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if let Some(path) = s.strip_prefix("unix:") {
            return parse_unix(path).map(Address);
        }
        if let Some(authority) = s.strip_prefix("redis://") {
            return parse_tcp(authority).map(Address);
        }
        Err(format!(
            "expected `unix:/path/to/redis.sock` or `redis://host:port`, got `{s}`"
        ))
    }
}

fn parse_unix(path: &str) -> Result<Kind, String> {
    if path.is_empty() {
        return Err("`unix:` needs a socket path, e.g. `unix:/var/run/redis/redis.sock`".into());
    }
    // A relative path would resolve against whatever directory the daemon
    // happened to start in; a switch's socket has one fixed place.
    if !path.starts_with('/') {
        return Err(format!(
            "unix socket path `{path}` must be absolute, e.g. `unix:/var/run/redis/redis.sock`"
        ));
    }
    Ok(Kind::Unix(PathBuf::from(path)))
}

fn parse_tcp(authority: &str) -> Result<Kind, String> {
    if authority.contains('/') || authority.contains('?') || authority.contains('#') {
        return Err(format!(
            "`redis://{authority}`: give only host:port; the database is fixed by SONiC \
             (COUNTERS_DB 2, CONFIG_DB 4, APPL_DB 0)"
        ));
    }
    // SONiC's Redis takes no credentials on its local interfaces; a
    // password in a config file would also end up in logs via Display.
    if authority.contains('@') {
        return Err(format!(
            "`redis://{authority}`: credentials are not supported, give only host:port"
        ));
    }
    let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
        // IPv6 literal: `[::1]:6379` or `[::1]`.
        let (host, rest) = bracketed
            .split_once(']')
            .ok_or_else(|| format!("`redis://{authority}`: missing `]` after the IPv6 address"))?;
        host.parse::<Ipv6Addr>()
            .map_err(|_| format!("`redis://{authority}`: `{host}` is not an IPv6 address"))?;
        let port = match rest {
            "" => None,
            _ => Some(rest.strip_prefix(':').ok_or_else(|| {
                format!("`redis://{authority}`: expected `:port` after `]`, got `{rest}`")
            })?),
        };
        (host, port)
    } else if authority.matches(':').count() > 1 {
        return Err(format!(
            "`redis://{authority}`: write an IPv6 address in brackets, e.g. `redis://[::1]:6379`"
        ));
    } else {
        match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err(format!("`redis://{authority}`: missing host"));
    }
    if host.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "`redis://{authority}`: host `{host}` has whitespace"
        ));
    }
    let port = match port {
        None => DEFAULT_PORT,
        Some(port) => match port.parse::<u16>() {
            Ok(0) | Err(_) => {
                return Err(format!(
                    "`redis://{authority}`: port `{port}` is not a number in 1..=65535"
                ));
            }
            Ok(port) => port,
        },
    };
    Ok(Kind::Tcp {
        host: host.to_string(),
        port,
    })
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Kind::Unix(path) => write!(f, "unix:{}", path.display()),
            // Brackets again around an IPv6 literal, so what is shown parses back.
            Kind::Tcp { host, port } if host.contains(':') => write!(f, "redis://[{host}]:{port}"),
            Kind::Tcp { host, port } => write!(f, "redis://{host}:{port}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Address, String> {
        s.parse()
    }

    #[test]
    fn unix_socket() {
        let a = parse("unix:/var/run/redis/redis.sock").expect("valid");
        assert_eq!(a, Address(Kind::Unix("/var/run/redis/redis.sock".into())));
        assert_eq!(a.to_string(), "unix:/var/run/redis/redis.sock");
    }

    #[test]
    fn tcp_with_and_without_port() {
        assert_eq!(
            parse("redis://127.0.0.1:6380"),
            Ok(Address(Kind::Tcp {
                host: "127.0.0.1".into(),
                port: 6380
            }))
        );
        let a = parse("redis://localhost").expect("valid");
        assert_eq!(a.to_string(), "redis://localhost:6379");
    }

    #[test]
    fn ipv6_in_brackets_round_trips() {
        let a = parse("redis://[::1]:6379").expect("valid");
        assert_eq!(
            a,
            Address(Kind::Tcp {
                host: "::1".into(),
                port: 6379
            })
        );
        assert_eq!(a.to_string(), "redis://[::1]:6379");
        assert_eq!(parse(&a.to_string()), Ok(a));
        assert_eq!(
            parse("redis://[fe80::1]").map(|a| a.to_string()),
            Ok("redis://[fe80::1]:6379".into())
        );
    }

    #[test]
    fn display_parses_back() {
        for s in [
            "unix:/tmp/r.sock",
            "redis://10.0.0.1:1",
            "redis://switch-1:65535",
        ] {
            let a = parse(s).expect("valid");
            assert_eq!(a.to_string(), s);
            assert_eq!(parse(&a.to_string()), Ok(a));
        }
    }

    #[test]
    fn rejects_with_a_reason() {
        let cases = [
            ("", "expected `unix:"),
            ("/var/run/redis/redis.sock", "expected `unix:"),
            ("tcp://127.0.0.1:6379", "expected `unix:"),
            ("rediss://127.0.0.1:6379", "expected `unix:"),
            ("unix:", "needs a socket path"),
            ("unix:redis.sock", "must be absolute"),
            ("redis://", "missing host"),
            ("redis://:6379", "missing host"),
            ("redis://127.0.0.1:6379/2", "database is fixed"),
            ("redis://127.0.0.1:6379/", "database is fixed"),
            ("redis://user:pw@127.0.0.1:6379", "credentials"),
            ("redis://127.0.0.1:0", "not a number in 1..=65535"),
            ("redis://127.0.0.1:65536", "not a number in 1..=65535"),
            ("redis://127.0.0.1:port", "not a number in 1..=65535"),
            ("redis://127.0.0.1:", "not a number in 1..=65535"),
            ("redis://::1:6379", "in brackets"),
            ("redis://::1", "in brackets"),
            ("redis://[::1", "missing `]`"),
            ("redis://[nope]:6379", "not an IPv6 address"),
            ("redis://[::1]6379", "expected `:port`"),
            ("redis://my host:6379", "whitespace"),
        ];
        for (input, reason) in cases {
            match parse(input) {
                Ok(a) => panic!("`{input}` parsed as {a}"),
                Err(why) => assert!(why.contains(reason), "`{input}`: `{why}` lacks `{reason}`"),
            }
        }
    }
}
