//! The rule a request is held to, before and after its name is resolved
//! (stated for users in `docs/sandbox.md#outgoing-http`):
//!
//! - A request naming an **address** is sent only if an address entry
//!   covers it (and its port).
//! - A request naming a **host name** is sent only if a name entry grants
//!   it (and its port), and then only to what the name resolves to, once,
//!   for this request: every address must be public or covered by an
//!   address entry, or the request is refused.
//! - `localhost` is never looked up: it is `127.0.0.1` and `::1`, which a
//!   grant of `localhost` reaches.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::address::{AddressClass, canonical, classify};
use super::allow::{Host, HttpAllow, is_localhost};

/// What to do with a request a grant lets through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Connect to these addresses, already checked.
    Connect(Vec<IpAddr>),
    /// Resolve this name, then [`check_resolved`] what it resolves to.
    Resolve(String),
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No entry grants the host (name or address) on that port.
    NotGranted,
    /// The granted name resolves to an address that is not public, and no
    /// address entry covers it.
    Address { ip: IpAddr, class: AddressClass },
}

impl Refusal {
    /// The `wasi:http` error the plugin gets.
    pub(crate) fn code(&self) -> wasmtime_wasi_http::Error {
        match self {
            Refusal::NotGranted => wasmtime_wasi_http::Error::HttpRequestDenied,
            Refusal::Address { .. } => wasmtime_wasi_http::Error::DestinationIpProhibited,
        }
    }

    /// The bounded label of the refusal, for the metric.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Refusal::NotGranted => "not_granted",
            Refusal::Address { .. } => "address_not_granted",
        }
    }

    /// Why, and what to grant, for the operator's log.
    pub(crate) fn explain(&self, host: &str, port: u16) -> String {
        match self {
            Refusal::NotGranted => {
                format!("`{host}:{port}` is not in the plugin's grants.http")
            }
            Refusal::Address { ip, class } => {
                let entry = match ip {
                    IpAddr::V4(v4) => format!("{v4}:{port}"),
                    IpAddr::V6(v6) => format!("[{v6}]:{port}"),
                };
                format!(
                    "`{host}` resolves to {ip}, {}; a granted name reaches only public \
                     addresses: grant `{entry}` (or a range holding it) to allow it",
                    class.describe()
                )
            }
        }
    }
}

/// How a request to `host:port` proceeds under `allow`, or why it is refused.
pub(crate) fn plan(allow: &[HttpAllow], host: &Host, port: u16) -> Result<Plan, Refusal> {
    match host {
        Host::Address(ip) if allow.iter().any(|a| a.grants_address(*ip, port)) => {
            Ok(Plan::Connect(vec![*ip]))
        }
        Host::Name(name) if allow.iter().any(|a| a.grants_name(name, port)) => {
            Ok(if is_localhost(name) {
                Plan::Connect(vec![
                    IpAddr::V4(Ipv4Addr::LOCALHOST),
                    IpAddr::V6(Ipv6Addr::LOCALHOST),
                ])
            } else {
                Plan::Resolve(name.clone())
            })
        }
        _ => Err(Refusal::NotGranted),
    }
}

/// What a granted name resolved to, as the addresses to connect to (each
/// canonical: an IPv4 address carried in IPv6 is written as IPv4), if every
/// one of them may be reached on `port`; else why not, naming the first
/// that may not.
pub(crate) fn check_resolved(
    allow: &[HttpAllow],
    port: u16,
    resolved: impl IntoIterator<Item = IpAddr>,
) -> Result<Vec<IpAddr>, Refusal> {
    let mut checked = Vec::new();
    for ip in resolved {
        let ip = canonical(ip);
        match classify(ip) {
            Some(class) if !allow.iter().any(|a| a.grants_address(ip, port)) => {
                return Err(Refusal::Address { ip, class });
            }
            _ => checked.push(ip),
        }
    }
    Ok(checked)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allow(entries: &[&str]) -> Vec<HttpAllow> {
        entries
            .iter()
            .map(|e| HttpAllow::parse(e).expect("valid entry"))
            .collect()
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an address")
    }

    #[test]
    fn requests_need_a_grant_of_what_they_name() {
        let grants = allow(&["search.example:9200", "127.0.0.1:8080", "10.0.0.0/8"]);
        let name = Host::parse("search.example");
        assert_eq!(
            plan(&grants, &name, 9200),
            Ok(Plan::Resolve("search.example".into()))
        );
        assert_eq!(plan(&grants, &name, 80), Err(Refusal::NotGranted));
        let loopback = Host::parse("127.0.0.1");
        assert_eq!(
            plan(&grants, &loopback, 8080),
            Ok(Plan::Connect(vec![ip("127.0.0.1")]))
        );
        assert_eq!(plan(&grants, &loopback, 8081), Err(Refusal::NotGranted));
        assert_eq!(
            plan(&grants, &Host::parse("10.9.8.7"), 1),
            Ok(Plan::Connect(vec![ip("10.9.8.7")])),
            "an address in a granted range"
        );
        assert_eq!(
            plan(&grants, &Host::parse("localhost"), 8080),
            Err(Refusal::NotGranted),
            "an address grant grants no name"
        );
        assert_eq!(
            plan(&grants, &Host::parse("1.1.1.1"), 80),
            Err(Refusal::NotGranted),
            "a public address must be granted too"
        );
    }

    #[test]
    fn localhost_is_loopback_without_a_lookup() {
        let grants = allow(&["localhost:9200"]);
        assert_eq!(
            plan(&grants, &Host::parse("LOCALHOST."), 9200),
            Ok(Plan::Connect(vec![ip("127.0.0.1"), ip("::1")]))
        );
        assert_eq!(
            plan(&grants, &Host::parse("127.0.0.1"), 9200),
            Err(Refusal::NotGranted)
        );
    }

    #[test]
    fn a_granted_name_reaches_public_addresses_only_unless_granted_more() {
        let grants = allow(&["search.example", "search.example:9200"]);
        assert_eq!(
            check_resolved(&grants, 443, [ip("93.184.216.34"), ip("2606:4700::1111")]),
            Ok(vec![ip("93.184.216.34"), ip("2606:4700::1111")])
        );
        for (address, class) in [
            ("127.0.0.1", AddressClass::Loopback),
            ("::1", AddressClass::Loopback),
            ("10.0.0.5", AddressClass::Private),
            ("fd00::5", AddressClass::Private),
            ("169.254.169.254", AddressClass::LinkLocal),
            ("100.64.0.1", AddressClass::SharedNat),
            ("0.0.0.0", AddressClass::Unspecified),
            ("224.0.0.1", AddressClass::Multicast),
            ("255.255.255.255", AddressClass::Broadcast),
        ] {
            assert_eq!(
                check_resolved(&grants, 443, [ip("93.184.216.34"), ip(address)]),
                Err(Refusal::Address {
                    ip: ip(address),
                    class
                }),
                "one address not granted refuses the request: {address}"
            );
        }
        assert_eq!(
            check_resolved(&grants, 443, [ip("::ffff:10.0.0.5")]),
            Err(Refusal::Address {
                ip: ip("10.0.0.5"),
                class: AddressClass::Private
            }),
            "a mapped address is its IPv4 address"
        );
    }

    #[test]
    fn an_address_entry_lets_a_granted_name_reach_it() {
        let grants = allow(&["search.internal:9200", "10.0.0.5:9200", "fd00::/8"]);
        assert_eq!(
            check_resolved(&grants, 9200, [ip("10.0.0.5"), ip("::ffff:10.0.0.5")]),
            Ok(vec![ip("10.0.0.5"), ip("10.0.0.5")])
        );
        assert_eq!(
            check_resolved(&grants, 9201, [ip("10.0.0.5")]),
            Err(Refusal::Address {
                ip: ip("10.0.0.5"),
                class: AddressClass::Private
            }),
            "the address entry's port"
        );
        assert!(check_resolved(&grants, 1, [ip("fd00::9")]).is_ok());
        assert!(check_resolved(&grants, 9200, [ip("10.0.0.6")]).is_err());
    }

    #[test]
    fn refusals_say_why_and_what_to_grant() {
        let refusal = Refusal::Address {
            ip: ip("10.0.0.5"),
            class: AddressClass::Private,
        };
        let text = refusal.explain("search.internal", 9200);
        assert!(
            text.contains("`search.internal` resolves to 10.0.0.5, a private address")
                && text.contains("grant `10.0.0.5:9200`"),
            "{text}"
        );
        let v6 = Refusal::Address {
            ip: ip("fd00::5"),
            class: AddressClass::Private,
        };
        assert!(v6.explain("h", 80).contains("grant `[fd00::5]:80`"));
        assert_eq!(
            Refusal::NotGranted.explain("h", 80),
            "`h:80` is not in the plugin's grants.http"
        );
        assert!(matches!(
            refusal.code(),
            wasmtime_wasi_http::Error::DestinationIpProhibited
        ));
        assert!(matches!(
            Refusal::NotGranted.code(),
            wasmtime_wasi_http::Error::HttpRequestDenied
        ));
    }
}
