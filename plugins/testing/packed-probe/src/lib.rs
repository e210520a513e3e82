//! A stage of the `packing-stage` world for the host's tests, written
//! against the bare WIT (no SDK), so that every shape of `get-packed` and
//! `update-packed` can be produced on purpose.
//!
//! It reads `act` and `n` of the whole batch with one `get-packed` (or, with
//! the setting `names`, that many names `f0`, `f1`, ...), and, in one
//! `update-packed` listing the documents last to first, sets on every
//! document `pieces`: the JSON texts read, `null` for a field absent. Its
//! field `act` says what else happens to it:
//!
//! - `remove`: `n` is removed;
//! - `refused`: `first` is set, then the reserved `id` (refused), then
//!   `after` (never made); the failure is answered as its outcome;
//! - `bad-json`: `x` is set to text that is not JSON;
//! - `deep`: `x` is set to arrays nested 200 deep;
//! - `escaped`: `x` is set to a JSON string with escapes and non-ASCII;
//! - `odd`, `past-batch`, `past-text`, `inside`, `short`: before anything
//!   else, the document is sent alone in a call cut up wrongly (two
//!   numbers; a position past the batch; a length past the text; a length
//!   ending inside a character; text left over), which stops the call.

use std::cell::Cell;

wit_bindgen::generate!({
    path: "../../../wit",
    world: "weir:plugin/packing-stage@0.2.5",
    generate_all,
});

use exports::weir::plugin::stage_batch_api::{Guest as BatchGuest, Outcome as BatchOutcome};
use exports::weir::plugin::stage_lent_api::{Guest, Outcome};
use weir::plugin::document::Document;
use weir::plugin::lending::Batch;
use weir::plugin::lending_packed::{PackedChanges, get_packed, update_packed};
use weir::plugin::types::{ConfigIssue, PluginError};

const ABSENT: u32 = u32::MAX;

thread_local! {
    /// How many names `f0`, `f1`, ... to read instead of `act` and `n`.
    static NAMES: Cell<Option<usize>> = const { Cell::new(None) };
}

struct Probe;

impl BatchGuest for Probe {
    fn check_config(_config: String) -> Vec<ConfigIssue> {
        Vec::new()
    }

    fn start(config: String) -> Result<(), PluginError> {
        let config: serde_json::Value = serde_json::from_str(&config).expect("JSON config");
        let names = config["names"].as_u64().map(|n| n as usize);
        NAMES.with(|n| n.set(names));
        Ok(())
    }

    fn process_batch(_docs: Vec<Document>) -> Result<Vec<BatchOutcome>, PluginError> {
        Err(PluginError::Fatal("called through process-batch".into()))
    }

    fn stop() -> Result<(), PluginError> {
        Ok(())
    }
}

/// Changes being packed.
#[derive(Default)]
struct Packer {
    text: String,
    changes: Vec<u32>,
}

impl Packer {
    fn set(&mut self, at: u32, name: &str, json: &str) {
        self.text.push_str(name);
        self.text.push_str(json);
        self.changes
            .extend([at, name.len() as u32, json.len() as u32]);
    }

    fn remove(&mut self, at: u32, name: &str) {
        self.text.push_str(name);
        self.changes.extend([at, name.len() as u32, ABSENT]);
    }

    fn send(self, batch: &Batch) -> Vec<(u32, weir::plugin::document::FieldError)> {
        update_packed(
            batch,
            &PackedChanges {
                text: self.text,
                changes: self.changes,
            },
        )
    }
}

/// A call cut up wrongly, as `act` says, for the document at `at`.
fn cut_wrongly(batch: &Batch, at: u32, act: &str) {
    let size = batch.size();
    let (text, changes) = match act {
        "odd" => ("x1", vec![at, 1]),
        "past-batch" => ("x1", vec![size, 1, 1]),
        "past-text" => ("x1", vec![at, 1, 5]),
        "inside" => ("xé", vec![at, 1, 1]),
        "short" => ("x1y", vec![at, 1, 1]),
        _ => return,
    };
    update_packed(
        batch,
        &PackedChanges {
            text: text.into(),
            changes,
        },
    );
}

impl Guest for Probe {
    fn process_lent(batch: &Batch) -> Result<Vec<(u32, Outcome)>, PluginError> {
        let size = batch.size();
        let names: Vec<String> = match NAMES.with(Cell::get) {
            Some(n) => (0..n).map(|i| format!("f{i}")).collect(),
            None => vec!["act".into(), "n".into()],
        };
        let packed = get_packed(batch, &names);
        assert_eq!(packed.lengths.len(), size as usize * names.len());
        let mut start = 0;
        let pieces: Vec<Option<&str>> = packed
            .lengths
            .iter()
            .map(|&length| {
                (length != ABSENT).then(|| {
                    let piece = &packed.text[start..start + length as usize];
                    start += length as usize;
                    piece
                })
            })
            .collect();
        assert_eq!(start, packed.text.len(), "the lengths cover the text");
        let rows: Vec<&[Option<&str>]> = pieces.chunks(names.len().max(1)).collect();
        let act = |at: usize| -> String {
            rows.get(at)
                .and_then(|row| row.first().copied().flatten())
                .and_then(|json| serde_json::from_str(json).ok())
                .unwrap_or_default()
        };
        for at in 0..size {
            cut_wrongly(batch, at, &act(at as usize));
        }
        let mut packer = Packer::default();
        for at in (0..size).rev() {
            let row = rows.get(at as usize).copied().unwrap_or_default();
            let read = serde_json::to_string(&row).expect("JSON");
            packer.set(at, "pieces", &read);
            match act(at as usize).as_str() {
                "remove" => packer.remove(at, "n"),
                "refused" => {
                    packer.set(at, "first", "1");
                    packer.set(at, "id", "\"other\"");
                    packer.set(at, "after", "1");
                }
                "bad-json" => packer.set(at, "x", "{"),
                "deep" => packer.set(at, "x", &format!("{}{}", "[".repeat(200), "]".repeat(200))),
                "escaped" => packer.set(at, "x", r#""é\n\"q\"\u0041""#),
                _ => {}
            }
        }
        Ok(packer
            .send(batch)
            .into_iter()
            .map(|(at, error)| {
                (
                    at,
                    Outcome::Failed(PluginError::Document(format!("{error:?}"))),
                )
            })
            .collect())
    }
}

export!(Probe);
