//! Property test of the SQL grant: for random connection URLs, in both
//! forms (`postgres://` and `key=value`), naming servers every way the
//! client reads (hosts in the authority and in `host=`, port lists,
//! `hostaddr`, Unix sockets, `options`, percent-encoding, upper case,
//! trailing dots, IPv6 and IPv4-in-IPv6), admission never lets a tenant
//! reach a server its policy does not list.
//!
//! The *oracle* is independent of admission's code: it reads what the host
//! would dial (the client's own settings, made from the URL as the host
//! makes them) and checks each server against the policy with plain
//! comparisons.

use std::net::IpAddr;

use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::{Config as Cases, TestRunner};

use crate::control::admit::sql_reachable;
use crate::control::operator::TenantPolicy;
use crate::plugin::SqlTarget;

/// The tenant may reach `db.acme.internal` on 5432, anything in
/// `10.30.0.0/16`, and `fd00::/64` on 5432.
const POLICY: [&str; 3] = ["db.acme.internal:5432", "10.30.0.0/16", "[fd00::/64]:5432"];

/// Whether the tenant's policy lists `host` on `port`, by plain reading.
fn listed(host: &str, port: u16) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<IpAddr>() {
        Ok(IpAddr::V4(v4)) => v4.octets()[..2] == [10, 30],
        Ok(IpAddr::V6(v6)) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.octets()[..2] == [10, 30],
            None => v6.segments()[..4] == [0xfd00, 0, 0, 0] && port == 5432,
        },
        Err(_) => {
            host.trim_end_matches('.')
                .eq_ignore_ascii_case("db.acme.internal")
                && port == 5432
        }
    }
}

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

fn tenant() -> TenantPolicy {
    let sql: Vec<String> = POLICY.iter().map(|s| format!("{s:?}")).collect();
    toml::from_str(&format!(
        "name = \"acme\"\ntoken_env = \"A\"\npipelines = [\"a\"]\nplugins = []\nsql = [{}]",
        sql.join(", ")
    ))
    .expect("a tenant policy")
}

#[test]
fn admission_never_lets_a_tenant_reach_a_database_server_its_policy_does_not_list() {
    let tenant = tenant();
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
    runner
        .run(&url(), |url| {
            let Ok(()) = sql_reachable(&url, &tenant) else {
                return Ok(());
            };
            admitted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            // What the host dials: the client's settings as the host makes
            // them, then as the client pairs hosts and ports.
            let target = SqlTarget::parse(&url).expect("admitted, so it parses");
            let dialled = target.connect_config();
            prop_assert!(dialled.get_hostaddrs().is_empty(), "{url}");
            prop_assert!(dialled.get_options().is_none(), "{url}");
            let ports = dialled.get_ports();
            prop_assert!(!dialled.get_hosts().is_empty(), "{url}");
            for (i, host) in dialled.get_hosts().iter().enumerate() {
                let tokio_postgres::config::Host::Tcp(host) = host else {
                    return Err(TestCaseError::fail(format!("a socket admitted: {url}")));
                };
                let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
                prop_assert!(listed(host, port), "{host}:{port} admitted from {url}");
            }
            // And the URL as the client alone would read it leads nowhere
            // else either: no address apart from its hosts, no settings.
            let raw: tokio_postgres::Config = url.parse().expect("parses");
            prop_assert!(raw.get_hostaddrs().is_empty(), "{url}");
            prop_assert!(raw.get_options().is_none(), "{url}");
            Ok(())
        })
        .expect("no URL reaches beyond the policy");
    assert!(
        admitted.into_inner() > 0,
        "the generator never wrote an admissible URL"
    );
}
