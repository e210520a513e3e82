//! solr-indexer: index into Apache Solr through its JSON update handler.
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;
mod sweep;
mod vectors;

use std::time::Duration;

use config::Config;
use weir_plugin::http::{HttpError, Request, Response, Url};
use weir_plugin::search;
use weir_plugin::sweep::{SOURCE_FIELD, SYNC_FIELD};
use weir_plugin::{
    BatchEntry, BatchError, BatchFormat, ConfigIssue, DocumentFailure, Indexer, PluginError,
    batch_error, issue,
};

struct Solr {
    config: Config,
    core: Url,
    update: Url,
    commit: Url,
    ping: Url,
    auth: Option<String>,
    /// Whether the schema has the sync stamp fields (see `sweep.rs`).
    stamps: bool,
}

/// Where the sweep fields start in `pick`: after `_deleted` and the
/// deletion field.
fn sweep_at(config: &Config) -> usize {
    1 + usize::from(config.deletion_field.is_some())
}

/// One command of an update request: its JSON (`"add": {...}` or
/// `"delete": {...}`, without braces around).
fn commands(config: &Config, entry: &BatchEntry) -> Result<Vec<String>, String> {
    let quoted = |s: &str| serde_json::Value::from(s).to_string();
    // Picked: `_deleted`, then the deletion field when there is one.
    if search::is_marker(entry.picked.first())
        || config.deletion_field.is_some()
            && search::marked(entry.picked.get(1), &config.deletion_value)
    {
        return Ok(vec![format!("\"delete\":{{\"id\":{}}}", quoted(&entry.id))]);
    }
    let json = entry.json.as_deref().ok_or("the host sent no JSON")?;
    search::check_vectors(&config.vectors, json)?;
    let shaped = search::shape(
        json,
        &entry.id,
        config.children,
        &config.children_field,
        &config.parent_field,
    )?;
    let mut out = vec![format!("\"add\":{{\"doc\":{}}}", shaped.parent)];
    out.extend(
        shaped
            .separate
            .iter()
            .map(|(_, _, child)| format!("\"add\":{{\"doc\":{child}}}")),
    );
    Ok(out)
}

/// Solr's error message in a response body, or the body's start.
fn solr_message(response: &Response) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_slice(&response.body).ok();
    parsed
        .as_ref()
        .and_then(|v| v.pointer("/error/msg"))
        .and_then(|m| m.as_str())
        .map(str::to_owned)
        .unwrap_or_else(|| response.text().chars().take(300).collect())
}

impl Solr {
    fn request(&self, request: Request) -> Request {
        let request = request.timeout(Duration::from_secs(self.config.timeout_secs));
        match &self.auth {
            Some(auth) => request.header("authorization", auth),
            None => request,
        }
    }

    /// Send the commands as one update request.
    fn send(&self, commands: &[&String]) -> Result<Response, BatchError> {
        let mut body =
            String::with_capacity(commands.iter().map(|c| c.len() + 1).sum::<usize>() + 2);
        body.push('{');
        for (i, command) in commands.iter().enumerate() {
            if i > 0 {
                body.push(',');
            }
            body.push_str(command);
        }
        body.push('}');
        let request = Request::post(&self.update)
            .header("content-type", "application/json")
            .body(body);
        match self.request(request).send() {
            Ok(response) => Ok(response),
            Err(e @ HttpError::Unreachable(_)) => Err(e.into()),
            Err(e) => Err(batch_error(e.to_string())),
        }
    }
}

/// A response other than 400 that is not a success, as a batch error.
fn refused(response: &Response) -> BatchError {
    BatchError {
        message: format!("update refused: {}", solr_message(response)),
        status: Some(response.status),
        connection_failed: false,
    }
}

impl Indexer for Solr {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        if let Err(e) = Url::parse_base(&config.url) {
            issues.push(issue("url", e));
        }
        if config.collection.is_empty() || config.collection.contains(['/', '?', '#']) {
            issues.push(issue("collection", "must be a core or collection name"));
        }
        if let Some(problem) = config.auth.problems() {
            issues.push(issue("auth", problem));
        }
        if config.auth.api_key_env.is_some() {
            issues.push(issue(
                "auth.api_key_env",
                "Solr takes basic auth: username_env and password_env",
            ));
        }
        if config.timeout_secs == 0 {
            issues.push(issue("timeout_secs", "must be at least 1"));
        }
        issues.extend(search::check_vector_fields(
            &config.vectors,
            vectors::MAX_DIMENSIONS,
        ));
        if config.rebuild.is_some() {
            issues.push(issue(
                weir_plugin::sweep::REBUILD_KEY,
                "solr-indexer cannot rebuild (`--rebuild`): swapping a collection alias needs \
                 SolrCloud's Collections API, not supported yet; run `--full` without `--rebuild` \
                 (a full sync removes what the source no longer holds)",
            ));
        }
        issues
    }

    fn start(config: Config) -> Result<Self, String> {
        let core = Url::parse_base(&config.url)?.join(&config.collection);
        let mut update = core.join("update?wt=json");
        if let Some(ms) = config.commit_within_ms {
            update.path.push_str(&format!("&commitWithin={ms}"));
        }
        let mut solr = Solr {
            auth: config.auth.header()?,
            commit: core.join("update?wt=json&commit=true"),
            ping: core.join("admin/ping?wt=json"),
            update,
            core,
            config,
            stamps: true,
        };
        // Before the batch format: documents carry the stamps only when
        // the schema takes them. A short wait: Solr unreachable is said by
        // `validate_connection`.
        let timeout = solr.config.timeout_secs;
        solr.config.timeout_secs = timeout.min(5);
        solr.stamps = solr.set_up_stamps().unwrap_or(true);
        solr.config.timeout_secs = timeout;
        Ok(solr)
    }

    fn batch_format(&self) -> BatchFormat {
        let mut omit = vec!["run_id".to_owned()];
        omit.extend(self.config.omit.iter().cloned());
        if !self.stamps {
            omit.extend([SOURCE_FIELD.to_owned(), SYNC_FIELD.to_owned()]);
        }
        BatchFormat {
            json: true,
            fields: None,
            omit,
            pick: std::iter::once(weir_plugin::DELETED_FIELD.to_owned())
                .chain(self.config.deletion_field.iter().cloned())
                .chain(weir_plugin::sweep::picks())
                .collect(),
        }
    }

    fn validate_connection(&mut self) -> Result<(), PluginError> {
        let response = self
            .request(Request::get(&self.ping))
            .send()
            .map_err(|e| PluginError::Fatal(format!("cannot reach Solr: {e}")))?;
        match response.status {
            200..=299 => self.set_up_vectors(&self.core),
            401 | 403 => Err(PluginError::Fatal(format!(
                "Solr at {} refused the credentials (status {}): check `auth` and the granted environment",
                self.ping, response.status
            ))),
            404 => Err(PluginError::Fatal(format!(
                "Solr has no core or collection `{}` ({} answered 404)",
                self.config.collection, self.ping
            ))),
            status => Err(PluginError::Fatal(format!(
                "Solr at {} answered status {status}: {}",
                self.ping,
                solr_message(&response)
            ))),
        }
    }

    /// The entries up to each sweep marker in one update request, then the
    /// sweep, then the rest.
    fn index_batch(&mut self, batch: Vec<BatchEntry>) -> Result<Vec<DocumentFailure>, BatchError> {
        let mut failures = Vec::new();
        let mut start = 0;
        let at = sweep_at(&self.config);
        for (index, entry) in batch.iter().enumerate() {
            let Some(sweep) = weir_plugin::sweep::sweep_of(&entry.id, &entry.picked, at) else {
                continue;
            };
            failures.extend(self.update(&batch[start..index], start)?);
            let swept = sweep
                .map_err(|m| weir_plugin::failure(index, m))
                .and_then(|sweep| self.sweep(&sweep).map_err(|e| e.failure(index)));
            failures.extend(swept.err());
            start = index + 1;
        }
        failures.extend(self.update(&batch[start..], start)?);
        Ok(failures)
    }

    fn close(&mut self) -> Result<(), PluginError> {
        if !self.config.commit_on_close {
            return Ok(());
        }
        let response = self
            .request(
                Request::post(&self.commit)
                    .header("content-type", "application/json")
                    .body("{}"),
            )
            .send()
            .map_err(|e| PluginError::Document(format!("commit failed: {e}")))?;
        if response.ok() {
            Ok(())
        } else {
            Err(PluginError::Document(format!(
                "commit refused (status {}): {}",
                response.status,
                solr_message(&response)
            )))
        }
    }
}

impl Solr {
    /// One update request for `batch`, whose first entry is entry `offset`
    /// of the whole batch.
    fn update(
        &self,
        batch: &[BatchEntry],
        offset: usize,
    ) -> Result<Vec<DocumentFailure>, BatchError> {
        let mut failures = Vec::new();
        // Each entry's commands, or none when it failed to shape.
        let mut per_entry: Vec<(usize, Vec<String>)> = Vec::with_capacity(batch.len());
        for (index, entry) in batch.iter().enumerate() {
            let index = offset + index;
            match commands(&self.config, entry) {
                Ok(commands) => per_entry.push((index, commands)),
                Err(message) => failures.push(weir_plugin::failure(index, message)),
            }
        }
        if per_entry.is_empty() {
            return Ok(failures);
        }
        let all: Vec<&String> = per_entry.iter().flat_map(|(_, c)| c).collect();
        let response = self.send(&all)?;
        if response.ok() {
            return Ok(failures);
        }
        if response.status != 400 {
            return Err(refused(&response));
        }
        if per_entry.len() == 1 {
            failures.push(DocumentFailure {
                status: Some(400),
                ..weir_plugin::failure(per_entry[0].0, solr_message(&response))
            });
            return Ok(failures);
        }
        // Solr stopped at a bad document: find which, one by one, in order.
        for (index, commands) in &per_entry {
            let response = self.send(&commands.iter().collect::<Vec<_>>())?;
            match response.status {
                200..=299 => {}
                400 => failures.push(DocumentFailure {
                    status: Some(400),
                    ..weir_plugin::failure(*index, solr_message(&response))
                }),
                _ => return Err(refused(&response)),
            }
        }
        failures.sort_by_key(|f| f.index);
        Ok(failures)
    }
}

weir_plugin::export_indexer!(Solr);
