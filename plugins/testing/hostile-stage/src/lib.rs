//! hostile-stage: misbehaves on request, to test the sandbox.
//!
//! The document's `action` field says what to do:
//! - `ok` (mark it processed), `fail` (document error), `fatal`, `panic`,
//!   `transient` (a transient error: the first `count` calls for this id,
//!   or every call without `count`; then `ok`), `panic_once` (panic on
//!   the first call for this id, then `ok`);
//! - CPU and memory: `loop` (spin forever), `spin` (busy-wait `millis` ms),
//!   `alloc` (grow memory without end), `recurse` (recurse without end);
//! - time blocked in the host: `sleep` (WASI sleep of `millis` ms), `http`
//!   (GET `url`), `http_follow` (GET `url`, following one redirect);
//! - reach: `read` (read the file at `path`), `write` (create the file at
//!   `path`), `env` (read variable `name`);
//! - documents: `children` (make `count` children), `big_field` (set one
//!   field of `mib` MiB), `grow` (set `count` fields of 1 MiB each),
//!   `deep_path` (set a path `depth` steps deep), `deep_children` (nest a
//!   chain of `depth` documents), `index` (set `a[<index>]`),
//!   `copy_children` (copy the document's children `count` times and keep
//!   the copies), `hoard` (create `count` documents and keep them across
//!   documents), `hoard_big` (keep `count` documents of `mib` MiB each),
//!   `json_bomb` (set a field to `mib` MiB of JSON text `[0,0,...]`),
//!   `deep_json` (set a field to JSON text of arrays nested `depth` deep),
//!   `spoof_run_id` (return a child and nest one, both built from JSON
//!   claiming `run_id` "other-run"), `count` (set `calls` to how many
//!   documents this instance has seen: state that a fresh instance per
//!   document resets);
//! - host resources: `log_flood` (write `count` lines through the log
//!   interface and as many to stdout), `big_log` (log one line of `mib`
//!   MiB), `headers` (open `count` HTTP header collections of 60 KB each
//!   and keep them).
//!
//! Config: `{ "fail_start": true }` makes `start` fail; `{ "delay_us": n }`
//! busy-waits n microseconds per document; `check_sleep_ms`,
//! `start_sleep_ms` and `stop_sleep_ms` sleep (WASI) in those calls.

use std::time::{Duration, Instant};

use weir_plugin::{Document, PluginError, Stage, Value, doc_error};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    fail_start: bool,
    /// Busy-wait this many microseconds on every document (a slow stage).
    #[serde(default)]
    delay_us: u64,
    #[serde(default)]
    check_sleep_ms: u64,
    #[serde(default)]
    start_sleep_ms: u64,
    #[serde(default)]
    stop_sleep_ms: u64,
}

struct Hostile {
    delay: Duration,
    stop_sleep: Duration,
    calls: i64,
    hoard: Vec<Document>,
    headers: Vec<wasi::http::types::Fields>,
    /// Calls per document id, for `transient`.
    calls_by_id: std::collections::HashMap<String, u32>,
}

impl Hostile {
    /// This call's number among the calls for `id` (from 1).
    fn calls_for(&mut self, id: String) -> u32 {
        let calls = self.calls_by_id.entry(id).or_default();
        *calls += 1;
        *calls
    }
}

fn number(doc: &Document, name: &str) -> Result<usize, PluginError> {
    field(doc, name)?
        .parse()
        .map_err(|e| PluginError::Document(format!("`{name}`: {e}")))
}

fn field(doc: &Document, name: &str) -> Result<String, PluginError> {
    doc.get_string(name)
        .ok_or_else(|| PluginError::Document(format!("`{name}` is missing")))
}

#[inline(never)]
#[allow(unconditional_recursion)]
fn recurse(depth: u64, sink: &mut [u64; 16]) -> u64 {
    sink[(depth % 16) as usize] = depth;
    std::hint::black_box(recurse(depth + 1, sink)) + sink[0]
}

fn http_get(url: &str) -> Result<(u16, Option<String>), String> {
    use wasi::http::outgoing_handler;
    use wasi::http::types::{Fields, Method, OutgoingRequest, Scheme};

    let rest = url
        .strip_prefix("http://")
        .ok_or("only http:// URLs are supported here")?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let request = OutgoingRequest::new(Fields::new());
    request
        .set_method(&Method::Get)
        .map_err(|()| "bad method")?;
    request
        .set_scheme(Some(&Scheme::Http))
        .map_err(|()| "bad scheme")?;
    request
        .set_authority(Some(authority))
        .map_err(|()| "bad authority")?;
    request
        .set_path_with_query(Some(path))
        .map_err(|()| "bad path")?;
    let response = outgoing_handler::handle(request, None).map_err(|e| format!("{e:?}"))?;
    response.subscribe().block();
    match response.get() {
        Some(Ok(Ok(resp))) => {
            let location = resp
                .headers()
                .get("location")
                .first()
                .map(|v| String::from_utf8_lossy(v).into_owned());
            Ok((resp.status(), location))
        }
        Some(Ok(Err(code))) => Err(format!("{code:?}")),
        Some(Err(())) => Err("response already taken".into()),
        None => Err("no response".into()),
    }
}

impl Stage for Hostile {
    type Config = Config;

    fn check(config: &Config) -> Vec<weir_plugin::ConfigIssue> {
        std::thread::sleep(Duration::from_millis(config.check_sleep_ms));
        Vec::new()
    }

    fn start(config: Config) -> Result<Self, String> {
        if config.fail_start {
            return Err("configured to fail at start".into());
        }
        std::thread::sleep(Duration::from_millis(config.start_sleep_ms));
        Ok(Hostile {
            delay: Duration::from_micros(config.delay_us),
            stop_sleep: Duration::from_millis(config.stop_sleep_ms),
            calls: 0,
            hoard: Vec::new(),
            headers: Vec::new(),
            calls_by_id: Default::default(),
        })
    }

    fn stop(&mut self) -> Result<(), PluginError> {
        std::thread::sleep(self.stop_sleep);
        Ok(())
    }

    fn process(&mut self, doc: &Document) -> Result<Vec<Document>, PluginError> {
        let start = Instant::now();
        while start.elapsed() < self.delay {
            std::hint::black_box(());
        }
        let action = doc.get_string("action").unwrap_or_else(|| "ok".into());
        match action.as_str() {
            "ok" => doc
                .set("processed", &Value::Boolean(true))
                .map_err(doc_error)?,
            "loop" => loop {
                std::hint::black_box(());
            },
            "spin" => {
                let millis: u64 = field(doc, "millis")?.parse().unwrap_or(0);
                let start = Instant::now();
                while start.elapsed() < Duration::from_millis(millis) {
                    std::hint::black_box(());
                }
                doc.set("processed", &Value::Boolean(true))
                    .map_err(doc_error)?;
            }
            "alloc" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "recurse" => {
                let mut sink = [0u64; 16];
                std::hint::black_box(recurse(0, &mut sink));
            }
            "panic" => panic!("hostile panic on {}", doc.id()),
            "read" => {
                let path = field(doc, "path")?;
                let content = std::fs::read_to_string(&path)
                    .map_err(|e| PluginError::Document(format!("cannot read {path}: {e}")))?;
                doc.set_string("content", &content).map_err(doc_error)?;
            }
            "write" => {
                let path = field(doc, "path")?;
                std::fs::write(&path, doc.id())
                    .map_err(|e| PluginError::Document(format!("cannot write {path}: {e}")))?;
                doc.set("processed", &Value::Boolean(true))
                    .map_err(doc_error)?;
            }
            "http" => {
                let url = field(doc, "url")?;
                let (status, _) = http_get(&url)
                    .map_err(|e| PluginError::Document(format!("GET {url} failed: {e}")))?;
                doc.set("status", &Value::Integer(status.into()))
                    .map_err(doc_error)?;
            }
            "env" => {
                let name = field(doc, "name")?;
                let value = std::env::var(&name)
                    .map_err(|e| PluginError::Document(format!("cannot read ${name}: {e}")))?;
                doc.set_string("value", &value).map_err(doc_error)?;
            }
            "http_follow" => {
                let url = field(doc, "url")?;
                let (status, location) = http_get(&url)
                    .map_err(|e| PluginError::Document(format!("GET {url} failed: {e}")))?;
                let status = match (status, location) {
                    (300..=399, Some(next)) => {
                        http_get(&next)
                            .map_err(|e| {
                                PluginError::Document(format!(
                                    "GET {next} (redirected) failed: {e}"
                                ))
                            })?
                            .0
                    }
                    (status, _) => status,
                };
                doc.set("status", &Value::Integer(status.into()))
                    .map_err(doc_error)?;
            }
            "big_field" => {
                let mib: usize = field(doc, "mib")?.parse().unwrap_or(1);
                let big = "x".repeat(mib << 20);
                doc.set_string("big", &big).map_err(doc_error)?;
            }
            "grow" => {
                let count: usize = field(doc, "count")?.parse().unwrap_or(1);
                let chunk = "y".repeat(1 << 20);
                for i in 0..count {
                    doc.set_string(&format!("chunk{i}"), &chunk)
                        .map_err(doc_error)?;
                }
            }
            "log_flood" => {
                let count: usize = field(doc, "count")?.parse().unwrap_or(1);
                for i in 0..count {
                    weir_plugin::log(weir_plugin::Level::Info, &format!("flood line {i}"));
                    println!("flood stdout line {i}");
                }
                doc.set("processed", &Value::Boolean(true))
                    .map_err(doc_error)?;
            }
            "hoard" => {
                let count: usize = field(doc, "count")?.parse().unwrap_or(0);
                self.hoard
                    .extend((0..count).map(|i| Document::new(&format!("kept-{i}"))));
                doc.set("processed", &Value::Boolean(true))
                    .map_err(doc_error)?;
            }
            "count" => {
                self.calls += 1;
                doc.set("calls", &Value::Integer(self.calls))
                    .map_err(doc_error)?;
            }
            "sleep" => {
                weir_plugin::info!("sleeping on {}", doc.id());
                std::thread::sleep(Duration::from_millis(number(doc, "millis")? as u64));
                doc.set("processed", &Value::Boolean(true))
                    .map_err(doc_error)?;
            }
            "deep_path" => {
                let path = vec!["a"; number(doc, "depth")?].join(".");
                doc.set_path(&path, &Value::Integer(1)).map_err(doc_error)?;
            }
            "deep_children" => {
                let mut chain = Document::new("leaf");
                for level in 0..number(doc, "depth")? {
                    let parent = Document::new(&format!("level-{level}"));
                    parent.add_child(chain).map_err(doc_error)?;
                    chain = parent;
                }
                doc.add_child(chain).map_err(doc_error)?;
            }
            "index" => {
                let index = field(doc, "index")?;
                doc.set_path(&format!("a[{index}]"), &Value::Null)
                    .map_err(doc_error)?;
            }
            "copy_children" => {
                for _ in 0..number(doc, "count")? {
                    self.hoard.extend(doc.children());
                }
                doc.set("processed", &Value::Boolean(true))
                    .map_err(doc_error)?;
            }
            "hoard_big" => {
                let big = "z".repeat(number(doc, "mib")? << 20);
                for i in 0..number(doc, "count")? {
                    let kept = Document::new(&format!("big-{i}"));
                    kept.set_string("big", &big).map_err(doc_error)?;
                    self.hoard.push(kept);
                }
                doc.set("processed", &Value::Boolean(true))
                    .map_err(doc_error)?;
            }
            "spoof_run_id" => {
                let spoof = |id: &str| {
                    Document::from_json(&format!(r#"{{"id":"{id}","run_id":"other-run"}}"#))
                        .map_err(doc_error)
                };
                doc.add_child(spoof("nested")?).map_err(doc_error)?;
                return Ok(vec![spoof("returned")?]);
            }
            "json_bomb" => {
                // `[0,0,...]`: two bytes of text per value, each far more
                // in memory once parsed.
                let n = number(doc, "mib")? << 19;
                let mut text = String::with_capacity(2 * n + 2);
                text.push('[');
                for i in 0..n {
                    text.push_str(if i == 0 { "0" } else { ",0" });
                }
                text.push(']');
                doc.set("bomb", &Value::Json(text)).map_err(doc_error)?;
            }
            "deep_json" => {
                let depth = number(doc, "depth")?;
                let text = format!("{}0{}", "[".repeat(depth), "]".repeat(depth));
                doc.set("deep", &Value::Json(text)).map_err(doc_error)?;
            }
            "big_log" => {
                let line = "L".repeat(number(doc, "mib")? << 20);
                weir_plugin::log(weir_plugin::Level::Info, &line);
                doc.set("processed", &Value::Boolean(true))
                    .map_err(doc_error)?;
            }
            "headers" => {
                let value = vec![b'h'; 60_000];
                for _ in 0..number(doc, "count")? {
                    let fields = wasi::http::types::Fields::new();
                    fields
                        .append("x-pad", &value)
                        .map_err(|e| PluginError::Document(format!("{e:?}")))?;
                    self.headers.push(fields);
                }
                doc.set("processed", &Value::Boolean(true))
                    .map_err(doc_error)?;
            }
            "fail" => return Err(PluginError::Document("asked to fail".into())),
            "huge_error" => {
                return Err(PluginError::Document("E".repeat(number(doc, "mib")? << 20)));
            }
            "transient" => {
                let calls = self.calls_for(doc.id());
                let limit = doc.get_string("count").and_then(|c| c.parse().ok());
                if limit.is_none_or(|limit| calls <= limit) {
                    return Err(PluginError::Transient(format!(
                        "service unavailable (call {calls})"
                    )));
                }
                doc.set_string("processed", "true").map_err(doc_error)?;
            }
            "panic_once" => {
                // Kept in the host across instances: a trap resets the guest.
                if !doc.has("panicked") {
                    doc.set_string("panicked", "true").map_err(doc_error)?;
                    panic!("hostile panic once on {}", doc.id());
                }
                doc.set_string("processed", "true").map_err(doc_error)?;
            }
            "fatal" => return Err(PluginError::Fatal("asked to stop the run".into())),
            "children" => {
                let count: usize = field(doc, "count")?.parse().unwrap_or(0);
                return Ok((0..count)
                    .map(|i| Document::new(&format!("{}-child-{i}", doc.id())))
                    .collect());
            }
            other => return Err(PluginError::Document(format!("unknown action `{other}`"))),
        }
        Ok(Vec::new())
    }
}

weir_plugin::export_stage!(Hostile);
