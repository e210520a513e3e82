//! Shared helpers for Weir's integration tests: the example plugins, built
//! once per test process, and small constructors.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;
use weir::core::document::Document;
use weir::plugin::{PluginRuntime, PluginSpec, RuntimeOptions};

pub mod s3;

/// The repository root.
pub fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the repository")
}

/// `plugins/dist`, after building every plugin (once per process) with
/// `plugins/build.sh`. A build failure fails the test that asked.
pub fn plugins_dir() -> &'static Path {
    static DIST: OnceLock<PathBuf> = OnceLock::new();
    DIST.get_or_init(|| {
        let script = repo_root().join("plugins").join("build.sh");
        let output = Command::new("bash")
            .arg(&script)
            .output()
            .expect("cannot run plugins/build.sh");
        assert!(
            output.status.success(),
            "plugins/build.sh failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        repo_root().join("plugins").join("dist")
    })
}

/// The built component of plugin `crate_name` (e.g. `copy-fields`).
pub fn plugin(crate_name: &str) -> PathBuf {
    let path = plugins_dir().join(format!("{}.wasm", crate_name.replace('-', "_")));
    assert!(path.exists(), "no such plugin: {}", path.display());
    path
}

/// A plugin component built from `src` (an `app.py` or `app.js` project)
/// with the SDK of `lang` (`python` or `js`) as `kind` (`stage`, `connector`,
/// `indexer`, or `per-document-stage` for a stage exported per document);
/// built once per process, and reused across runs through the SDK build cache.
pub fn sdk_component(lang: &str, kind: &str, src: &Path) -> PathBuf {
    type Built = std::collections::HashMap<(String, PathBuf), PathBuf>;
    static BUILT: OnceLock<std::sync::Mutex<Built>> = OnceLock::new();
    let mut built = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let key = (kind.to_owned(), src.to_owned());
    if let Some(path) = built.get(&key) {
        return path.clone();
    }
    let out_dir = std::env::temp_dir().join(format!("weir-sdk-components-{}", std::process::id()));
    std::fs::create_dir_all(&out_dir).expect("output directory");
    let name = src
        .strip_prefix(repo_root())
        .unwrap_or(src)
        .to_string_lossy()
        .replace(['/', '\\'], "-");
    let out = out_dir.join(format!("{name}-{kind}.wasm"));
    let script = repo_root()
        .join("plugins")
        .join(format!("sdk-{lang}"))
        .join("build.sh");
    let output = Command::new("bash")
        .arg(&script)
        .arg(kind)
        .arg(src)
        .arg(&out)
        .output()
        .expect("cannot run the SDK build script");
    assert!(
        output.status.success(),
        "{} {kind} {} failed:\n{}{}",
        script.display(),
        src.display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    built.insert(key, out.clone());
    out
}

/// The runtime shared by the tests of this process: each component is
/// compiled once. In memory by default, so tests never touch `~/.cache`;
/// `WEIR_TEST_CACHE_DIR` names a disk cache to keep compiled Python and
/// JavaScript components (seconds each) between test runs.
pub fn runtime() -> PluginRuntime {
    static RUNTIME: OnceLock<PluginRuntime> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            PluginRuntime::new(RuntimeOptions {
                cache_dir: std::env::var_os("WEIR_TEST_CACHE_DIR").map(PathBuf::from),
                ..RuntimeOptions::default()
            })
            .expect("runtime")
        })
        .clone()
}

/// A spec for plugin `crate_name` with `config`, default grants and limits.
pub fn spec(crate_name: &str, config: Value) -> PluginSpec {
    PluginSpec::new(plugin(crate_name), config)
}

/// A document of about 1 KB, like the ones the end-to-end benchmark uses.
pub fn sample_document(id: &str) -> Document {
    doc(serde_json::json!({
        "id": id,
        "title": "The quick brown fox jumps over the lazy dog",
        "author": "Anonymous",
        "year": 2026,
        "tags": ["fox", "dog", "classic", "pangram"],
        "body": "x".repeat(700),
        "rating": 4.5,
        "published": true,
    }))
}

/// A document from JSON (must have an `id`).
pub fn doc(json: Value) -> Document {
    Document::from_json(json).expect("test document JSON")
}

/// Replace every `@name` in a TOML config with the path of plugin `name`'s
/// component (as a TOML string), e.g. `path = @copy-fields`.
pub fn with_plugins(toml: &str) -> String {
    let mut out = String::with_capacity(toml.len());
    let mut rest = toml;
    while let Some(at) = rest.find('@') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let end = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .unwrap_or(after.len());
        out.push_str(&format!(
            "{:?}",
            plugin(&after[..end]).display().to_string()
        ));
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// A config from TOML with `@plugin` placeholders; relative paths resolve
/// against `base`.
pub fn config(toml: &str, base: &Path) -> weir::config::Config {
    weir::config::Config::parse(&with_plugins(toml), base, std::iter::empty())
        .unwrap_or_else(|e| panic!("test config does not parse: {e}"))
}

/// Start the server of `script` (`tests/kafka/broker.sh`, `tests/search/*.sh`)
/// for this test process. One this process started is stopped again when
/// the process ends, however it ends: a watcher outside it waits for it to
/// exit (`tail --pid`), then runs `script stop`. So a plain `cargo test`
/// leaves no server behind. One running already (started by `.ci/run`, by
/// hand, or by another test process) is left as it is.
fn start_server(script: &Path) {
    let run = |command: &str| {
        Command::new("bash")
            .arg(script)
            .arg(command)
            .status()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()))
    };
    let running = run("status").success();
    assert!(run("start").success(), "{} start failed", script.display());
    if running {
        return;
    }
    // The watcher is its own session, so it outlives this process; the
    // shell that starts it is waited for here.
    let watcher = r#"setsid bash -c 'tail --pid="$1" -f /dev/null; bash "$2" stop' stop-after "$1" "$2" </dev/null >/dev/null 2>&1 &"#;
    let status = Command::new("bash")
        .arg("-c")
        .arg(watcher)
        .arg("stop-after")
        .arg(std::process::id().to_string())
        .arg(script)
        .status();
    assert!(
        status.is_ok_and(|s| s.success()),
        "cannot watch {}",
        script.display()
    );
}

/// The Kafka broker the tests use: `WEIR_KAFKA_BOOTSTRAP` when set (CI starts
/// the broker and sets it), else the one `tests/kafka/broker.sh` starts on
/// 127.0.0.1:19092 (started here when it is not running, and then stopped
/// when the tests end). Tests that need Kafka fail, never skip, when there
/// is none.
pub fn kafka_bootstrap() -> &'static str {
    static BOOTSTRAP: OnceLock<String> = OnceLock::new();
    BOOTSTRAP.get_or_init(|| {
        if let Ok(servers) = std::env::var("WEIR_KAFKA_BOOTSTRAP") {
            return servers;
        }
        start_server(&repo_root().join("tests").join("kafka").join("broker.sh"));
        let port = std::env::var("WEIR_KAFKA_PORT").unwrap_or_else(|_| "19092".into());
        format!("127.0.0.1:{port}")
    })
}

/// A search server the tests use: the URL in `url_env` when set (CI starts
/// the servers and sets it), else the one `tests/search/<script>` starts on
/// loopback (here, once per process, when it is not running, and then
/// stopped when the tests end). Tests that need one fail, never skip, when
/// there is none.
fn search_server(
    cell: &'static OnceLock<String>,
    url_env: &str,
    script: &str,
    port_env: &str,
    port: &str,
    path: &str,
) -> &'static str {
    cell.get_or_init(|| {
        if let Ok(url) = std::env::var(url_env) {
            return url.trim_end_matches('/').to_owned();
        }
        start_server(&repo_root().join("tests").join("search").join(script));
        let port = std::env::var(port_env).unwrap_or_else(|_| port.into());
        format!("http://127.0.0.1:{port}{path}")
    })
}

/// OpenSearch's URL: `WEIR_OPENSEARCH_URL`, or `tests/search/opensearch.sh`'s.
pub fn opensearch_url() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    search_server(
        &URL,
        "WEIR_OPENSEARCH_URL",
        "opensearch.sh",
        "WEIR_OPENSEARCH_PORT",
        "19200",
        "",
    )
}

/// Solr's base URL (with `/solr`): `WEIR_SOLR_URL`, or `tests/search/solr.sh`'s.
pub fn solr_url() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    search_server(
        &URL,
        "WEIR_SOLR_URL",
        "solr.sh",
        "WEIR_SOLR_PORT",
        "18983",
        "/solr",
    )
}

/// The real embedding server's URL (a small model from a PyPI wheel):
/// `WEIR_EMBEDDER_URL` when set (CI starts it and sets it), else the one
/// `tests/embedder/embedder.sh` starts on loopback, like the search servers.
pub fn embedder_url() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        if let Ok(url) = std::env::var("WEIR_EMBEDDER_URL") {
            return url.trim_end_matches('/').to_owned();
        }
        start_server(
            &repo_root()
                .join("tests")
                .join("embedder")
                .join("embedder.sh"),
        );
        let port = std::env::var("WEIR_EMBEDDER_PORT").unwrap_or_else(|_| "18090".into());
        format!("http://127.0.0.1:{port}")
    })
}

/// The S3-compatible server's URL (S3Proxy from Maven Central, signatures
/// checked, objects in memory): `WEIR_S3_URL` when set (CI starts it and
/// sets it), else the one `tests/storage/s3proxy.sh` starts on loopback,
/// like the search servers. Its keys are in [`s3`].
pub fn s3_url() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        if let Ok(url) = std::env::var("WEIR_S3_URL") {
            return url.trim_end_matches('/').to_owned();
        }
        start_server(&repo_root().join("tests").join("storage").join("s3proxy.sh"));
        let port = std::env::var("WEIR_S3_PORT").unwrap_or_else(|_| "19000".into());
        format!("http://127.0.0.1:{port}")
    })
}

/// The PostgreSQL the tests use, as a connection URL: `WEIR_PG_URL` when
/// set (CI starts the server and sets it), else the one
/// `tests/storage/postgres.sh` starts on loopback (Debian's package,
/// installed by the script when missing), like the search servers.
pub fn postgres_url() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        if let Ok(url) = std::env::var("WEIR_PG_URL") {
            return url;
        }
        start_server(
            &repo_root()
                .join("tests")
                .join("storage")
                .join("postgres.sh"),
        );
        let port = std::env::var("WEIR_PG_PORT").unwrap_or_else(|_| "54329".into());
        format!("postgres://postgres:weir-test@127.0.0.1:{port}/postgres")
    })
}

/// The RabbitMQ node the queue-source tests use, as an AMQP URL:
/// `WEIR_TEST_AMQP_URL` when set (CI starts the node and sets it), else the
/// private node `tests/queue/rabbitmq.sh` starts on loopback (Debian's
/// package, installed by the script when missing), like the search servers.
pub fn amqp_url() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        if let Ok(url) = std::env::var("WEIR_TEST_AMQP_URL") {
            return url;
        }
        start_server(&repo_root().join("tests").join("queue").join("rabbitmq.sh"));
        let port = std::env::var("WEIR_AMQP_PORT").unwrap_or_else(|_| "19672".into());
        format!("amqp://guest:guest@127.0.0.1:{port}/%2f")
    })
}

/// [`postgres_url`] as `key=value` settings (`host=... port=... user=...
/// password=... dbname=...`), which `tokio-postgres` takes too: a config
/// can hold it where an `@` would read as a plugin placeholder.
pub fn postgres_settings() -> String {
    let url = postgres_url();
    let rest = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))
        .unwrap_or_else(|| panic!("not a postgres:// URL: {url}"));
    let (auth, place) = rest.rsplit_once('@').unwrap_or(("", rest));
    let (user, password) = auth.split_once(':').unwrap_or((auth, ""));
    let (address, dbname) = place.split_once('/').unwrap_or((place, "postgres"));
    let (host, port) = address.rsplit_once(':').unwrap_or((address, "5432"));
    format!("host={host} port={port} user={user} password={password} dbname={dbname}")
}

/// `host:port` of an `http://host:port/...` URL, for `grants.http`.
pub fn authority(url: &str) -> &str {
    let rest = url
        .trim_start_matches("http://")
        .trim_start_matches("https://");
    rest.split('/').next().unwrap_or(rest)
}

/// `grants.http` for the server at `url`, as a TOML array: its `host:port`
/// and, for a name, the addresses it resolves to now. A granted name
/// reaches only public addresses unless its addresses are granted too, and
/// a test's server is on this machine or a private network.
pub fn http_grants(url: &str) -> String {
    let authority = authority(url);
    let default_port = if url.starts_with("https://") { 443 } else { 80 };
    let with_port = if authority.ends_with(']') || !authority.contains(':') {
        format!("{authority}:{default_port}")
    } else {
        authority.to_owned()
    };
    let mut grants = vec![authority.to_owned()];
    let resolved = std::net::ToSocketAddrs::to_socket_addrs(with_port.as_str());
    for addr in resolved.into_iter().flatten() {
        let addr = addr.to_string();
        if !grants.contains(&addr) {
            grants.push(addr);
        }
    }
    let quoted: Vec<String> = grants.iter().map(|g| format!("{g:?}")).collect();
    format!("[{}]", quoted.join(", "))
}

/// Send `method url` with an optional JSON body; the status and the body
/// parsed as JSON (null when it is not JSON). Any status is an answer.
pub fn http_json(method: &str, url: &str, body: Option<&str>) -> (u16, Value) {
    static AGENT: OnceLock<ureq::Agent> = OnceLock::new();
    let agent = AGENT.get_or_init(|| {
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into()
    });
    let request = ureq::http::Request::builder()
        .method(method)
        .uri(url)
        .header("content-type", "application/json")
        .body(body.unwrap_or_default().to_owned())
        .expect("request");
    let mut response = agent
        .run(request)
        .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let status = response.status().as_u16();
    let text = response
        .body_mut()
        .with_config()
        .limit(256 << 20)
        .read_to_string()
        .unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// A child process that is killed (SIGKILL) when dropped.
#[derive(Debug)]
pub struct Proc {
    pub child: std::process::Child,
    pub name: String,
}

impl Proc {
    /// Start `program args...` with stdout and stderr in `log`.
    pub fn start(
        name: &str,
        program: &Path,
        args: &[&str],
        envs: &[(&str, String)],
        log: &Path,
    ) -> Self {
        let out = std::fs::File::create(log).expect("log file");
        let err = out.try_clone().expect("log file");
        let mut command = Command::new(program);
        command.args(args).stdout(out).stderr(err);
        for (k, v) in envs {
            command.env(k, v);
        }
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        Self {
            child,
            name: name.to_owned(),
        }
    }

    /// Wait until `log` (this process's log file) contains `needle` at least
    /// `times` times, up to `timeout`; false when the process exits or the
    /// time runs out first.
    pub fn wait_for_log(
        &mut self,
        log: &Path,
        needle: &str,
        times: usize,
        timeout: Duration,
    ) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        while std::time::Instant::now() < deadline {
            if std::fs::read_to_string(log).is_ok_and(|text| text.matches(needle).count() >= times)
            {
                return true;
            }
            if !matches!(self.child.try_wait(), Ok(None)) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// SIGKILL: the process gets no chance to clean up.
    pub fn kill_hard(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Send `signal` (`USR1`, `TERM`...) and go on.
    pub fn signal(&self, signal: &str) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args(["-s", signal, &pid])
            .status()
            .is_ok_and(|s| s.success());
        assert!(sent, "SIG{signal} sent to {}", self.name);
    }

    /// SIGTERM, then wait for a clean exit; returns whether it exited with 0.
    pub fn stop(&mut self) -> bool {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        self.child.wait().map(|s| s.success()).unwrap_or(false)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.kill_hard();
        }
    }
}
