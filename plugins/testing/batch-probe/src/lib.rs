//! A batch stage for the host's tests, written against the bare WIT (no
//! SDK), so that every shape of `process-batch` can be produced on purpose.
//!
//! Every document it processes gets `batch_size` (how many documents the
//! call held), `instance_calls` (how many calls this instance has had) and
//! one more `visits` value. Its field `act` says what else happens to it:
//!
//! - `fail`, `transient`, `fatal`: that outcome, with a message naming it;
//! - `drop`, `skip`: set dropped, or skip the remaining stages;
//! - `child`: one child `<id>-child`; `self-child`: the document itself as
//!   its own child (the host hands on a copy);
//! - `trap`: the call traps (a poison document);
//! - `batch-error`: the whole call answers a transient error;
//! - `short`: the call answers one outcome too few;
//! - `keep`: the instance keeps the document's handle past the call;
//! - `set-many`: `a` and `b` set in one `update`, then read back together
//!   into `read` with `get-json-many`;
//! - `read-flood`: `get-json-many` of `act` 5,000 times (over the names a
//!   call may read); `big-read`: `get-json-many` of `big` 4,096 times (over
//!   what one answer may hold); `many-changes`: an `update` of 5,000 changes;
//!   the outcome says what happened, or the call traps;
//! - `spin`: loops until its deadline.
//!
//! With the batch-wide calls, when any document's `act` starts with `each`:
//! the counts above are set for the whole batch with one `update-each`
//! (not an `update` per document), and
//!
//! - `each-refused`: its changes set the reserved `id` after `batch_size`,
//!   so that document alone fails (`batch_size` set, the rest not);
//! - `each-read`: `read` holds `act`, `batch_size` and an absent field read
//!   back for the whole batch with one `get-json-each`;
//! - `each-flood`: `get-json-each` of 5,000 names; `each-big`: of `big` of
//!   this document listed 4,096 times (more than the documents hold);
//!   `each-changes`: an `update-each` of 17 x 4,096 changes (over the total);
//!   each traps (the host refuses);
//! - `each-trap`: the call traps after the `update-each`.
//!
//! It exports `stage-api` too, whose `process-document` only sets `called`
//! to `document`: a host must call a stage that exports both through the
//! batch.

use std::cell::{Cell, RefCell};

wit_bindgen::generate!({
    inline: "
        package weir:probe;
        world probe {
            include weir:plugin/batch-stage@0.2.5;
            export weir:plugin/stage-api@0.2.5;
        }
    ",
    path: "../../../wit",
    world: "weir:probe/probe",
    generate_all,
});

use exports::weir::plugin::stage_api::Guest as DocumentGuest;
use exports::weir::plugin::stage_batch_api::{Guest, Outcome};
use weir::plugin::document::FieldError;
use weir::plugin::document::{Document, Value};
use weir::plugin::fields::{self, Change, FieldChange};
use weir::plugin::types::{ConfigIssue, PluginError};

thread_local! {
    static CALLS: Cell<i64> = const { Cell::new(0) };
    static KEPT: RefCell<Vec<Document>> = const { RefCell::new(Vec::new()) };
}

struct Probe;

/// The changes every document gets: the batch's size, the instance's
/// calls, one more visit.
fn counts(size: i64, calls: i64) -> Vec<FieldChange> {
    vec![
        FieldChange {
            name: "batch_size".into(),
            change: Change::Set(Value::Integer(size)),
        },
        FieldChange {
            name: "instance_calls".into(),
            change: Change::Set(Value::Integer(calls)),
        },
        FieldChange {
            name: "visits".into(),
            change: Change::Add(Value::Integer(1)),
        },
    ]
}

/// The `each` acts (see the crate's doc): the counts of every document
/// with one `update-each`, whose results this returns, then the reads and
/// floods the acts ask for.
fn each_acts(
    docs: &[Document],
    acts: &[String],
    size: i64,
    calls: i64,
) -> Vec<Result<(), FieldError>> {
    let updates: Vec<(&Document, Vec<FieldChange>)> = docs
        .iter()
        .zip(acts)
        .map(|(doc, act)| {
            let mut changes = counts(size, calls);
            if act == "each-refused" {
                let id = Change::Set(Value::Text("renamed".into()));
                changes.insert(
                    1,
                    FieldChange {
                        name: "id".into(),
                        change: id,
                    },
                );
            }
            (doc, changes)
        })
        .collect();
    let results = fields::update_each(&updates);
    let all: Vec<&Document> = docs.iter().collect();
    let acting = |wanted: &str| {
        docs.iter()
            .zip(acts)
            .find(|(_, a)| *a == wanted)
            .map(|(d, _)| d)
    };
    if acting("each-read").is_some() {
        let names = ["act", "batch_size", "none"].map(String::from);
        let answers = fields::get_json_each(&all, &names);
        for ((doc, act), read) in docs.iter().zip(acts).zip(answers) {
            if act == "each-read" {
                let read: Vec<String> = read
                    .into_iter()
                    .map(|j| j.unwrap_or_else(|| "absent".into()))
                    .collect();
                doc.set_string("read", &read.join(" ")).ok();
            }
        }
    }
    if acting("each-flood").is_some() {
        fields::get_json_each(&all, &vec!["act".to_owned(); 5000]);
    }
    if let Some(doc) = acting("each-big") {
        fields::get_json_each(&vec![doc; 4096], &["big".to_owned()]);
    }
    if let Some(doc) = acting("each-changes") {
        let many: Vec<FieldChange> = (0..4096)
            .map(|i| FieldChange {
                name: format!("f{i}"),
                change: Change::Set(Value::Integer(i)),
            })
            .collect();
        fields::update_each(&vec![(doc, many); 17]);
    }
    if acting("each-trap").is_some() {
        panic!("a trap after update-each");
    }
    results
}

impl Guest for Probe {
    fn check_config(_config: String) -> Vec<ConfigIssue> {
        Vec::new()
    }

    fn start(_config: String) -> Result<(), PluginError> {
        Ok(())
    }

    fn process_batch(docs: Vec<Document>) -> Result<Vec<Outcome>, PluginError> {
        let calls = CALLS.get() + 1;
        CALLS.set(calls);
        let size = docs.len() as i64;
        let acts: Vec<String> = docs
            .iter()
            .map(|d| d.get_string("act").unwrap_or_default())
            .collect();
        if acts.iter().any(|a| a == "batch-error") {
            return Err(PluginError::Transient("the whole batch failed".into()));
        }
        let mut each = acts
            .iter()
            .any(|a| a.starts_with("each"))
            .then(|| each_acts(&docs, &acts, size, calls).into_iter());
        let mut outcomes = Vec::with_capacity(docs.len());
        for (doc, act) in docs.into_iter().zip(&acts) {
            let counted = match each.as_mut() {
                Some(results) => results.next().expect("one result per document"),
                None => fields::update(&doc, &counts(size, calls)),
            };
            if let Err(e) = counted {
                outcomes.push(Outcome::Failed(PluginError::Document(format!("{e:?}"))));
                continue;
            }
            outcomes.push(match act.as_str() {
                "fail" => Outcome::Failed(PluginError::Document("failed on purpose".into())),
                "transient" => {
                    Outcome::Failed(PluginError::Transient("transient on purpose".into()))
                }
                "fatal" => Outcome::Failed(PluginError::Fatal("fatal on purpose".into())),
                "drop" => {
                    doc.set_dropped(true);
                    Outcome::Done(Vec::new())
                }
                "skip" => {
                    doc.set_skip_stages(true);
                    Outcome::Done(Vec::new())
                }
                "child" => Outcome::Done(vec![Document::new(&format!("{}-child", doc.id()))]),
                "self-child" => Outcome::Done(vec![doc]),
                "trap" => panic!("a poison document"),
                "keep" => {
                    KEPT.with_borrow_mut(|kept| kept.push(doc));
                    Outcome::Done(Vec::new())
                }
                "set-many" => {
                    let set = vec![
                        FieldChange {
                            name: "a".into(),
                            change: Change::SetJson("[1,2]".into()),
                        },
                        FieldChange {
                            name: "b".into(),
                            change: Change::Set(Value::Text("two".into())),
                        },
                    ];
                    match fields::update(&doc, &set) {
                        Ok(()) => {
                            let read = fields::get_json_many(
                                &doc,
                                &["a".into(), "b".into(), "none".into()],
                            );
                            let read: Vec<String> = read
                                .into_iter()
                                .map(|j| j.unwrap_or_else(|| "absent".into()))
                                .collect();
                            doc.set_string("read", &read.join(" ")).ok();
                            Outcome::Done(Vec::new())
                        }
                        Err(e) => Outcome::Failed(PluginError::Document(format!("{e:?}"))),
                    }
                }
                "read-flood" | "big-read" => {
                    let (name, times) = if act == "read-flood" {
                        ("act", 5000)
                    } else {
                        ("big", 4096)
                    };
                    let names = vec![name.to_owned(); times];
                    let read = fields::get_json_many(&doc, &names);
                    Outcome::Failed(PluginError::Document(format!("read {} fields", read.len())))
                }
                "many-changes" => {
                    let changes: Vec<FieldChange> = (0..5000)
                        .map(|i| FieldChange {
                            name: format!("f{i}"),
                            change: Change::Set(Value::Integer(i)),
                        })
                        .collect();
                    match fields::update(&doc, &changes) {
                        Ok(()) => Outcome::Done(Vec::new()),
                        Err(e) => Outcome::Failed(PluginError::Document(format!("{e:?}"))),
                    }
                }
                "spin" => loop {
                    std::hint::spin_loop();
                },
                _ => Outcome::Done(Vec::new()),
            });
        }
        if acts.iter().any(|a| a == "short") {
            outcomes.pop();
        }
        Ok(outcomes)
    }

    fn stop() -> Result<(), PluginError> {
        Ok(())
    }
}

impl DocumentGuest for Probe {
    fn check_config(_config: String) -> Vec<ConfigIssue> {
        Vec::new()
    }

    fn start(_config: String) -> Result<(), PluginError> {
        Ok(())
    }

    fn process_document(doc: &Document) -> Result<Vec<Document>, PluginError> {
        doc.set_string("called", "document")
            .map_err(|e| PluginError::Document(format!("{e:?}")))?;
        Ok(Vec::new())
    }

    fn stop() -> Result<(), PluginError> {
        Ok(())
    }
}

export!(Probe);
