//! Which addresses are public: the only ones a granted *name* reaches by
//! itself. Every other kind (this machine, its networks, multicast) is
//! reached only when an address entry of `grants.http` covers it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A kind of address that is not on the public Internet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AddressClass {
    /// `0.0.0.0/8`, `::`: connecting to it reaches this machine.
    Unspecified,
    /// `127.0.0.0/8`, `::1`: this machine.
    Loopback,
    /// RFC 1918 (`10/8`, `172.16/12`, `192.168/16`), unique-local
    /// `fc00::/7` and the old site-local `fec0::/10`.
    Private,
    /// `169.254/16` (cloud metadata services live here), `fe80::/10`.
    LinkLocal,
    /// `100.64/10`, shared by carriers' NAT (RFC 6598).
    SharedNat,
    /// `224/4`, `ff00::/8`.
    Multicast,
    /// `255.255.255.255`.
    Broadcast,
    /// `240/4`, reserved for future use.
    Reserved,
}

impl AddressClass {
    /// What the class is, for a refusal's log line.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            AddressClass::Unspecified => "an unspecified address (this machine)",
            AddressClass::Loopback => "a loopback address",
            AddressClass::Private => "a private address",
            AddressClass::LinkLocal => "a link-local address",
            AddressClass::SharedNat => "a shared (carrier NAT) address",
            AddressClass::Multicast => "a multicast address",
            AddressClass::Broadcast => "the broadcast address",
            AddressClass::Reserved => "a reserved address",
        }
    }
}

/// The class of `ip`, or `None` when it is public. An IPv6 address that
/// carries an IPv4 one (mapped `::ffff:a.b.c.d`, compatible `::a.b.c.d`,
/// NAT64 `64:ff9b::a.b.c.d`) is classed as that IPv4 address.
pub(crate) fn classify(ip: IpAddr) -> Option<AddressClass> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => classify_v4(v4),
            None => classify_v6(v6),
        },
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<AddressClass> {
    let [a, b, ..] = ip.octets();
    Some(match (a, b) {
        (0, _) => AddressClass::Unspecified,
        (127, _) => AddressClass::Loopback,
        (10, _) | (172, 16..=31) | (192, 168) => AddressClass::Private,
        (169, 254) => AddressClass::LinkLocal,
        (100, 64..=127) => AddressClass::SharedNat,
        (224..=239, _) => AddressClass::Multicast,
        _ if ip == Ipv4Addr::BROADCAST => AddressClass::Broadcast,
        (240..=255, _) => AddressClass::Reserved,
        _ => return None,
    })
}

fn classify_v6(ip: Ipv6Addr) -> Option<AddressClass> {
    let first = ip.segments()[0];
    Some(if ip.is_unspecified() {
        AddressClass::Unspecified
    } else if ip.is_loopback() {
        AddressClass::Loopback
    } else if first & 0xfe00 == 0xfc00 || first & 0xffc0 == 0xfec0 {
        AddressClass::Private
    } else if first & 0xffc0 == 0xfe80 {
        AddressClass::LinkLocal
    } else if first & 0xff00 == 0xff00 {
        AddressClass::Multicast
    } else {
        return None;
    })
}

/// The IPv4 address an IPv6 one stands for, if it is one of the forms that
/// reach an IPv4 host: mapped (`::ffff:0:0/96`), compatible (`::/96`, but
/// not `::` and `::1`) and the NAT64 well-known prefix (`64:ff9b::/96`).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    let s = ip.segments();
    let low = Ipv4Addr::from(u32::from(s[6]) << 16 | u32::from(s[7]));
    match s[..6] {
        [0, 0, 0, 0, 0, 0] if !ip.is_unspecified() && !ip.is_loopback() => Some(low),
        [0x64, 0xff9b, 0, 0, 0, 0] => Some(low),
        _ => None,
    }
}

/// `ip` with an IPv4 address carried in IPv6 (mapped, compatible, NAT64)
/// written as that IPv4 address: how grants compare addresses.
pub(crate) fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => embedded_v4(v6).map_or(ip, IpAddr::V4),
        IpAddr::V4(_) => ip,
    }
}

#[cfg(test)]
mod tests {
    use super::AddressClass::*;
    use super::*;

    fn class(ip: &str) -> Option<AddressClass> {
        classify(ip.parse().expect("an address"))
    }

    #[test]
    fn every_class_of_ipv4() {
        for (ip, expected) in [
            ("0.0.0.0", Some(Unspecified)),
            ("0.1.2.3", Some(Unspecified)),
            ("127.0.0.1", Some(Loopback)),
            ("127.255.255.254", Some(Loopback)),
            ("10.0.0.5", Some(Private)),
            ("172.16.0.1", Some(Private)),
            ("172.31.255.255", Some(Private)),
            ("192.168.1.1", Some(Private)),
            ("169.254.169.254", Some(LinkLocal)),
            ("100.64.0.1", Some(SharedNat)),
            ("100.127.255.255", Some(SharedNat)),
            ("224.0.0.1", Some(Multicast)),
            ("239.255.255.255", Some(Multicast)),
            ("255.255.255.255", Some(Broadcast)),
            ("240.0.0.1", Some(Reserved)),
            // Just outside the ranges: public.
            ("172.15.255.255", None),
            ("172.32.0.0", None),
            ("100.63.255.255", None),
            ("100.128.0.0", None),
            ("192.167.255.255", None),
            ("169.253.0.1", None),
            ("11.0.0.1", None),
            ("1.1.1.1", None),
            ("93.184.216.34", None),
            ("223.255.255.255", None),
        ] {
            assert_eq!(class(ip), expected, "{ip}");
        }
    }

    #[test]
    fn every_class_of_ipv6() {
        for (ip, expected) in [
            ("::", Some(Unspecified)),
            ("::1", Some(Loopback)),
            ("fc00::1", Some(Private)),
            ("fd12:3456::1", Some(Private)),
            ("fec0::1", Some(Private)),
            ("fe80::1", Some(LinkLocal)),
            ("febf::1", Some(LinkLocal)),
            ("ff02::1", Some(Multicast)),
            ("2001:4860:4860::8888", None),
            ("2606:4700::1111", None),
            ("fbff::1", None),
        ] {
            assert_eq!(class(ip), expected, "{ip}");
        }
    }

    #[test]
    fn ipv4_carried_in_ipv6_is_classed_as_the_ipv4_address() {
        for (ip, expected) in [
            ("::ffff:127.0.0.1", Some(Loopback)),
            ("::ffff:10.0.0.5", Some(Private)),
            ("::ffff:169.254.169.254", Some(LinkLocal)),
            ("::ffff:100.64.0.1", Some(SharedNat)),
            ("::ffff:0.0.0.0", Some(Unspecified)),
            ("::ffff:255.255.255.255", Some(Broadcast)),
            ("::ffff:224.0.0.1", Some(Multicast)),
            ("::127.0.0.1", Some(Loopback)),
            ("::10.0.0.5", Some(Private)),
            ("64:ff9b::127.0.0.1", Some(Loopback)),
            ("64:ff9b::192.168.0.1", Some(Private)),
            ("::ffff:1.1.1.1", None),
            ("64:ff9b::1.1.1.1", None),
        ] {
            assert_eq!(class(ip), expected, "{ip}");
        }
        let ip: IpAddr = "::ffff:10.0.0.5".parse().expect("address");
        assert_eq!(canonical(ip), "10.0.0.5".parse::<IpAddr>().expect("v4"));
        let ip: IpAddr = "::1".parse().expect("address");
        assert_eq!(canonical(ip), ip, "::1 is IPv6 loopback, not 0.0.0.1");
    }
}
