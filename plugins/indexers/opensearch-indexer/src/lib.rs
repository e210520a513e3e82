//! opensearch-indexer: index into OpenSearch or Elasticsearch through the
//! `_bulk` API.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;
mod rebuild;
mod sweep;
mod vectors;

use std::time::Duration;

use config::{Config, Refresh, VersionType};
use serde_json::Value as Json;
use weir_plugin::http::{HttpError, Request, Url};
use weir_plugin::search;
use weir_plugin::{
    BatchEntry, BatchError, BatchFormat, ConfigIssue, DocumentFailure, Indexer, PluginError,
    batch_error, issue,
};

struct OpenSearch {
    config: Config,
    /// Where documents without `index_field` go: `index`, or the new index
    /// of a rebuild.
    default_index: Option<String>,
    /// With `index_field`: the indices documents went to since start, where
    /// a sweep looks.
    written: std::collections::BTreeSet<String>,
    bulk: Url,
    root: Url,
    auth: Option<String>,
    /// Where each steering field's values are in `batch-entry.picked`.
    picks: Picks,
    /// The request body, reused between batches.
    body: Vec<u8>,
}

#[derive(Default)]
struct Picks {
    index: Option<usize>,
    routing: Option<usize>,
    version: Option<usize>,
    deletion: Option<usize>,
    /// Where `_deleted`, the mark of a deletion marker, is.
    marker: usize,
    /// Where the sweep fields start.
    sweep: usize,
    names: Vec<String>,
}

impl Picks {
    fn new(config: &Config) -> Picks {
        let mut picks = Picks::default();
        let mut add = |field: &Option<String>| {
            field.as_ref().map(|name| {
                picks.names.push(name.clone());
                picks.names.len() - 1
            })
        };
        let index = add(&config.index_field);
        let routing = add(&config.routing_field);
        let version = add(&config.version_field);
        let deletion = add(&config.deletion_field);
        let marker = add(&Some(weir_plugin::DELETED_FIELD.to_owned())).unwrap_or_default();
        let sweep = picks.names.len();
        picks.names.extend(weir_plugin::sweep::picks());
        Picks {
            index,
            routing,
            version,
            deletion,
            marker,
            sweep,
            ..picks
        }
    }
}

/// One bulk action's metadata.
struct Action<'a> {
    index: &'a str,
    id: &'a str,
    routing: Option<&'a str>,
    version: Option<i64>,
}

impl OpenSearch {
    fn write_action(&mut self, verb: &str, action: &Action) {
        let mut meta = serde_json::Map::new();
        meta.insert("_index".into(), action.index.into());
        meta.insert("_id".into(), action.id.into());
        if let Some(routing) = action.routing {
            meta.insert("routing".into(), routing.into());
        }
        if let Some(version) = action.version {
            meta.insert("version".into(), version.into());
            let kind = match self.config.version_type {
                VersionType::External => "external",
                VersionType::ExternalGte => "external_gte",
            };
            meta.insert("version_type".into(), kind.into());
        }
        let line = Json::Object(
            [(verb.to_owned(), Json::Object(meta))]
                .into_iter()
                .collect(),
        );
        // Serializing a Value into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut self.body, &line);
        self.body.push(b'\n');
    }

    /// Append the bulk lines of `entry` (one action, more for separate
    /// children); returns how many actions, or why the entry cannot go.
    fn add_entry(&mut self, entry: &BatchEntry) -> Result<usize, String> {
        let first = |at: Option<usize>| -> Option<&str> {
            at.and_then(|i| entry.picked.get(i))
                .and_then(|values| values.first())
                .map(String::as_str)
                .filter(|v| !v.is_empty())
        };
        let index = first(self.picks.index)
            .or(self.default_index.as_deref())
            .ok_or_else(|| {
                format!(
                    "no index: `{}` is empty or missing and no default `index` is set",
                    self.config.index_field.as_deref().unwrap_or_default()
                )
            })?
            .to_owned();
        let routing = first(self.picks.routing).map(str::to_owned);
        let version = match first(self.picks.version) {
            None if self.picks.version.is_some() => {
                return Err(format!(
                    "the version field `{}` is missing",
                    self.config.version_field.as_deref().unwrap_or_default()
                ));
            }
            None => None,
            Some(text) => Some(
                text.trim()
                    .parse::<i64>()
                    .ok()
                    .filter(|v| *v >= 0)
                    .ok_or_else(|| {
                        format!("version `{text}` is not a whole number of at least 0")
                    })?,
            ),
        };
        let deleted = search::is_marker(entry.picked.get(self.picks.marker))
            || self.picks.deletion.is_some_and(|at| {
                search::marked(entry.picked.get(at), &self.config.deletion_value)
            });
        let action = Action {
            index: &index,
            id: &entry.id,
            routing: routing.as_deref(),
            version,
        };
        if deleted {
            self.write_action("delete", &action);
            return Ok(1);
        }
        let json = entry.json.as_deref().ok_or("the host sent no JSON")?;
        search::check_vectors(&self.config.vectors, json)?;
        let shaped = search::shape(
            json,
            &entry.id,
            self.config.children,
            &self.config.children_field,
            &self.config.parent_field,
        )?;
        if self.config.index_field.is_some() && !self.written.contains(&index) {
            self.written.insert(index.clone());
        }
        self.write_action("index", &action);
        self.body.extend_from_slice(shaped.parent.as_bytes());
        self.body.push(b'\n');
        for (id, _, child) in &shaped.separate {
            // Children live beside their parent's shard.
            let action = Action {
                index: &index,
                id,
                routing: routing.as_deref().or(Some(&entry.id)),
                version,
            };
            self.write_action("index", &action);
            self.body.extend_from_slice(child.as_bytes());
            self.body.push(b'\n');
        }
        Ok(1 + shaped.separate.len())
    }

    fn request(&self, request: Request) -> Request {
        let request = request.timeout(Duration::from_secs(self.config.timeout_secs));
        match &self.auth {
            Some(auth) => request.header("authorization", auth),
            None => request,
        }
    }
}

#[derive(serde::Deserialize)]
struct BulkResponse {
    errors: bool,
    #[serde(default)]
    items: Vec<std::collections::BTreeMap<String, BulkItem>>,
}

#[derive(serde::Deserialize)]
struct BulkItem {
    status: u16,
    error: Option<Json>,
}

/// An item error as one line: `type: reason` (and the cause's reason).
fn describe(error: &Json) -> String {
    let text = |v: &Json, key: &str| v.get(key).and_then(Json::as_str).map(str::to_owned);
    let mut message = match (text(error, "type"), text(error, "reason")) {
        (Some(t), Some(r)) => format!("{t}: {r}"),
        (Some(t), None) => t,
        (None, Some(r)) => r,
        (None, None) => error.to_string(),
    };
    if let Some(cause) = error.get("caused_by").and_then(|c| text(c, "reason")) {
        message.push_str(&format!(" ({cause})"));
    }
    message
}

/// The start of a response body, for messages.
fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut cut: String = text.chars().take(300).collect();
    if cut.len() < text.len() {
        cut.push_str("...");
    }
    cut
}

impl Indexer for OpenSearch {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        if let Err(e) = Url::parse_base(&config.url) {
            issues.push(issue("url", e));
        }
        if config.index.is_none() && config.index_field.is_none() {
            issues.push(issue("index", "set `index`, `index_field`, or both"));
        }
        if let Some(problem) = config.auth.problems() {
            issues.push(issue("auth", problem));
        }
        if config.timeout_secs == 0 {
            issues.push(issue("timeout_secs", "must be at least 1"));
        }
        issues.extend(search::check_vector_fields(
            &config.vectors,
            vectors::MAX_DIMENSIONS,
        ));
        if !config.vectors.is_empty() && config.index.is_none() {
            issues.push(issue(
                "vectors",
                "needs `index`: the index whose mapping gets the vector fields",
            ));
        }
        issues.extend(rebuild::check(config));
        issues
    }

    fn start(config: Config) -> Result<Self, String> {
        let root = Url::parse_base(&config.url)?;
        let mut bulk = root.join("_bulk");
        if let Some(refresh) = config.refresh {
            let value = match refresh {
                Refresh::True => "true",
                Refresh::WaitFor => "wait_for",
                Refresh::False => "false",
            };
            bulk.path.push_str(&format!("?refresh={value}"));
        }
        let auth = config.auth.header()?;
        Ok(OpenSearch {
            default_index: rebuild::new_index(&config).or_else(|| config.index.clone()),
            written: Default::default(),
            picks: Picks::new(&config),
            config,
            bulk,
            root,
            auth,
            body: Vec::new(),
        })
    }

    fn batch_format(&self) -> BatchFormat {
        let mut omit = vec!["run_id".to_owned()];
        omit.extend(self.config.index_field.iter().cloned());
        omit.extend(self.config.omit.iter().cloned());
        BatchFormat {
            json: true,
            fields: None,
            omit,
            pick: self.picks.names.clone(),
        }
    }

    fn validate_connection(&mut self) -> Result<(), PluginError> {
        let response = self
            .request(Request::get(&self.root))
            .send()
            .map_err(|e| PluginError::Fatal(format!("cannot reach the cluster: {e}")))?;
        match response.status {
            200..=299 => self
                .prepare_rebuild()
                .and_then(|()| self.set_up_vectors())
                .map(|()| self.set_up_stamps())
                .map_err(PluginError::Fatal),
            401 | 403 => Err(PluginError::Fatal(format!(
                "the cluster at {} refused the credentials (status {}): check `auth` and the granted environment",
                self.root, response.status
            ))),
            status => Err(PluginError::Fatal(format!(
                "the cluster at {} answered status {status}: {}",
                self.root,
                excerpt(&response.body)
            ))),
        }
    }

    /// The entries up to each sweep marker in one bulk request, then the
    /// sweep, then the rest.
    fn index_batch(&mut self, batch: Vec<BatchEntry>) -> Result<Vec<DocumentFailure>, BatchError> {
        let mut failures = Vec::new();
        let mut start = 0;
        for (at, entry) in batch.iter().enumerate() {
            let Some(sweep) =
                weir_plugin::sweep::sweep_of(&entry.id, &entry.picked, self.picks.sweep)
            else {
                continue;
            };
            failures.extend(self.send_bulk(&batch[start..at], start)?);
            if let Err(failure) = sweep
                .map_err(|m| weir_plugin::failure(at, m))
                .and_then(|sweep| self.sweep(&sweep).map_err(|e| e.failure(at)))
            {
                failures.push(failure);
            }
            start = at + 1;
        }
        failures.extend(self.send_bulk(&batch[start..], start)?);
        Ok(failures)
    }
}

impl OpenSearch {
    /// One bulk request for `batch`, whose first entry is entry `offset` of
    /// the whole batch.
    fn send_bulk(
        &mut self,
        batch: &[BatchEntry],
        offset: usize,
    ) -> Result<Vec<DocumentFailure>, BatchError> {
        self.body.clear();
        let mut failures = Vec::new();
        // The entry each bulk action belongs to.
        let mut owners = Vec::with_capacity(batch.len());
        for (index, entry) in batch.iter().enumerate() {
            let index = offset + index;
            let mark = self.body.len();
            match self.add_entry(entry) {
                Ok(actions) => owners.extend(std::iter::repeat_n(index, actions)),
                Err(message) => {
                    self.body.truncate(mark);
                    failures.push(weir_plugin::failure(index, message));
                }
            }
        }
        if owners.is_empty() {
            return Ok(failures);
        }
        let request = Request::post(&self.bulk)
            .header("content-type", "application/x-ndjson")
            .body(std::mem::take(&mut self.body));
        let response = self.request(request).send();
        let response = match response {
            Ok(r) => r,
            Err(e @ HttpError::Unreachable(_)) => return Err(e.into()),
            Err(e) => return Err(batch_error(e.to_string())),
        };
        if !response.ok() {
            let hint = if response.status == 413 {
                " (the request is too large: lower indexer.batch_max_bytes or batch_size)"
            } else {
                ""
            };
            return Err(BatchError {
                message: format!("bulk request refused{hint}: {}", excerpt(&response.body)),
                status: Some(response.status),
                connection_failed: false,
            });
        }
        let parsed: BulkResponse = serde_json::from_slice(&response.body).map_err(|e| {
            batch_error(format!(
                "unreadable bulk response ({e}): {}",
                excerpt(&response.body)
            ))
        })?;
        if !parsed.errors {
            return Ok(failures);
        }
        if parsed.items.len() != owners.len() {
            return Err(batch_error(format!(
                "the bulk response has {} items for {} actions",
                parsed.items.len(),
                owners.len()
            )));
        }
        let versioned = self.config.version_field.is_some();
        let mut failed = vec![false; offset + batch.len()];
        for (item, &owner) in parsed.items.iter().zip(&owners) {
            let Some(result) = item.values().next() else {
                continue;
            };
            let Some(error) = &result.error else {
                continue;
            };
            // With external versions, a conflict means the cluster holds
            // this version or a newer one: nothing to do.
            if result.status == 409 && versioned {
                continue;
            }
            // A delete of something absent is done.
            if result.status == 404 && item.contains_key("delete") {
                continue;
            }
            if !std::mem::replace(&mut failed[owner], true) {
                failures.push(DocumentFailure {
                    status: Some(result.status),
                    ..weir_plugin::failure(owner, describe(error))
                });
            }
        }
        Ok(failures)
    }
}

weir_plugin::export_indexer!(OpenSearch);
