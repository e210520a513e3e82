//! solr-connector: read the documents of an Apache Solr core or collection
//! with cursor paging, keeping an index in step with it (changed documents,
//! deletes).
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;

use std::collections::HashSet;
use std::fmt::Write as _;
use std::time::Duration;

use config::Config;
use serde_json::value::RawValue;
use weir_plugin::http::{Request, Response, Retry, Url, send_with_retries};
use weir_plugin::{
    ConfigIssue, Connector, Document, PluginError, Publisher, RESERVED_FIELDS, issue, sync,
};

/// Tries of a request answered 429 or 5xx, or not answered.
const TRIES: u32 = 4;

/// Solr's version of a document: kept in the state, never a field.
const VERSION: &str = "_version_";

/// Solr's own bookkeeping fields, left out of documents.
const SOLR_FIELDS: [&str; 2] = [VERSION, "_root_"];

/// Most characters of Solr's error message kept in an error.
const MESSAGE_CHARS: usize = 500;

struct Reader {
    config: Config,
    /// The core's `select` handler.
    select: Url,
    auth: Option<String>,
    /// Unique keys read this run (with `incremental`).
    seen: HashSet<String>,
    /// Documents read and published this run.
    read: u64,
    published: u64,
}

#[derive(serde::Deserialize)]
struct Page<'a> {
    #[serde(rename = "responseHeader", default)]
    header: Header,
    #[serde(borrow)]
    response: Docs<'a>,
    #[serde(rename = "nextCursorMark")]
    next: Option<String>,
}

#[derive(serde::Deserialize, Default)]
struct Header {
    /// A shard did not answer (or a time limit cut the search short).
    #[serde(rename = "partialResults", default)]
    partial: bool,
}

#[derive(serde::Deserialize)]
struct Docs<'a> {
    #[serde(borrow)]
    docs: Vec<SolrDoc<'a>>,
}

/// A Solr document: its fields in order, each value as Solr wrote it.
struct SolrDoc<'a>(Vec<(String, &'a RawValue)>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for SolrDoc<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fields<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Fields<'a> {
            type Value = SolrDoc<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a Solr document (a JSON object)")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut fields = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some(entry) = map.next_entry::<String, &'de RawValue>()? {
                    fields.push(entry);
                }
                Ok(SolrDoc(fields))
            }
        }
        d.deserialize_map(Fields(std::marker::PhantomData))
    }
}

impl SolrDoc<'_> {
    fn get(&self, name: &str) -> Option<&RawValue> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }

    /// The document's fields as a JSON object, less Solr's own and the
    /// names the host keeps.
    fn fields_json(&self) -> String {
        let mut out = String::with_capacity(
            self.0
                .iter()
                .map(|(n, v)| n.len() + v.get().len() + 4)
                .sum::<usize>()
                + 2,
        );
        out.push('{');
        for (name, value) in &self.0 {
            if SOLR_FIELDS.contains(&name.as_str()) || RESERVED_FIELDS.contains(&name.as_str()) {
                continue;
            }
            if out.len() > 1 {
                out.push(',');
            }
            // A name is a string: it always serializes.
            out.push_str(&serde_json::to_string(name).unwrap_or_default());
            out.push(':');
            out.push_str(value.get());
        }
        out.push('}');
        out
    }
}

/// A unique key's value as text: a non-empty string, or a number as Solr
/// wrote it.
fn key_text(value: &RawValue) -> Option<String> {
    let text = value.get();
    if text.starts_with('"') {
        serde_json::from_str::<String>(text)
            .ok()
            .filter(|key| !key.is_empty())
    } else if text.starts_with(|c: char| c == '-' || c.is_ascii_digit()) {
        Some(text.to_owned())
    } else {
        None
    }
}

fn fatal(message: impl Into<String>) -> PluginError {
    PluginError::Fatal(message.into())
}

/// `text` for a form body (`application/x-www-form-urlencoded`).
fn encode_into(out: &mut String, text: &str) {
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~' | b'*') {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
}

/// Solr's error message in a response body (`error.msg`), or the body's start.
fn solr_message(response: &Response) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_slice(&response.body).ok();
    let message = parsed
        .as_ref()
        .and_then(|v| v.pointer("/error/msg"))
        .and_then(|m| m.as_str())
        .map_or_else(|| response.text(), str::to_owned);
    let message = message.trim();
    match message.char_indices().nth(MESSAGE_CHARS) {
        Some((cut, _)) => format!("{}...", &message[..cut]),
        None => message.to_owned(),
    }
}

impl Reader {
    /// The form body of the request for the page after `cursor`.
    fn form(&self, cursor: &str) -> String {
        let config = &self.config;
        let fields = if config.fields.is_empty() {
            format!("*,{VERSION}")
        } else {
            format!(
                "{},{VERSION},{}",
                config.unique_key,
                config.fields.join(",")
            )
        };
        let rows = config.page_size.to_string();
        let sort = format!("{} asc", config.unique_key);
        let mut params: Vec<(&str, &str)> = vec![
            ("q", &config.query),
            ("fl", &fields),
            ("sort", &sort),
            ("rows", &rows),
            ("cursorMark", cursor),
            ("wt", "json"),
            ("indent", "false"),
            ("echoParams", "none"),
        ];
        params.extend(config.filters.iter().map(|f| ("fq", f.as_str())));
        let mut body = String::new();
        for (i, (name, value)) in params.into_iter().enumerate() {
            if i > 0 {
                body.push('&');
            }
            encode_into(&mut body, name);
            body.push('=');
            encode_into(&mut body, value);
        }
        body
    }

    /// The page after `cursor`, tried again on 429, 5xx and no answer.
    fn page(&self, cursor: &str) -> Result<Response, PluginError> {
        let body = self.form(cursor);
        let request = || {
            let request = Request::post(&self.select)
                .header("content-type", "application/x-www-form-urlencoded")
                .timeout(Duration::from_secs(self.config.timeout_secs))
                .body(body.clone());
            match &self.auth {
                Some(auth) => request.header("authorization", auth),
                None => request,
            }
        };
        let response = send_with_retries(
            TRIES,
            request,
            |retry| match retry {
                Retry::Status(response) => format!(
                    "Solr at {} answered status {}: {}",
                    self.select,
                    response.status,
                    solr_message(response)
                ),
                Retry::Unreachable(why) => format!("cannot reach Solr: {why}"),
            },
            fatal,
        )?;
        if response.ok() {
            Ok(response)
        } else {
            Err(self.refused(&response))
        }
    }

    /// A refusal not worth trying again, with what Solr said.
    fn refused(&self, response: &Response) -> PluginError {
        let collection = &self.config.collection;
        fatal(match response.status {
            404 => format!(
                "Solr has no core or collection `{collection}` ({} answered 404; check `url`, \
                 with its `/solr`, and `collection`)",
                self.select
            ),
            401 | 403 => format!(
                "Solr at {} refused the credentials (status {}): check `auth` and the granted \
                 environment",
                self.select, response.status
            ),
            status => format!(
                "Solr refused to read `{collection}` (status {status}): {}",
                solr_message(response)
            ),
        })
    }

    /// Publish `doc` unless it is unchanged since the last run.
    fn take(&mut self, publisher: &Publisher, doc: &SolrDoc) -> Result<(), PluginError> {
        self.read += 1;
        let unique_key = &self.config.unique_key;
        let key = doc.get(unique_key).and_then(key_text).ok_or_else(|| {
            let start: String = doc
                .0
                .iter()
                .map(|(name, value)| format!("{name}={} ", value.get()))
                .collect::<String>()
                .chars()
                .take(200)
                .collect();
            fatal(format!(
                "a document without a text or number `{unique_key}` (the `unique_key` setting \
                 must be the core's unique key field): {start}"
            ))
        })?;
        let version = if self.config.incremental {
            let version = doc.get(VERSION).map(RawValue::get).ok_or_else(|| {
                fatal(format!(
                    "document `{key}` has no `{VERSION}`: incremental sync needs the schema's \
                     `{VERSION}` field (or set incremental = false)"
                ))
            })?;
            self.seen.insert(key.clone());
            if !sync::full_sync() && sync::get(&key).as_deref() == Some(version) {
                return Ok(());
            }
            Some(version)
        } else {
            None
        };
        let id = format!("{}{key}", self.config.id_prefix);
        let document = Document::from_json_with_id(&id, &doc.fields_json()).map_err(|e| {
            fatal(format!(
                "document `{key}`: {}",
                weir_plugin::field_error_message(&e)
            ))
        })?;
        publisher
            .publish(document)
            .map_err(|e| fatal(format!("publish refused: {e}")))?;
        self.published += 1;
        match version {
            Some(version) => sync::set(&key, version),
            None => Ok(()),
        }
    }

    /// A delete for every document kept from an earlier run that the core
    /// no longer has (or that no longer matches); how many.
    fn delete_gone(&mut self, publisher: &Publisher) -> Result<usize, PluginError> {
        let prefix = &self.config.id_prefix;
        sync::delete_unseen(publisher, &self.seen, |key| format!("{prefix}{key}"))
    }
}

/// Whether `name` can go into a comma-separated Solr parameter as one name.
fn plain_name(name: &str) -> bool {
    !name.is_empty() && !name.contains(|c: char| c == ',' || c.is_whitespace())
}

impl Connector for Reader {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        if let Err(e) = Url::parse_base(&config.url) {
            issues.push(issue("url", e));
        }
        if config.collection.is_empty() || config.collection.contains(['/', '?', '#', ' ']) {
            issues.push(issue(
                "collection",
                "must be a core or collection name (no `/`, `?`, `#` or spaces)",
            ));
        }
        if config.query.trim().is_empty() {
            issues.push(issue("query", "must be a Solr query, e.g. \"*:*\""));
        }
        for (i, filter) in config.filters.iter().enumerate() {
            if filter.trim().is_empty() {
                issues.push(issue(format!("filters[{i}]"), "must be a filter query"));
            }
        }
        for (i, field) in config.fields.iter().enumerate() {
            let path = format!("fields[{i}]");
            if !plain_name(field) {
                issues.push(issue(
                    path,
                    "must be a field name or glob, without commas or spaces",
                ));
            } else if SOLR_FIELDS.contains(&field.as_str())
                || (RESERVED_FIELDS.contains(&field.as_str()) && *field != config.unique_key)
            {
                issues.push(issue(
                    path,
                    format!("`{field}` is never a document's field: leave it out"),
                ));
            }
        }
        if !plain_name(&config.unique_key) || SOLR_FIELDS.contains(&config.unique_key.as_str()) {
            issues.push(issue(
                "unique_key",
                "must be the core's unique key field (`<uniqueKey>` in its schema)",
            ));
        }
        if !(1..=10_000).contains(&config.page_size) {
            issues.push(issue("page_size", "must be 1 to 10,000"));
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
        issues
    }

    fn pre_execute(config: Config, _run_id: &str) -> Result<Self, PluginError> {
        let select = Url::parse_base(&config.url)
            .map_err(fatal)?
            .join(&format!("{}/select", config.collection));
        Ok(Reader {
            auth: config.auth.header().map_err(fatal)?,
            select,
            config,
            seen: HashSet::new(),
            read: 0,
            published: 0,
        })
    }

    fn execute(&mut self, publisher: &Publisher) -> Result<(), PluginError> {
        let mut cursor = "*".to_owned();
        loop {
            let response = self.page(&cursor)?;
            let page: Page = serde_json::from_slice(&response.body)
                .map_err(|e| fatal(format!("unreadable answer from {}: {e}", self.select)))?;
            if page.header.partial {
                return Err(PluginError::Transient(format!(
                    "Solr answered {} with partial results (a shard did not answer): the run \
                     stops rather than miss documents",
                    self.select
                )));
            }
            let next = page.next.ok_or_else(|| {
                fatal(format!(
                    "Solr's answer from {} has no `nextCursorMark` (cursor paging needs Solr 4.7 \
                     or later)",
                    self.select
                ))
            })?;
            for doc in &page.response.docs {
                self.take(publisher, doc)?;
            }
            // The same mark again: there is nothing after it.
            if next == cursor {
                break;
            }
            cursor = next;
        }
        let deleted = if self.config.incremental {
            self.delete_gone(publisher)?
        } else {
            0
        };
        weir_plugin::info!(
            "read {} documents of `{}`: {} published, {deleted} deleted",
            self.read,
            self.config.collection,
            self.published
        );
        Ok(())
    }
}

weir_plugin::export_connector!(Reader);
