//! Property test of the SQL grant: for random connection URLs, in both
//! forms (`postgres://` and `key=value`), naming servers every way the
//! client reads (hosts in the authority and in `host=`, port lists,
//! `hostaddr`, Unix sockets, `options`, percent-encoding, upper case,
//! trailing dots, IPv6 and IPv4-in-IPv6), admission never lets a tenant
//! reach a server its policy does not list.
//!
//! The *oracle* is independent of admission's code: it reads the URL as
//! the PostgreSQL client alone would (`tokio_postgres::Config`, its own
//! pairing of hosts, ports and `hostaddr`), and checks each server it would
//! dial against the policy with plain comparisons written per entry. It
//! also checks that the servers admission read ([`SqlTarget::servers`],
//! which the host dials) are the client's.

use std::net::IpAddr;

use proptest::prelude::*;
use proptest::sample::{select, subsequence};
use proptest::test_runner::{Config as Cases, TestRunner};

use crate::plugin::SqlTarget;
use crate::tenancy::admit::sql_reachable;
use crate::tenancy::operator::TenantPolicy;

/// A policy entry, and which servers it lists, by plain reading.
type Entry = (&'static str, fn(&str, u16) -> bool);

fn v4(host: &str) -> Option<[u8; 4]> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<IpAddr>().ok()? {
        IpAddr::V4(v4) => Some(v4.octets()),
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(|v4| v4.octets()),
    }
}

fn v6_segments(host: &str) -> Option<[u16; 8]> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<IpAddr>().ok()? {
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_none() => Some(v6.segments()),
        _ => None,
    }
}

/// A host as one spelling: an address canonical, a name in lower case
/// without its trailing dot.
fn canonical(host: &str) -> String {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<IpAddr>() {
        Ok(ip) => ip.to_canonical().to_string(),
        Err(_) => bare.trim_end_matches('.').to_ascii_lowercase(),
    }
}

fn named(host: &str, name: &str) -> bool {
    host.trim_end_matches('.').eq_ignore_ascii_case(name)
}

/// Entries a policy may hold.
const ENTRIES: [Entry; 8] = [
    ("db.acme.internal:5432", |h, p| {
        named(h, "db.acme.internal") && p == 5432
    }),
    ("db.acme.internal", |h, _| named(h, "db.acme.internal")),
    ("10.30.0.0/16", |h, _| {
        v4(h).is_some_and(|o| o[..2] == [10, 30])
    }),
    ("10.30.1.2:5433", |h, p| {
        v4(h) == Some([10, 30, 1, 2]) && p == 5433
    }),
    ("[fd00::/64]:5432", |h, p| {
        v6_segments(h).is_some_and(|s| s[..4] == [0xfd00, 0, 0, 0]) && p == 5432
    }),
    ("localhost:5432", |h, p| named(h, "localhost") && p == 5432),
    ("127.0.0.1", |h, _| v4(h) == Some([127, 0, 0, 1])),
    ("db.other.internal:6432", |h, p| {
        named(h, "db.other.internal") && p == 6432
    }),
];

/// Ways to write a host, within the policy and beyond it.
fn host() -> impl Strategy<Value = String> {
    select(vec![
        "db.acme.internal",
        "DB.Acme.Internal",
        "db.acme.internal.",
        "db%2eacme%2einternal",
        "db.other.internal",
        "db.acme.internal.evil",
        "10.30.1.2",
        "db.other.internal",
        "10.30.1.2",
        "10.31.1.2",
        "127.0.0.1",
        "2130706433",
        "localhost",
        "[fd00::5]",
        "[fd01::5]",
        "[::ffff:10.30.0.9]",
        "[::ffff:127.0.0.1]",
        "[::1]",
        "%2Fvar%2Frun%2Fpostgresql",
        "",
    ])
    .prop_map(str::to_owned)
}

fn port() -> impl Strategy<Value = Option<u16>> {
    prop_oneof![
        Just(None),
        select(vec![5432u16, 5433, 1, 65535]).prop_map(Some)
    ]
}

/// An extra setting of the URL's query or of the `key=value` form.
fn setting() -> impl Strategy<Value = (String, String)> {
    let value = select(vec![
        "127.0.0.1",
        "10.30.0.1",
        "db.acme.internal",
        "db.other.internal",
        "5432",
        "5433",
        "-c role=admin",
        "x",
    ]);
    (
        select(vec![
            "host",
            "hostaddr",
            "port",
            "options",
            "user",
            "dbname",
            "application_name",
            "target_session_attrs",
            "load_balance_hosts",
        ]),
        value,
    )
        .prop_map(|(k, v)| (k.to_owned(), v.to_owned()))
}

/// A URL in either form.
fn url() -> impl Strategy<Value = String> {
    let servers = prop::collection::vec((host(), port()), 1..4);
    let settings = prop::collection::vec(setting(), 0..4);
    (servers, settings, any::<bool>()).prop_map(|(servers, settings, as_url)| {
        if as_url {
            let authority: Vec<String> = servers
                .iter()
                .map(|(h, p)| p.map_or_else(|| h.clone(), |p| format!("{h}:{p}")))
                .collect();
            let query: Vec<String> = settings
                .iter()
                .map(|(k, v)| format!("{k}={}", v.replace(' ', "%20").replace('=', "%3D")))
                .collect();
            format!(
                "postgres://u:secret@{}/db?{}",
                authority.join(","),
                query.join("&")
            )
        } else {
            let hosts: Vec<String> = servers
                .iter()
                .map(|(h, _)| {
                    h.trim_start_matches('[')
                        .trim_end_matches(']')
                        .replace("%2F", "/")
                })
                .collect();
            let ports: Vec<String> = servers
                .iter()
                .map(|(_, p)| p.map(|p| p.to_string()).unwrap_or_default())
                .collect();
            let extra: Vec<String> = settings.iter().map(|(k, v)| format!("{k}='{v}'")).collect();
            format!(
                "host={} port={} user=u password=secret {}",
                hosts.join(","),
                ports.join(","),
                extra.join(" ")
            )
        }
    })
}

fn tenant(entries: &[Entry]) -> TenantPolicy {
    let sql: Vec<String> = entries.iter().map(|(e, _)| format!("{e:?}")).collect();
    toml::from_str(&format!(
        "name = \"acme\"\ntoken_env = \"A\"\npipelines = [\"a\"]\nplugins = []\nsql = [{}]",
        sql.join(", ")
    ))
    .expect("a tenant policy")
}

/// The servers the client would dial for `url` read on its own: each host
/// (or its `hostaddr`, which wins) with its port, paired as the client
/// pairs them.
fn dialled_by_the_client(url: &str) -> Vec<(String, u16)> {
    let raw: tokio_postgres::Config = url.parse().expect("parses");
    let hosts: Vec<String> = raw
        .get_hosts()
        .iter()
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(h) => h.clone(),
            tokio_postgres::config::Host::Unix(p) => format!("unix:{}", p.display()),
        })
        .collect();
    let addrs: Vec<String> = raw
        .get_hostaddrs()
        .iter()
        .map(ToString::to_string)
        .collect();
    let ports = raw.get_ports();
    let count = hosts.len().max(addrs.len());
    (0..count)
        .map(|i| {
            let host = addrs.get(i).or(hosts.get(i)).cloned().unwrap_or_default();
            let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
            (host, port)
        })
        .collect()
}

#[test]
fn admission_never_lets_a_tenant_reach_a_database_server_its_policy_does_not_list() {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(2_000);
    let mut runner = TestRunner::new(Cases {
        cases,
        failure_persistence: None,
        ..Cases::default()
    });
    let admitted = std::sync::atomic::AtomicU32::new(0);
    let policies = subsequence(ENTRIES.to_vec(), 1..=4);
    runner
        .run(&(policies, url()), |(entries, url)| {
            let tenant = tenant(&entries);
            let Ok(()) = sql_reachable(&url, &tenant) else {
                return Ok(());
            };
            admitted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let dialled = dialled_by_the_client(&url);
            prop_assert!(!dialled.is_empty(), "{url}");
            for (host, port) in &dialled {
                prop_assert!(
                    entries.iter().any(|(_, lists)| lists(host, *port)),
                    "{host}:{port} admitted from {url} under {:?}",
                    entries.iter().map(|(e, _)| *e).collect::<Vec<_>>()
                );
            }
            // What admission read is what the client reads: the host dials
            // the servers admission checked.
            let target = SqlTarget::parse(&url).expect("admitted, so it parses");
            let read: Vec<(String, u16)> = target
                .servers()
                .iter()
                .map(|s| {
                    let text = s.to_string();
                    let (host, port) = text.rsplit_once(':').expect("host:port");
                    (host.to_owned(), port.parse().expect("port"))
                })
                .collect();
            prop_assert_eq!(read.len(), dialled.len(), "{}", url);
            for ((a, ap), (b, bp)) in read.iter().zip(&dialled) {
                prop_assert_eq!(ap, bp, "{}", url);
                prop_assert_eq!(canonical(a), canonical(b), "{}", url);
            }
            Ok(())
        })
        .expect("no URL reaches beyond the policy");
    assert!(
        admitted.into_inner() > 0,
        "the generator never wrote an admissible URL"
    );
}
