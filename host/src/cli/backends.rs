//! `weir validate --check-backends`: each indexer's server reached from
//! here, as its config names it, and what answered.
//!
//! An indexer's server is each `http://` or `https://` URL in its settings
//! whose host its grants allow (`grants.http`), else each granted host. A
//! plain `GET` of it, with a short timeout, says whether the server is
//! there and what it is (a search engine's root names its version); any
//! answer, 401 included, is a server reached. Nothing is written: the
//! indexer's own `start` (which may create an index) does not run.

use std::time::Duration;

use serde_json::Value;
use weir::config::{Config, PluginRole, Problem, Problems};

/// How long reaching one server may take.
const TIMEOUT: Duration = Duration::from_secs(5);
/// Most of an answer read to say what answered.
const READ: u64 = 64 * 1024;

/// What checking the backends found: a line per server reached, and a
/// problem per server that could not be.
pub(super) struct Checked {
    pub(super) reached: Vec<String>,
    pub(super) problems: Problems,
}

/// Reach the server of every indexer of `config`.
pub(super) fn check(config: &Config) -> Checked {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(TIMEOUT))
        .max_redirects(0)
        .build()
        .into();
    let mut checked = Checked {
        reached: Vec::new(),
        problems: Problems::default(),
    };
    let indexers = config.plugins().filter(|at| {
        matches!(at.role, PluginRole::Indexer { .. })
            || (matches!(at.role, PluginRole::DeadLetters) && config.dead_letters.enabled)
    });
    for at in indexers {
        let urls = servers(&at.spec.config, &at.spec.grants.http);
        if urls.is_empty() {
            checked.reached.push(format!(
                "{}: no server to reach (it is granted no host)",
                at.location
            ));
        }
        for (setting, url) in urls {
            match reach(&agent, &url) {
                Ok(found) => checked
                    .reached
                    .push(format!("{}: {url} answered {found}", at.location)),
                Err(why) => checked.problems.push(Problem::new(
                    format!("{}.plugin.{setting}", at.location),
                    format!("cannot reach {url}: {why} (is the server up, and the address right?)"),
                )),
            }
        }
    }
    checked
}

/// The servers of an indexer with settings `config` and granted `hosts`:
/// (where it is set, URL).
fn servers(config: &Value, hosts: &[String]) -> Vec<(String, String)> {
    let mut found = Vec::new();
    urls_in(config, "config", &mut found);
    found.retain(|(_, url)| hosts.iter().any(|host| allows(host, url)));
    if found.is_empty() {
        found = hosts
            .iter()
            .enumerate()
            .map(|(i, host)| (format!("grants.http[{i}]"), format!("http://{host}/")))
            .collect();
    }
    found
}

fn urls_in(value: &Value, at: &str, found: &mut Vec<(String, String)>) {
    match value {
        Value::String(text) if text.starts_with("http://") || text.starts_with("https://") => {
            found.push((at.to_owned(), text.clone()));
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                urls_in(item, &format!("{at}[{i}]"), found);
            }
        }
        Value::Object(fields) => {
            for (key, item) in fields {
                urls_in(item, &format!("{at}.{key}"), found);
            }
        }
        _ => {}
    }
}

/// Whether granted `host` (`host` or `host:port`) covers `url`.
fn allows(host: &str, url: &str) -> bool {
    let Ok(uri) = url.parse::<ureq::http::Uri>() else {
        return false;
    };
    let Some(name) = uri.host() else {
        return false;
    };
    let port = uri
        .port_u16()
        .unwrap_or(if uri.scheme_str() == Some("https") {
            443
        } else {
            80
        });
    match host.rsplit_once(':') {
        Some((granted, p)) if p.parse::<u16>().is_ok() => {
            granted.eq_ignore_ascii_case(name) && p.parse::<u16>().ok() == Some(port)
        }
        _ => host.eq_ignore_ascii_case(name),
    }
}

/// `GET url`: what answered, or why nothing did.
fn reach(agent: &ureq::Agent, url: &str) -> Result<String, String> {
    let mut answer = agent.get(url).call().map_err(|e| e.to_string())?;
    let status = answer.status();
    let server = answer
        .headers()
        .get("server")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = answer
        .body_mut()
        .with_config()
        .limit(READ)
        .read_to_string()
        .unwrap_or_default();
    let mut said = format!("{status}");
    if let Some(what) = product(&body).or(server) {
        said.push_str(&format!(" ({what})"));
    }
    if status.as_u16() == 401 || status.as_u16() == 403 {
        said.push_str(": reached; it wants credentials, which the plugin sends itself");
    }
    Ok(said)
}

/// What a search engine's root says it is: `opensearch 2.19.1`.
fn product(body: &str) -> Option<String> {
    let value: Value = serde_json::from_str(body).ok()?;
    let version = value.get("version")?;
    let number = version.get("number")?.as_str()?;
    let name = version
        .get("distribution")
        .and_then(Value::as_str)
        .unwrap_or("elasticsearch");
    Some(format!("{name} {number}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_is_a_granted_url_in_the_settings_else_a_granted_host() {
        let config = serde_json::json!({
            "url": "http://127.0.0.1:19200",
            "nested": [{ "other": "https://elsewhere.example/x" }],
            "index": "books",
        });
        assert_eq!(
            servers(&config, &["127.0.0.1:19200".into()]),
            [("config.url".to_owned(), "http://127.0.0.1:19200".to_owned())]
        );
        assert_eq!(
            servers(&config, &["elsewhere.example".into()]),
            [(
                "config.nested[0].other".to_owned(),
                "https://elsewhere.example/x".to_owned()
            )]
        );
        assert_eq!(
            servers(&serde_json::json!({}), &["search:9200".into()]),
            [(
                "grants.http[0]".to_owned(),
                "http://search:9200/".to_owned()
            )]
        );
        assert!(servers(&serde_json::json!({ "path": "/out/x" }), &[]).is_empty());
        assert!(!allows("127.0.0.1:9200", "http://127.0.0.1:19200"));
        assert!(allows("example.com", "https://EXAMPLE.com/a"));
        assert_eq!(
            product(r#"{"version": {"number": "2.19.1", "distribution": "opensearch"}}"#),
            Some("opensearch 2.19.1".into())
        );
        assert_eq!(product("<html>"), None);
    }
}
