//! A stage of the `lent-stage` world for the host's tests, written against
//! the bare WIT (no SDK), so that every shape of `process-lent` can be
//! produced on purpose.
//!
//! It reads `act` of the whole batch with one `batch.get-json`, and sets,
//! with one `batch.update`, on every document: `batch_size` (the batch's
//! `size`), `position` and `listed_id` (its id as `batch.ids` lists it).
//! Its field `act` says what else happens to it:
//!
//! - `fail`, `transient`: that outcome, with a message naming it;
//! - `child`: one child `<id>-child`;
//! - `drop`: dropped, through a handle asked of `batch.document`;
//! - `keep`: that handle is kept past the call;
//! - `refused`: its changes also set the reserved `id`, so its update fails;
//!   it answers that failure as its outcome;
//! - `hold`: asks for 16 handles on it (as many as one may hold at
//!   once), held until the end of the call;
//! - `hold-more`: asks for 17 (the call traps at the 17th);
//! - `past`: asks for the document after the last (the call traps);
//! - `beyond`: the answer lists the position after the last;
//! - `twice`: the answer lists the document twice;
//! - `trap`: the call traps.
//!
//! Its `process-batch` sets `called` to `process-batch`: a host must call a
//! stage that exports both through `process-lent`.

use std::cell::RefCell;

wit_bindgen::generate!({
    path: "../../../wit",
    world: "weir:plugin/lent-stage@0.2.5",
    generate_all,
});

use exports::weir::plugin::stage_batch_api::{Guest as BatchGuest, Outcome as BatchOutcome};
use exports::weir::plugin::stage_lent_api::{Guest, Outcome};
use weir::plugin::document::{Document, Value};
use weir::plugin::lending::Batch;
use weir::plugin::types::{ConfigIssue, PluginError};

thread_local! {
    static KEPT: RefCell<Vec<Document>> = const { RefCell::new(Vec::new()) };
}

struct Probe;

impl BatchGuest for Probe {
    fn check_config(_config: String) -> Vec<ConfigIssue> {
        Vec::new()
    }

    fn start(_config: String) -> Result<(), PluginError> {
        Ok(())
    }

    fn process_batch(docs: Vec<Document>) -> Result<Vec<BatchOutcome>, PluginError> {
        Ok(docs
            .iter()
            .map(|doc| {
                let _ = doc.set("called", &Value::Text("process-batch".into()));
                BatchOutcome::Done(Vec::new())
            })
            .collect())
    }

    fn stop() -> Result<(), PluginError> {
        Ok(())
    }
}

/// JSON text of a string.
fn quoted(text: &str) -> String {
    serde_json::to_string(text).expect("a string")
}

impl Guest for Probe {
    fn process_lent(batch: &Batch) -> Result<Vec<(u32, Outcome)>, PluginError> {
        let size = batch.size();
        let ids = batch.ids();
        // For each document, `act`'s JSON text as a JSON string (null when absent).
        let answer: Vec<Vec<Option<String>>> =
            serde_json::from_str(&batch.get_json(&["act".to_owned()])).expect("get-json's shape");
        let acts: Vec<String> = answer
            .into_iter()
            .map(|row| {
                row[0]
                    .as_deref()
                    .and_then(|text| serde_json::from_str(text).ok())
                    .unwrap_or_default()
            })
            .collect();
        assert_eq!(acts.len() as u32, size, "one act per document");
        let mut changes = Vec::new();
        for (at, id) in ids.iter().enumerate() {
            let mut pairs = format!(
                r#"["batch_size","{size}"],["position","{at}"],["listed_id",{}]"#,
                quoted(&quoted(id))
            );
            if acts[at] == "refused" {
                pairs.push_str(r#",["id","\"other\""]"#);
            }
            changes.push(format!("[{pairs}]"));
        }
        let refused = batch.update(&format!("[{}]", changes.join(",")));
        let mut answer = Vec::new();
        // Handles asked for by `hold` and `hold-more`, all live at once.
        let mut held = Vec::new();
        for (at, act) in acts.iter().enumerate() {
            let at = at as u32;
            let id = &ids[at as usize];
            match act.as_str() {
                "fail" => answer.push((
                    at,
                    Outcome::Failed(PluginError::Document(format!("failed {id}"))),
                )),
                "transient" => answer.push((
                    at,
                    Outcome::Failed(PluginError::Transient(format!("transient {id}"))),
                )),
                "child" => {
                    let child = Document::new(&format!("{id}-child"));
                    answer.push((at, Outcome::Done(vec![child])));
                }
                "drop" => batch.document(at).set_dropped(true),
                "keep" => KEPT.with(|k| k.borrow_mut().push(batch.document(at))),
                "refused" => {
                    let (_, error) = refused.iter().find(|(p, _)| *p == at).expect("refused");
                    answer.push((
                        at,
                        Outcome::Failed(PluginError::Document(format!("refused: {error:?}"))),
                    ));
                }
                "hold" => held.extend((0..16).map(|_| batch.document(at))),
                "hold-more" => held.extend((0..17).map(|_| batch.document(at))),
                "past" => drop(batch.document(size)),
                "beyond" => answer.push((size, Outcome::Done(Vec::new()))),
                "twice" => {
                    answer.push((at, Outcome::Done(Vec::new())));
                    answer.push((at, Outcome::Done(Vec::new())));
                }
                "trap" => panic!("trap on {id}"),
                _ => {}
            }
        }
        drop(held);
        Ok(answer)
    }
}

export!(Probe);
