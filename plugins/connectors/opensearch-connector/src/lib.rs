//! opensearch-connector: read the documents of an OpenSearch (or
//! Elasticsearch) index.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use std::time::Duration;

use config::{Config, Flavor};
use serde_json::Value as Json;
use serde_json::value::RawValue;
use weir_plugin::http::{Request, Response, Url};
use weir_plugin::{ConfigIssue, Connector, Document, PluginError, Publisher, issue};

struct Reader {
    config: Config,
    root: Url,
    auth: Option<String>,
    /// The point in time, while one is open.
    pit: Option<String>,
}

#[derive(serde::Deserialize)]
struct Page<'a> {
    #[serde(borrow)]
    hits: Hits<'a>,
    pit_id: Option<String>,
}

#[derive(serde::Deserialize)]
struct Hits<'a> {
    #[serde(borrow)]
    hits: Vec<Hit<'a>>,
}

#[derive(serde::Deserialize)]
struct Hit<'a> {
    #[serde(rename = "_id")]
    id: String,
    #[serde(rename = "_source", borrow)]
    source: Option<&'a RawValue>,
    #[serde(default)]
    sort: Json,
}

fn fatal(message: impl Into<String>) -> PluginError {
    PluginError::Fatal(message.into())
}

/// Whether a failed request is worth trying again later.
fn transient(status: u16) -> bool {
    matches!(status, 429 | 502 | 503 | 504)
}

impl Reader {
    /// A total order, so that `search_after` visits every document once.
    fn sort(&self) -> Json {
        match (&self.config.sort, self.config.flavor) {
            (Some(sort), _) => sort.clone(),
            (None, Flavor::Opensearch) => serde_json::json!([{ "_id": "asc" }]),
            (None, Flavor::Elasticsearch) => serde_json::json!([{ "_shard_doc": "asc" }]),
        }
    }

    fn call(&self, method: &str, url: &Url, body: Option<String>) -> Result<Response, PluginError> {
        let mut request =
            Request::new(method, url).timeout(Duration::from_secs(self.config.timeout_secs));
        if let Some(auth) = &self.auth {
            request = request.header("authorization", auth);
        }
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body);
        }
        let response = request
            .send()
            .map_err(|e| PluginError::Transient(format!("{method} {url}: {e}")))?;
        if response.ok() {
            return Ok(response);
        }
        let message = format!(
            "{method} {url} answered status {}: {}",
            response.status,
            response.text().chars().take(300).collect::<String>()
        );
        Err(if transient(response.status) {
            PluginError::Transient(message)
        } else {
            fatal(message)
        })
    }

    fn open_pit(&self) -> Result<String, PluginError> {
        let keep_alive = &self.config.keep_alive;
        let (path, key) = match self.config.flavor {
            Flavor::Opensearch => (
                format!(
                    "{}/_search/point_in_time?keep_alive={keep_alive}",
                    self.config.index
                ),
                "pit_id",
            ),
            Flavor::Elasticsearch => (
                format!("{}/_pit?keep_alive={keep_alive}", self.config.index),
                "id",
            ),
        };
        let response = self.call("POST", &self.root.join(&path), None)?;
        let answer: Json = serde_json::from_slice(&response.body)
            .map_err(|e| fatal(format!("unreadable point-in-time answer: {e}")))?;
        answer
            .get(key)
            .and_then(Json::as_str)
            .map(str::to_owned)
            .ok_or_else(|| fatal(format!("no `{key}` in the point-in-time answer: {answer}")))
    }

    fn close_pit(&mut self) -> Result<(), PluginError> {
        let Some(pit) = self.pit.take() else {
            return Ok(());
        };
        let (path, body) = match self.config.flavor {
            Flavor::Opensearch => (
                "_search/point_in_time",
                serde_json::json!({ "pit_id": [pit] }),
            ),
            Flavor::Elasticsearch => ("_pit", serde_json::json!({ "id": pit })),
        };
        self.call("DELETE", &self.root.join(path), Some(body.to_string()))
            .map(drop)
    }
}

impl Connector for Reader {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        if let Err(e) = Url::parse_base(&config.url) {
            issues.push(issue("url", e));
        }
        if config.index.is_empty() || config.index.contains(['/', '?', '#', ' ']) {
            issues.push(issue(
                "index",
                "must be an index name, pattern or comma-separated list",
            ));
        }
        if !config.query.is_object() {
            issues.push(issue(
                "query",
                "must be a query DSL object, e.g. { match_all = {} }",
            ));
        }
        if config.sort.as_ref().is_some_and(|s| !s.is_array()) {
            issues.push(issue(
                "sort",
                "must be an array of sort clauses, e.g. [{ uid = \"asc\" }]",
            ));
        }
        if !(1..=10_000).contains(&config.page_size) {
            issues.push(issue("page_size", "must be 1 to 10,000"));
        }
        if let Some(problem) = config.auth.problems() {
            issues.push(issue("auth", problem));
        }
        if config.timeout_secs == 0 {
            issues.push(issue("timeout_secs", "must be at least 1"));
        }
        // It goes into a URL's query: a number and a unit, nothing else.
        let (number, unit) = config.keep_alive.split_at(
            config
                .keep_alive
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(0),
        );
        if !(1..=9).contains(&number.len()) || !["d", "h", "m", "s", "ms"].contains(&unit) {
            issues.push(issue(
                "keep_alive",
                "must be a number and a unit (d, h, m, s or ms), e.g. \"5m\"",
            ));
        }
        issues
    }

    fn pre_execute(config: Config, _run_id: &str) -> Result<Self, PluginError> {
        Ok(Reader {
            root: Url::parse_base(&config.url).map_err(fatal)?,
            auth: config.auth.header().map_err(fatal)?,
            config,
            pit: None,
        })
    }

    fn execute(&mut self, publisher: &Publisher) -> Result<(), PluginError> {
        self.pit = Some(self.open_pit()?);
        let search = self.root.join("_search");
        let mut after: Option<Json> = None;
        loop {
            let mut body = serde_json::json!({
                "size": self.config.page_size,
                "query": self.config.query,
                "pit": { "id": self.pit, "keep_alive": self.config.keep_alive },
                "sort": self.sort(),
                "track_total_hits": false,
            });
            if let Some(after) = &after {
                body["search_after"] = after.clone();
            }
            let response = self.call("POST", &search, Some(body.to_string()))?;
            let page: Page = serde_json::from_slice(&response.body)
                .map_err(|e| fatal(format!("unreadable search answer: {e}")))?;
            if let Some(pit) = page.pit_id {
                self.pit = Some(pit);
            }
            let Some(last) = page.hits.hits.last() else {
                return Ok(());
            };
            after = Some(last.sort.clone());
            let full = page.hits.hits.len() == self.config.page_size as usize;
            for hit in page.hits.hits {
                let source = hit.source.map_or("{}", RawValue::get);
                let doc = Document::from_json_with_id(&hit.id, source).map_err(|e| {
                    fatal(format!(
                        "hit `{}`: {}",
                        hit.id,
                        weir_plugin::field_error_message(&e)
                    ))
                })?;
                publisher.publish(doc).map_err(fatal)?;
            }
            if !full {
                return Ok(());
            }
        }
    }

    fn close(&mut self) -> Result<(), PluginError> {
        // A point in time left open holds the cluster's resources until
        // its keep-alive runs out: release it, successful run or not.
        self.close_pit()
    }
}

weir_plugin::export_connector!(Reader);
