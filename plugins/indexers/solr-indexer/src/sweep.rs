//! Full syncs that clean up: the stamp fields in the schema, and a sweep
//! marker's delete by query of the source's documents of older generations.

use serde_json::{Value as Json, json};
use weir_plugin::DocumentFailure;
use weir_plugin::http::Request;
use weir_plugin::sweep::{SOURCE_FIELD, SYNC_FIELD, Sweep};

use crate::{Solr, solr_message};

/// What to add to a schema that lacks the stamp fields.
const SCHEMA_LINES: &str = "<field name=\"_weir_source\" type=\"string\" indexed=\"true\" stored=\"true\"/> \
     and <field name=\"_weir_sync\" type=\"plong\" indexed=\"true\" stored=\"true\"/>";

/// `value` as a quoted term of Solr's standard query parser.
fn quoted(value: &str) -> String {
    format!("\"{}\"", value.replace('\\', "\\\\").replace('"', "\\\""))
}

fn of_source(sweep: &Sweep) -> String {
    format!("{SOURCE_FIELD}:{}", quoted(&sweep.source))
}

fn older(sweep: &Sweep) -> String {
    format!(
        "+{} +{SYNC_FIELD}:[* TO {}]",
        of_source(sweep),
        sweep.generation.saturating_sub(1)
    )
}

/// Why a sweep did not happen; `transient` when Solr could not be reached
/// or was busy.
pub struct SweepError {
    message: String,
    status: Option<u16>,
    transient: bool,
}

impl SweepError {
    fn refused(message: String) -> Self {
        SweepError {
            message,
            status: None,
            transient: false,
        }
    }

    pub fn failure(self, at: usize) -> DocumentFailure {
        DocumentFailure {
            status: self.status,
            transient: self.transient,
            ..weir_plugin::failure(at, self.message)
        }
    }
}

impl Solr {
    /// Whether the schema has `_weir_source` (string) and `_weir_sync`
    /// (plong), added through the Schema API when missing; `None` when it
    /// cannot be read. A schema Solr will not change is logged with what to
    /// add: documents then go without the stamps, and sweeps are skipped.
    pub fn set_up_stamps(&self) -> Option<bool> {
        let mut missing = Vec::new();
        for (field, kind) in [(SOURCE_FIELD, "string"), (SYNC_FIELD, "plong")] {
            match self.schema_get(&self.core, &format!("fields/{field}")) {
                Ok(Some(_)) => {}
                Ok(None) => missing.push(json!({
                    "name": field, "type": kind, "indexed": true, "stored": true,
                    "docValues": true, "multiValued": false,
                })),
                Err(_) => return None,
            }
        }
        if missing.is_empty() {
            return Some(true);
        }
        match self.schema_post(&self.core, json!({ "add-field": missing })) {
            Ok(()) => Some(true),
            Err(e) => {
                weir_plugin::warn!(
                    "core `{}` has no fields for the sync stamps and {e}: documents go without \
                     them, and full syncs cannot remove what the source no longer holds until the \
                     schema has {SCHEMA_LINES}",
                    self.config.collection
                );
                Some(false)
            }
        }
    }

    /// POST `body` to the core's `path`: its JSON answer when it succeeds.
    fn post_json(&self, path: &str, body: &Json) -> Result<Json, SweepError> {
        let url = self.core.join(path);
        let request = Request::post(&url)
            .header("content-type", "application/json")
            .body(body.to_string());
        let response = self.request(request).send().map_err(|e| SweepError {
            message: format!("cannot reach Solr: {e}"),
            status: None,
            transient: true,
        })?;
        if response.ok() {
            return serde_json::from_slice(&response.body)
                .map_err(|e| SweepError::refused(format!("{url} answered what is not JSON: {e}")));
        }
        Err(SweepError {
            message: format!(
                "{url} answered status {}: {}",
                response.status,
                solr_message(&response)
            ),
            status: Some(response.status),
            transient: matches!(response.status, 429 | 502..=504),
        })
    }

    fn count(&self, query: &str) -> Result<u64, SweepError> {
        let answer = self.post_json(
            // `/select` takes the JSON request API too, and every
            // configset has it (`/query` is only in some).
            "select?wt=json",
            &json!({ "query": "*:*", "filter": [query], "limit": 0 }),
        )?;
        answer
            .pointer("/response/numFound")
            .and_then(Json::as_u64)
            .ok_or_else(|| SweepError::refused(format!("an unreadable count: {answer}")))
    }

    /// A sweep marker: commit, count, refuse over the share, delete by
    /// query and commit.
    pub fn sweep(&self, sweep: &Sweep) -> Result<(), SweepError> {
        if !self.stamps {
            // As for an indexer that does not sweep: said, not failed.
            weir_plugin::warn!(
                "sweep of `{}` skipped: core `{}` has no fields for the sync stamps, so what the \
                 source no longer holds stays; add {SCHEMA_LINES} to its schema (or use a managed \
                 schema, where the indexer adds them)",
                sweep.source,
                self.config.collection
            );
            return Ok(());
        }
        self.post_json("update?wt=json&commit=true", &json!({}))?;
        let total = self.count(&of_source(sweep))?;
        let stale = self.count(&older(sweep))?;
        sweep.allows(stale, total).map_err(SweepError::refused)?;
        if stale > 0 {
            self.post_json(
                "update?wt=json&commit=true",
                &json!({ "delete": { "query": older(sweep) } }),
            )?;
        }
        weir_plugin::info!(
            "sweep of `{}`: {stale} of its {total} documents in `{}` older than generation {} deleted",
            sweep.source,
            self.config.collection,
            sweep.generation
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_quote_the_source_and_end_below_the_generation() {
        let sweep = Sweep {
            source: "a \"b\"/c\\d".into(),
            generation: 10,
            max_share: 1.0,
        };
        assert_eq!(
            older(&sweep),
            r#"+_weir_source:"a \"b\"/c\\d" +_weir_sync:[* TO 9]"#
        );
    }
}
