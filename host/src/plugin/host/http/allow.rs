//! One entry of `grants.http` (or of a tenant's `http`): a host name, an IP
//! address or a range of them, each with a port or for every port.
//!
//! A *name* entry lets a plugin send requests to that name; an *address*
//! entry lets it send requests to those addresses, and lets a granted name
//! reach them when it resolves there (see the module above for the rule).

use std::net::IpAddr;

use super::address::canonical;

/// One allow-listed HTTP destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HttpAllow {
    target: Target,
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    /// A host name, lower case, without a trailing dot.
    Name(String),
    /// An address (`/32`, `/128`) or a range of them.
    Net(IpNet),
}

/// `addr/prefix`, with `addr` canonical (an IPv4 address carried in IPv6 is
/// written as IPv4) and no bits set past the prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct IpNet {
    addr: IpAddr,
    prefix: u8,
}

impl IpNet {
    fn contains(self, ip: IpAddr) -> bool {
        match (self.addr, canonical(ip)) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                masked(u128::from(u32::from(ip)), self.prefix, 32) == u128::from(u32::from(net))
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                masked(u128::from(ip), self.prefix, 128) == u128::from(net)
            }
            _ => false,
        }
    }

    /// Every address of `other` is in `self`.
    fn covers(self, other: IpNet) -> bool {
        self.prefix <= other.prefix && self.contains(other.addr)
    }
}

/// `bits` (an address `width` bits wide) with everything past `prefix` cleared.
fn masked(bits: u128, prefix: u8, width: u8) -> u128 {
    let host_bits = u32::from(width - prefix.min(width));
    if host_bits >= 128 {
        0
    } else {
        bits >> host_bits << host_bits
    }
}

/// `localhost` (RFC 6761): never looked up, it is this machine's loopback.
pub(crate) fn is_localhost(name: &str) -> bool {
    name == "localhost"
}

/// A host as a request names it, or as an entry grants it: an address
/// (canonical), or a name in lower case without a trailing dot. IPv6
/// addresses may be written in brackets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Host {
    Name(String),
    Address(IpAddr),
}

impl Host {
    pub(crate) fn parse(host: &str) -> Self {
        let host = host.trim_end_matches('.');
        let bare = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        match bare.parse::<IpAddr>() {
            Ok(ip) => Host::Address(canonical(ip)),
            Err(_) => Host::Name(host.to_ascii_lowercase()),
        }
    }
}

impl HttpAllow {
    /// Parse `host`, `host:port`, `address`, `address:port` (IPv6 in
    /// brackets when it has a port: `[::1]:8080`), or a range `10.0.0.0/8`,
    /// `10.0.0.0/8:9200`, `fd00::/8`, `[fd00::/8]:9200`.
    pub(crate) fn parse(entry: &str) -> Result<Self, HttpAllowError> {
        let entry = entry.trim();
        if let Some((_, rest)) = entry.split_once("://") {
            return Err(HttpAllowError::Url {
                entry: entry.to_owned(),
                authority: rest.split('/').next().unwrap_or(rest).to_owned(),
            });
        }
        let (host, port, bracketed) = split_port(entry)?;
        let target = match host.split_once('/') {
            Some((addr, prefix)) => Target::Net(parse_net(entry, addr, prefix)?),
            None => match Host::parse(host) {
                Host::Address(addr) => Target::Net(IpNet {
                    addr,
                    prefix: if addr.is_ipv4() { 32 } else { 128 },
                }),
                Host::Name(name) if is_host_name(&name) && !bracketed => Target::Name(name),
                Host::Name(_) => {
                    return Err(HttpAllowError::Host {
                        entry: entry.to_owned(),
                    });
                }
            },
        };
        Ok(Self { target, port })
    }

    /// Whether a request may name `name` (lower case, no trailing dot) on
    /// `port`. Where the name leads is checked apart.
    pub(crate) fn grants_name(&self, name: &str, port: u16) -> bool {
        matches!(&self.target, Target::Name(n) if n == name) && self.grants_port(port)
    }

    /// Whether this entry grants reaching `ip` on `port`: a request naming
    /// `ip`, or a granted name that resolves to it.
    pub(crate) fn grants_address(&self, ip: IpAddr, port: u16) -> bool {
        matches!(self.target, Target::Net(net) if net.contains(ip)) && self.grants_port(port)
    }

    /// Whether everything `other` grants, this entry grants too: how a
    /// tenant's `http` bounds its plugins' `grants.http`.
    pub(crate) fn covers(&self, other: &HttpAllow) -> bool {
        let target = match (&self.target, &other.target) {
            (Target::Name(a), Target::Name(b)) => a == b,
            (Target::Net(a), Target::Net(b)) => a.covers(*b),
            _ => false,
        };
        target && self.port.is_none_or(|p| other.port == Some(p))
    }

    fn grants_port(&self, port: u16) -> bool {
        self.port.is_none_or(|p| p == port)
    }
}

/// `entry` as the host part, its port if it has one, and whether the host
/// was in brackets (which only an IPv6 address or range may be).
fn split_port(entry: &str) -> Result<(&str, Option<u16>, bool), HttpAllowError> {
    let port_of = |port: &str| {
        port.parse().map_err(|_| HttpAllowError::Port {
            entry: entry.to_owned(),
            port: port.to_owned(),
        })
    };
    if let Some(rest) = entry.strip_prefix('[') {
        let Some((host, after)) = rest.split_once(']') else {
            return Err(HttpAllowError::Host {
                entry: entry.to_owned(),
            });
        };
        return match after.strip_prefix(':') {
            Some(port) => Ok((host, Some(port_of(port)?), true)),
            None if after.is_empty() => Ok((host, None, true)),
            None => Err(HttpAllowError::Host {
                entry: entry.to_owned(),
            }),
        };
    }
    match entry.rsplit_once(':') {
        // More than one colon: an IPv6 address (or range) without a port.
        Some((host, _)) if host.contains(':') => Ok((entry, None, false)),
        Some((host, port)) => Ok((host, Some(port_of(port)?), false)),
        None => Ok((entry, None, false)),
    }
}

/// `addr/prefix` of `entry` as a range.
fn parse_net(entry: &str, addr: &str, prefix: &str) -> Result<IpNet, HttpAllowError> {
    let invalid = || HttpAllowError::Range {
        entry: entry.to_owned(),
    };
    let addr: IpAddr = addr.parse().map_err(|_| invalid())?;
    let width = if addr.is_ipv4() { 32 } else { 128 };
    let prefix: u8 = prefix
        .parse()
        .ok()
        .filter(|p| *p <= width)
        .ok_or_else(invalid)?;
    let bits = match addr {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    };
    if masked(bits, prefix, width) != bits {
        return Err(HttpAllowError::HostBits {
            entry: entry.to_owned(),
        });
    }
    // A range of IPv4 addresses written in IPv6 (`::ffff:10.0.0.0/104`) is
    // that IPv4 range, as addresses are compared.
    Ok(match (addr, canonical(addr)) {
        (IpAddr::V6(_), v4 @ IpAddr::V4(_)) if prefix >= 96 => IpNet {
            addr: v4,
            prefix: prefix - 96,
        },
        _ => IpNet { addr, prefix },
    })
}

/// Letters, digits, `-`, `_` and dots: what a host name in a URL may hold.
fn is_host_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Why an entry of `grants.http` is not a destination.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum HttpAllowError {
    #[error("`{entry}` is a URL: write only its host and port, `{authority}`")]
    Url { entry: String, authority: String },
    #[error("`{entry}`: `{port}` is not a port number")]
    Port { entry: String, port: String },
    #[error(
        "`{entry}` is not a host name or an address (write `host`, `host:port`, `10.0.0.5:9200` or `[::1]:9200`)"
    )]
    Host { entry: String },
    #[error(
        "`{entry}` is not an address range (write `10.0.0.0/8`, `10.0.0.0/8:9200` or `[fd00::/8]:9200`)"
    )]
    Range { entry: String },
    #[error(
        "`{entry}`: the address has bits set past the prefix (write the range's first address)"
    )]
    HostBits { entry: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(text: &str) -> HttpAllow {
        HttpAllow::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an address")
    }

    #[test]
    fn names_with_and_without_a_port() {
        let any_port = entry("Search.Local");
        assert!(any_port.grants_name("search.local", 9200));
        assert!(!any_port.grants_name("other.local", 9200));
        assert!(
            !any_port.grants_address(ip("10.0.0.5"), 9200),
            "a name is no address"
        );
        let one_port = entry("search.local:9200");
        assert!(one_port.grants_name("search.local", 9200));
        assert!(!one_port.grants_name("search.local", 9201));
        let dotted = entry("search.local.");
        assert!(dotted.grants_name("search.local", 80));
    }

    #[test]
    fn addresses_grant_themselves_and_nothing_else() {
        let v4 = entry("127.0.0.1:9200");
        assert!(v4.grants_address(ip("127.0.0.1"), 9200));
        assert!(v4.grants_address(ip("::ffff:127.0.0.1"), 9200), "mapped");
        assert!(!v4.grants_address(ip("127.0.0.1"), 9201));
        assert!(!v4.grants_address(ip("127.0.0.2"), 9200));
        assert!(!v4.grants_name("127.0.0.1", 9200), "an address is no name");
        let v6 = entry("[::1]:8080");
        assert!(v6.grants_address(ip("::1"), 8080));
        assert!(!v6.grants_address(ip("127.0.0.1"), 8080));
        let v6_any_port = entry("::1");
        assert!(v6_any_port.grants_address(ip("::1"), 1));
        let mapped = entry("[::ffff:10.0.0.5]:80");
        assert!(mapped.grants_address(ip("10.0.0.5"), 80), "kept canonical");
    }

    #[test]
    fn ranges_grant_the_addresses_in_them() {
        let private = entry("10.0.0.0/8:9200");
        assert!(private.grants_address(ip("10.1.2.3"), 9200));
        assert!(private.grants_address(ip("::ffff:10.1.2.3"), 9200));
        assert!(!private.grants_address(ip("11.0.0.1"), 9200));
        assert!(!private.grants_address(ip("10.1.2.3"), 80));
        let ula = entry("[fd00::/8]:9200");
        assert!(ula.grants_address(ip("fd12::1"), 9200));
        assert!(!ula.grants_address(ip("fc00::1"), 9200));
        let everything = entry("0.0.0.0/0");
        assert!(everything.grants_address(ip("169.254.169.254"), 80));
        assert!(
            !everything.grants_address(ip("::1"), 80),
            "IPv4 ranges hold no IPv6"
        );
        assert!(entry("fd00::/8").grants_address(ip("fd00::5"), 1));
        let mapped = entry("::ffff:10.0.0.0/104");
        assert!(mapped.grants_address(ip("10.0.0.7"), 1), "an IPv4 range");
        assert!(!mapped.grants_address(ip("11.0.0.7"), 1));
    }

    #[test]
    fn malformed_entries_are_refused_with_what_to_write() {
        for (text, expected) in [
            (
                "http://x:9200/path",
                "a URL: write only its host and port, `x:9200`",
            ),
            ("search.local/x", "not an address range"),
            ("x:notaport", "not a port number"),
            ("x:70000", "not a port number"),
            ("", "not a host name"),
            ("user@host", "not a host name"),
            ("[::1", "not a host name"),
            ("[::1]x", "not a host name"),
            ("[search.local]:80", "not a host name"),
            ("10.0.0.0/33", "not an address range"),
            ("search.local/8", "not an address range"),
            ("10.0.0.5/8", "bits set past the prefix"),
            ("[fd00::1/8]:80", "bits set past the prefix"),
        ] {
            let err = HttpAllow::parse(text).expect_err(text).to_string();
            assert!(err.contains(expected), "{text}: {err}");
        }
    }

    #[test]
    fn a_tenants_entry_covers_the_same_or_narrower_grants() {
        let covers = |a: &str, b: &str| entry(a).covers(&entry(b));
        assert!(covers("search.local", "search.local:9200"));
        assert!(covers("search.local:9200", "search.local:9200"));
        assert!(!covers("search.local:9200", "search.local"));
        assert!(!covers("search.local:9200", "search.local:9201"));
        assert!(!covers("search.local", "other.local"));
        assert!(covers("10.0.0.0/8", "10.0.0.5:9200"));
        assert!(covers("10.0.0.0/8", "10.1.0.0/16"));
        assert!(!covers("10.1.0.0/16", "10.0.0.0/8"));
        assert!(!covers("10.0.0.0/8", "11.0.0.1"));
        assert!(covers("[::1]", "[::1]:8080"));
        assert!(!covers("search.local", "10.0.0.5"), "a name is no address");
        assert!(!covers("10.0.0.5", "search.local"));
    }

    #[test]
    fn hosts_of_requests() {
        assert_eq!(Host::parse("[::1]"), Host::Address(ip("::1")));
        assert_eq!(
            Host::parse("[::ffff:127.0.0.1]"),
            Host::Address(ip("127.0.0.1"))
        );
        assert_eq!(
            Host::parse("Search.Local."),
            Host::Name("search.local".into())
        );
        assert_eq!(Host::parse("127.0.0.1."), Host::Address(ip("127.0.0.1")));
        // Not an address in the standard form: a name, which the resolver
        // may still turn into 127.0.0.1 (and the address check then sees).
        assert_eq!(Host::parse("127.1"), Host::Name("127.1".into()));
        assert!(is_localhost("localhost"));
        assert!(!is_localhost("localhost.example"));
    }
}
