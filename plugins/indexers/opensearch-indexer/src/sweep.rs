//! Full syncs that clean up: the stamp fields mapped at start, and a sweep
//! marker's delete of the source's documents of older generations (or,
//! in a rebuild, the alias swap).

use serde_json::{Value as Json, json};
use weir_plugin::http::Request;
use weir_plugin::sweep::{SOURCE_FIELD, SYNC_FIELD, Sweep};
use weir_plugin::{DocumentFailure, failure};

use crate::OpenSearch;

/// Why a sweep did not happen: refused (the share, the cluster's answer to
/// a bad request), or for now (the cluster unreachable or busy).
pub enum SweepError {
    Refused(String),
    ForNow(String, Option<u16>),
}

impl SweepError {
    pub fn failure(self, at: usize) -> DocumentFailure {
        match self {
            SweepError::Refused(message) => failure(at, message),
            SweepError::ForNow(message, status) => DocumentFailure {
                status,
                transient: true,
                ..failure(at, message)
            },
        }
    }
}

impl From<String> for SweepError {
    fn from(message: String) -> Self {
        SweepError::Refused(message)
    }
}

/// The mapping of the stamp fields.
pub fn stamp_properties() -> Json {
    json!({
        SOURCE_FIELD: { "type": "keyword" },
        SYNC_FIELD: { "type": "long" },
    })
}

/// The source's documents: an exact match, whether `_weir_source` is
/// mapped `keyword` (as the plugin maps it) or came from dynamic mapping
/// (text with a `keyword` sub-field; the text field never matches a term
/// with `/`, as every scope has).
fn of_source(sweep: &Sweep) -> Json {
    json!({ "bool": {
        "should": [
            { "term": { SOURCE_FIELD: sweep.source } },
            { "term": { format!("{SOURCE_FIELD}.keyword"): sweep.source } },
        ],
        "minimum_should_match": 1,
    }})
}

fn older(sweep: &Sweep) -> Json {
    json!({ "bool": { "filter": [
        of_source(sweep),
        { "range": { SYNC_FIELD: { "lt": sweep.generation } } },
    ]}})
}

impl OpenSearch {
    /// `_weir_source` and `_weir_sync` in the default index's mapping,
    /// the index made when missing. Best effort: what the cluster refuses
    /// (a field already mapped otherwise, no right to) is logged, and the
    /// sweep's query works on dynamic mappings too.
    pub fn set_up_stamps(&self) {
        let Some(index) = self.default_index.as_deref() else {
            return;
        };
        let properties = json!({ "properties": stamp_properties() });
        let answer = self.put(&format!("{index}/_mapping"), &properties);
        let answer = match answer {
            Ok((404, _)) => self.put(index, &json!({ "mappings": properties })),
            other => other,
        };
        match answer {
            Ok((200..=299, _)) => {}
            Ok((_, answer))
                if answer.pointer("/error/type")
                    == Some(&json!("resource_already_exists_exception")) =>
            {
                // Made meanwhile by another instance: map the fields there.
                let _ = self.put(&format!("{index}/_mapping"), &properties);
            }
            Ok((status, answer)) => weir_plugin::warn!(
                "cannot map `{SOURCE_FIELD}` (keyword) and `{SYNC_FIELD}` (long) in index `{index}` (status {status}): {}",
                answer.pointer("/error/reason").unwrap_or(&answer)
            ),
            Err(e) => weir_plugin::warn!("cannot map the sync fields in index `{index}`: {e}"),
        }
    }

    /// Where a sweep looks: the default index, and with `index_field` the
    /// indices documents went to since start (a full sync sends every
    /// document, so the source's documents are there).
    fn sweep_target(&self) -> Result<String, SweepError> {
        let indices: std::collections::BTreeSet<&str> = self
            .default_index
            .iter()
            .chain(&self.written)
            .map(String::as_str)
            .collect();
        let target = indices.into_iter().collect::<Vec<_>>().join(",");
        if target.len() > 2048 {
            return Err(SweepError::Refused(format!(
                "sweep refused: documents went to {} indices, too many to name in one request; \
                 sweep them by `_weir_source` and `_weir_sync` yourself",
                self.written.len()
            )));
        }
        Ok(target)
    }

    /// A POST of `body` to `path`, its answer's JSON when it succeeds.
    pub fn post_json(&self, path: &str, body: &Json) -> Result<Json, SweepError> {
        let request = Request::post(&self.root.join(path))
            .header("content-type", "application/json")
            .body(body.to_string());
        let (status, answer) = self
            .call(request)
            .map_err(|e| SweepError::ForNow(e, None))?;
        match status {
            200..=299 => Ok(answer),
            429 | 502..=504 => Err(SweepError::ForNow(
                format!("{path} answered status {status}: {answer}"),
                Some(status),
            )),
            _ => Err(SweepError::Refused(format!(
                "{path} answered status {status}: {}",
                answer.pointer("/error/reason").unwrap_or(&answer)
            ))),
        }
    }

    /// How many documents `query` matches in `target`.
    pub fn count(&self, target: &str, query: Json) -> Result<u64, SweepError> {
        let answer = self.post_json(
            &format!("{target}/_count?ignore_unavailable=true"),
            &json!({ "query": query }),
        )?;
        answer["count"]
            .as_u64()
            .ok_or_else(|| SweepError::Refused(format!("an unreadable count: {answer}")))
    }

    /// Make what `target` holds visible to counts and searches.
    pub fn refresh(&self, target: &str) -> Result<(), SweepError> {
        self.post_json(
            &format!("{target}/_refresh?ignore_unavailable=true"),
            &json!({}),
        )
        .map(drop)
    }

    /// A sweep marker: the source's documents of older generations deleted
    /// (or, in a rebuild, the alias swapped).
    pub fn sweep(&mut self, sweep: &Sweep) -> Result<(), SweepError> {
        if self.config.rebuild.is_some() {
            return self.swap(sweep);
        }
        let target = self.sweep_target()?;
        if target.is_empty() {
            return Ok(());
        }
        self.refresh(&target)?;
        let total = self.count(&target, of_source(sweep))?;
        let stale = self.count(&target, older(sweep))?;
        sweep.allows(stale, total)?;
        if stale == 0 {
            weir_plugin::info!(
                "sweep of `{}`: none of its {total} documents in `{target}` is older than generation {}",
                sweep.source,
                sweep.generation
            );
            return Ok(());
        }
        let answer = self.post_json(
            &format!(
                "{target}/_delete_by_query?conflicts=proceed&refresh=true&ignore_unavailable=true"
            ),
            &json!({ "query": older(sweep) }),
        )?;
        if let Some(first) = answer["failures"].as_array().and_then(|f| f.first()) {
            return Err(SweepError::Refused(format!(
                "sweep of `{}` failed in part ({} deleted): {first}",
                sweep.source, answer["deleted"]
            )));
        }
        weir_plugin::info!(
            "sweep of `{}`: {} of its {total} documents in `{target}` older than generation {} deleted",
            sweep.source,
            answer["deleted"],
            sweep.generation
        );
        Ok(())
    }
}
