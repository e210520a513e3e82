//! Embeddings are not paid twice: embed-text keeps each vector in the
//! host's cache (the `cache` interface) and sends the embedding server only
//! the texts it has not seen. Measured on the real model server of
//! `tests/embedder/` through a counting proxy (every request and every text
//! it carries, forwarded to the server and answered with what it said),
//! through the `weir` binary: a first sync, a 1% edit, the bound, a broken
//! cache file, and two tenants of `weir serve`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

const WEIR: &str = env!("CARGO_BIN_EXE_weir-under-test");

/// Pages of the first sync, and chunks (two sentences each) per page.
const PAGES: usize = 1000;
const CHUNKS: usize = 5;

/// What the proxy saw: requests, and texts in them.
#[derive(Default)]
pub(crate) struct Seen {
    requests: AtomicU64,
    texts: AtomicU64,
}

impl Seen {
    /// (requests, texts) since the last take.
    pub(crate) fn take(&self) -> (u64, u64) {
        (
            self.requests.swap(0, Ordering::SeqCst),
            self.texts.swap(0, Ordering::SeqCst),
        )
    }
}

/// A proxy in front of the real embedding server that counts what passes.
pub(crate) struct Proxy {
    pub(crate) url: String,
    pub(crate) seen: Arc<Seen>,
}

impl Proxy {
    pub(crate) fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let seen = Arc::new(Seen::default());
        let counts = Arc::clone(&seen);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let counts = Arc::clone(&counts);
                std::thread::spawn(move || forward(stream, &counts));
            }
        });
        Self { url, seen }
    }
}

/// One request read, counted, sent on to the server, and its answer sent back.
fn forward(stream: TcpStream, seen: &Seen) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let (mut length, mut chunked) = (0usize, false);
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
            break;
        }
        let (name, value) = header.split_once(':').unwrap_or_default();
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().unwrap_or(0),
            "transfer-encoding" => chunked = value.trim().eq_ignore_ascii_case("chunked"),
            _ => {}
        }
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    if chunked {
        body.clear();
        loop {
            let mut size = String::new();
            let _ = reader.read_line(&mut size);
            let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            let mut chunk = vec![0; size + 2];
            if size == 0 || reader.read_exact(&mut chunk).is_err() {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    }
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let texts = request
        .get("input")
        .or_else(|| request.get("inputs"))
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    seen.requests.fetch_add(1, Ordering::SeqCst);
    seen.texts.fetch_add(texts as u64, Ordering::SeqCst);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let (status, answer) = match agent
        .post(format!("{}{path}", weir_tests::embedder_url()))
        .header("content-type", "application/json")
        .send(&body[..])
    {
        Ok(mut r) => (
            r.status().as_u16(),
            r.body_mut()
                .with_config()
                .limit(256 << 20)
                .read_to_vec()
                .unwrap_or_default(),
        ),
        Err(e) => (502, e.to_string().into_bytes()),
    };
    let mut stream = stream;
    let _ = write!(
        stream,
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        answer.len()
    );
    let _ = stream.write_all(&answer);
}

/// Page `i`: ten sentences, each its own, so every chunk's text is too;
/// an edited page has its fourth sentence rewritten (its second chunk).
pub(crate) fn page(i: usize, edited: bool) -> Value {
    let sentences: Vec<String> = (0..2 * CHUNKS)
        .map(|j| {
            if edited && j == 3 {
                format!("Page {i} was edited in its line {j} today.")
            } else {
                format!("Page {i} says in line {j} that the weir holds the river back.")
            }
        })
        .collect();
    json!({ "id": format!("page-{i}"), "text": sentences.join(" ") })
}

/// The pages, `edited` among them edited, as JSON lines.
fn write_pages(file: &Path, pages: usize, edited: impl Fn(usize) -> bool) {
    let lines: Vec<String> = (0..pages).map(|i| page(i, edited(i)).to_string()).collect();
    std::fs::write(file, lines.join("\n") + "\n").expect("pages");
}

/// A config that syncs `pages.jsonl` in `dir`: chunks, each embedded
/// through `proxy`; `more` is added at the end (a `[cache]` section).
fn config(dir: &Path, proxy: &Proxy, more: &str) -> std::path::PathBuf {
    let path = dir.join("pages.toml");
    let text = weir_tests::with_plugins(&format!(
        r#"
[worker]
threads = 2

[[connectors]]
name = "pages"
pipeline = "pages"
plugin = {{ path = @file-connector, config = {{ paths = ["/data/pages.jsonl"], incremental = true }}, grants = {{ dirs = [{{ host = ".", guest = "/data" }}] }} }}

[[pipelines]]
name = "pages"

[[pipelines.stages]]
name = "chunk"
plugin = {{ path = @chunk-text, config = {{ source = "text", by = "sentences", size = 2 }} }}

[[pipelines.stages]]
name = "embed"
when = {{ field = "parent_id", exists = true }}
plugin = {{ path = @embed-text, config = {{ url = "{url}", model = "wordllama", source = "text", dimensions = 256 }}, grants = {{ http = [{grant:?}] }} }}

[indexer]
plugin = {{ path = @test-indexer }}
{more}
"#,
        url = proxy.url,
        grant = weir_tests::authority(&proxy.url),
    ));
    std::fs::write(&path, text).expect("config");
    path
}

/// `weir run` of `config` (with `args`); its exit code and log.
fn run(config: &Path, args: &[&str]) -> (Option<i32>, String) {
    let output = std::process::Command::new(WEIR)
        .args(["run", "--no-progress"])
        .args(args)
        .arg(config)
        .output()
        .expect("weir run");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Entries in the cache file at `path`.
fn entries(path: &Path) -> u64 {
    let db = rusqlite::Connection::open(path).expect("cache file");
    db.query_row("SELECT count(*) FROM entries", [], |r| r.get(0))
        .expect("count")
}

#[test]
fn a_one_percent_edit_re_embeds_only_the_chunks_it_changed() {
    let dir = tempfile::tempdir().expect("dir");
    let proxy = Proxy::start();
    let pages = dir.path().join("pages.jsonl");
    write_pages(&pages, PAGES, |_| false);
    let config = config(dir.path(), &proxy, "");

    let started = std::time::Instant::now();
    let (code, log) = run(&config, &[]);
    let first_wall = started.elapsed();
    assert_eq!(code, Some(0), "{log}");
    let (first_requests, first_texts) = proxy.seen.take();
    assert_eq!(
        first_texts,
        (PAGES * CHUNKS) as u64,
        "every chunk once: {log}"
    );
    assert_eq!(
        entries(&dir.path().join("weir-cache.sqlite")),
        first_texts,
        "each vector kept beside the config"
    );

    // 1% of the pages get one sentence rewritten: one chunk each changes.
    let edited = |i: usize| i % 100 == 7;
    write_pages(&pages, PAGES, edited);
    let (code, log) = run(&config, &[]);
    assert_eq!(code, Some(0), "{log}");
    let (requests, texts) = proxy.seen.take();
    let changed = (0..PAGES).filter(|&i| edited(i)).count() as u64;
    println!(
        "first sync: {first_requests} requests, {first_texts} texts; after a 1% edit: {requests} requests ({:.3}x), {texts} texts ({:.4}x)",
        requests as f64 / first_requests as f64,
        texts as f64 / first_texts as f64
    );
    assert_eq!(texts, changed, "only the changed chunks: {log}");
    assert!(
        texts as f64 <= 0.05 * first_texts as f64,
        "{texts} texts after the edit, {first_texts} for the first sync"
    );
    // Each request carries at least one changed chunk: at most one per
    // edited page, however the workers batch them (their batches hold
    // whole pages; ones without a miss send nothing).
    assert!(
        (1..=changed).contains(&requests),
        "{requests} requests after the edit, {first_requests} for the first sync"
    );

    // Every page sent again (`--full`): every chunk is found, none is sent.
    let started = std::time::Instant::now();
    let (code, log) = run(&config, &["--full"]);
    println!(
        "wall: first sync {:.2} s; full sync of the same pages from the cache {:.2} s",
        first_wall.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    assert_eq!(code, Some(0), "{log}");
    assert_eq!(proxy.seen.take(), (0, 0), "a full sync pays nothing: {log}");
}

#[test]
fn the_bound_evicts_and_a_broken_cache_file_only_costs_the_embeddings() {
    let dir = tempfile::tempdir().expect("dir");
    let proxy = Proxy::start();
    let pages = 40;
    write_pages(&dir.path().join("pages.jsonl"), pages, |_| false);
    let all = (pages * CHUNKS) as u64;
    let cache = dir.path().join("weir-cache.sqlite");

    // Kept to 50 entries: the least recently used go, and a second full
    // sync embeds again what went.
    let config = config(dir.path(), &proxy, "[cache]\nmax_entries = 50\n");
    let (code, log) = run(&config, &[]);
    assert_eq!(code, Some(0), "{log}");
    assert_eq!(proxy.seen.take().1, all);
    assert_eq!(entries(&cache), 50, "held to its bound");
    let (code, log) = run(&config, &["--full"]);
    assert_eq!(code, Some(0), "{log}");
    let (_, texts) = proxy.seen.take();
    assert!(
        (all - 50..=all).contains(&texts),
        "{texts} of {all} embedded again: those evicted"
    );
    assert_eq!(entries(&cache), 50);

    // A cache file that is no database: the run succeeds, every text is
    // embedded, and the log says why the cache was not used.
    std::fs::remove_file(&cache).expect("remove");
    let _ = std::fs::remove_file(dir.path().join("weir-cache.sqlite-wal"));
    let _ = std::fs::remove_file(dir.path().join("weir-cache.sqlite-shm"));
    std::fs::write(&cache, vec![b'x'; 16 << 10]).expect("garbage");
    let (code, log) = run(&config, &["--full"]);
    assert_eq!(code, Some(0), "{log}");
    assert_eq!(proxy.seen.take().1, all, "every text embedded: {log}");
    assert!(
        log.contains("the cache cannot be used") && log.contains("weir-cache.sqlite"),
        "{log}"
    );
    assert_eq!(
        std::fs::read(&cache).expect("cache"),
        vec![b'x'; 16 << 10],
        "a broken file is left as it was"
    );
}

/// A `weir serve` whose tenants `acme` and `zeta` may sync pages from
/// their folders and embed them through `proxy`.
fn serve(dir: &Path, proxy: &Proxy) -> crate::operations::Serve {
    use crate::operations::{ACME, ADMIN, ZETA, logged_address};
    let tenant = |name: &str| {
        let files = dir.join(name);
        std::fs::create_dir_all(&files).expect("tenant dir");
        write_pages(&files.join("pages.jsonl"), 20, |_| false);
        format!(
            r#"
[[tenants]]
name = "{name}"
token_env = "TEST_{upper}_TOKEN"
pipelines = ["{name}-pages"]
plugins = ["file_connector.wasm", "chunk_text.wasm", "embed_text.wasm", "nop_indexer.wasm"]
dirs = [{files:?}]
http = [{grant:?}]
"#,
            upper = name.to_uppercase(),
            files = files.display().to_string(),
            grant = weir_tests::authority(&proxy.url),
        )
    };
    let operator = format!(
        "[server]\naddr = \"127.0.0.1:0\"\ndata_dir = \"data\"\nplugin_dir = {plugins:?}\nadmin_token_env = \"TEST_ADMIN_TOKEN\"\n{acme}{zeta}",
        plugins = weir_tests::plugins_dir().display().to_string(),
        acme = tenant("acme"),
        zeta = tenant("zeta"),
    );
    std::fs::write(dir.join("operator.toml"), operator).expect("operator config");
    let log = dir.join("serve.log");
    let config = dir.join("operator.toml").display().to_string();
    let mut proc = weir_tests::Proc::start(
        "weir serve",
        Path::new(WEIR),
        &["serve", &config],
        &[
            ("TEST_ACME_TOKEN", ACME.into()),
            ("TEST_ZETA_TOKEN", ZETA.into()),
            ("TEST_ADMIN_TOKEN", ADMIN.into()),
        ],
        &log,
    );
    assert!(
        proc.wait_for_log(
            &log,
            "status page on http://",
            1,
            std::time::Duration::from_secs(60)
        ),
        "weir serve did not start:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let text = std::fs::read_to_string(&log).expect("log");
    let url = format!("http://{}", logged_address(&text, "status page on http://"));
    crate::operations::Serve { proc, url, log }
}

/// Tenant `name`'s run of its pages (with `more` at the end of its config).
fn tenant_run(dir: &Path, proxy: &Proxy, name: &str, more: &str) -> String {
    format!(
        r#"
[[connectors]]
name = "pages"
pipeline = "{name}-pages"
plugin = {{ path = "file_connector.wasm", config = {{ paths = ["/data/pages.jsonl"] }}, grants = {{ dirs = [{{ host = {files:?}, guest = "/data" }}] }} }}

[[pipelines]]
name = "{name}-pages"

[[pipelines.stages]]
name = "chunk"
plugin = {{ path = "chunk_text.wasm", config = {{ source = "text", by = "sentences", size = 2 }} }}

[[pipelines.stages]]
name = "embed"
when = {{ field = "parent_id", exists = true }}
plugin = {{ path = "embed_text.wasm", config = {{ url = "{url}", model = "wordllama", source = "text", dimensions = 256 }}, grants = {{ http = [{grant:?}] }} }}

[indexer]
plugin = {{ path = "nop_indexer.wasm" }}
{more}
"#,
        files = dir.join(name).display().to_string(),
        url = proxy.url,
        grant = weir_tests::authority(&proxy.url),
    )
}

#[test]
fn two_tenants_of_weir_serve_never_see_each_others_entries() {
    use crate::operations::{ACME, ADMIN, ZETA, request, value};
    let dir = tempfile::tempdir().expect("dir");
    let proxy = Proxy::start();
    let serve = serve(dir.path(), &proxy);
    let all = (20 * CHUNKS) as u64;
    let run = |token: &str, name: &str, more: &str| {
        let (status, run) = serve.submit(token, &tenant_run(dir.path(), &proxy, name, more));
        assert_eq!(status, 201, "{run}");
        let done = serve.ended(token, run["id"].as_str().expect("run id"));
        assert_eq!(done["status"], "success", "{done}");
        proxy.seen.take().1
    };
    // A tenant may not say where its cache is, nor keep more than the default.
    for (more, key) in [
        ("path = \"/tmp/x.sqlite\"", "cache.path"),
        ("max_mib = 999999", "cache.max_mib"),
    ] {
        let (status, refused) = serve.submit(
            ACME,
            &tenant_run(dir.path(), &proxy, "acme", &format!("[cache]\n{more}\n")),
        );
        assert_eq!(status, 403, "{refused}");
        assert!(refused.to_string().contains(key), "{refused}");
    }

    assert_eq!(run(ACME, "acme", ""), all, "acme's first run embeds all");
    assert_eq!(
        run(ZETA, "zeta", "[cache]\nmax_entries = 30\n"),
        all,
        "the same texts for zeta: acme's entries are not zeta's"
    );
    assert_eq!(run(ACME, "acme", ""), 0, "acme's own entries are found");
    let data = dir.path().join("data").join("cache");
    assert!(data.join("acme.sqlite").is_file() && data.join("zeta.sqlite").is_file());
    assert_eq!(entries(&data.join("acme.sqlite")), all);
    assert_eq!(entries(&data.join("zeta.sqlite")), 30, "zeta's own bound");

    let (status, metrics) = request("GET", &format!("{}/metrics", serve.url), Some(ADMIN), "");
    assert_eq!(status, 200);
    let text = metrics.as_str().expect("metrics are text").to_owned();
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned())))
        .expect("metrics parse");
    let hits = value(
        &scrape,
        "weir_cache_lookups_total",
        &[("tenant", "acme"), ("outcome", "hit")],
    );
    assert_eq!(hits, all as f64, "{text}");
    let evictions = value(
        &scrape,
        "weir_limit_hits_total",
        &[("tenant", "zeta"), ("limit", "cache_entries")],
    );
    assert!(evictions >= 1.0, "{text}");
}
