//! The call journal: the documents the host lends a plugin for one call,
//! which handles they are, whether the plugin gave each back, and, for a
//! batch, enough of each one as it was before the plugin changed it to put
//! it back (so a batch that traps can be run again document by document,
//! each from where it started).
//!
//! Keeping a whole copy of every document a stage changes would cost more
//! than most stages' work, so the common changes are journaled by field: a
//! field set, appended to or added keeps only that field's old value (or
//! that it was absent); a set moves the value it replaced into the journal
//! instead of copying it first. Those changes never move a field, so putting the old
//! values back, and removing the added fields, gives the document back as
//! it was, in its order. Any other change (a removal, a rename, a path, a
//! child, a whole load) takes a whole copy first.

use serde_json::Value;

use crate::core::document::Document;

/// What a plugin is about to change in a lent document.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Touch<'a> {
    /// The value of this field: appended to or added (or set, where the
    /// caller does not use [`CallJournal::keeps`] and [`CallJournal::replaced`]).
    Field(&'a str),
    /// Its flags (dropped, skip stages).
    Flags,
    /// Anything else.
    Whole,
}

/// How to put one document back as it was before the call.
#[derive(Debug)]
pub(crate) enum Before {
    /// Field by field: each touched field's old value (none when it was
    /// absent), and the old flags.
    Fields {
        fields: Vec<(String, Option<Value>)>,
        flags: Option<(bool, bool)>,
    },
    /// The whole document.
    Whole(Document),
}

impl Before {
    /// Put `doc` back as it was.
    pub(crate) fn restore(self, doc: &mut Document) {
        match self {
            Self::Whole(before) => *doc = before,
            Self::Fields { fields, flags } => {
                undo(doc, fields, flags);
            }
        }
    }
}

fn undo(doc: &mut Document, fields: Vec<(String, Option<Value>)>, flags: Option<(bool, bool)>) {
    for (name, old) in fields.into_iter().rev() {
        // The old value fitted the document's limits, so putting it back does.
        let _ = match old {
            Some(old) => doc.set(&name, old),
            None => doc.remove(&name).map(drop),
        };
    }
    if let Some((dropped, skip)) = flags {
        doc.set_dropped(dropped);
        doc.set_skip_stages(skip);
    }
}

/// The most handles a plugin may hold at once on one document of a batch
/// lent by position.
pub(crate) const MAX_HANDLES_PER_DOCUMENT: u32 = 16;

/// The lent documents of the current call; empty between calls.
#[derive(Default)]
pub(crate) struct CallJournal {
    /// The rep of each lent document, by position.
    order: Vec<u32>,
    /// `(rep, position)` of every lent handle, sorted by rep.
    reps: Vec<(u32, usize)>,
    /// How many handles on each document the plugin holds: one each when
    /// handed, none when lent by position until it asks (and one more each
    /// time it asks again). Dropping a handle, or handing the document on,
    /// gives one up: owned handles only.
    held: Vec<u32>,
    /// How to put each document back, once it is changed, when kept.
    before: Vec<Option<Before>>,
    /// Whether the documents' old states are kept (a batch of more than
    /// one document).
    keep_before: bool,
}

impl CallJournal {
    /// Lend the handles `reps`, in the order of the documents; keep what
    /// puts each document back as it was when `keep_before`. `handed`: the
    /// plugin is handed a handle on each; otherwise (a batch lent by
    /// position) it holds none until it asks for one ([`CallJournal::hand`]).
    pub(crate) fn start(
        &mut self,
        reps: impl IntoIterator<Item = u32>,
        keep_before: bool,
        handed: bool,
    ) {
        self.order.clear();
        self.order.extend(reps);
        self.reps.clear();
        self.reps
            .extend(self.order.iter().enumerate().map(|(i, &rep)| (rep, i)));
        let n = self.reps.len();
        self.reps.sort_unstable();
        self.held.clear();
        self.held.resize(n, u32::from(handed));
        self.before.clear();
        self.before.resize_with(n, || None);
        self.keep_before = keep_before;
    }

    /// The reps of the lent documents, in order.
    pub(crate) fn order(&self) -> &[u32] {
        &self.order
    }

    /// The plugin is handed a handle on the document at `position`: the
    /// rep it lends, or why not (past the batch, or it holds as many
    /// handles on that document as one may: each is a row of the
    /// instance's handle table, in the host's memory).
    pub(crate) fn hand(&mut self, position: usize) -> Result<u32, String> {
        let size = self.order.len();
        let Some(&rep) = self.order.get(position) else {
            return Err(format!(
                "asked for document {position} of a batch of {size} (positions start at 0)"
            ));
        };
        let held = &mut self.held[position];
        if *held >= MAX_HANDLES_PER_DOCUMENT {
            return Err(format!(
                "asked for more than {MAX_HANDLES_PER_DOCUMENT} handles at once on document {position} of the batch (drop one first)"
            ));
        }
        *held += 1;
        Ok(rep)
    }

    /// Where `rep` is in the batch, if it is a lent handle.
    pub(crate) fn position(&self, rep: u32) -> Option<usize> {
        self.reps
            .binary_search_by_key(&rep, |&(r, _)| r)
            .ok()
            .map(|at| self.reps[at].1)
    }

    /// The plugin is about to change `touch` of the document at `position`,
    /// which is `doc` now: keep what puts it back, when that is kept.
    pub(crate) fn before_change(&mut self, position: usize, doc: &Document, touch: Touch<'_>) {
        if !self.keep_before {
            return;
        }
        let slot = &mut self.before[position];
        let before = slot.get_or_insert_with(|| Before::Fields {
            fields: Vec::new(),
            flags: None,
        });
        let Before::Fields { fields, flags } = before else {
            return;
        };
        match touch {
            Touch::Field(name) => {
                if !fields.iter().any(|(f, _)| f == name) {
                    fields.push((name.to_owned(), doc.fields().get(name).cloned()));
                }
            }
            Touch::Flags => {
                flags.get_or_insert((doc.is_dropped(), doc.skips_stages()));
            }
            Touch::Whole => {
                let mut whole = doc.clone();
                undo(&mut whole, std::mem::take(fields), flags.take());
                *slot = Some(Before::Whole(whole));
            }
        }
    }

    /// Whether the old value of field `name` of the document at `position`
    /// is still to be kept: the caller replaces it whole, then hands the
    /// value it replaced to [`CallJournal::replaced`] (moved, never copied).
    pub(crate) fn keeps(&self, position: usize, name: &str) -> bool {
        self.keep_before
            && match &self.before[position] {
                None => true,
                Some(Before::Fields { fields, .. }) => !fields.iter().any(|(f, _)| f == name),
                Some(Before::Whole(_)) => false,
            }
    }

    /// Field `name` of the document at `position` held `old` before the
    /// plugin replaced it (asked of [`CallJournal::keeps`] first).
    pub(crate) fn replaced(&mut self, position: usize, name: &str, old: Option<Value>) {
        let before = self.before[position].get_or_insert_with(|| Before::Fields {
            fields: Vec::new(),
            flags: None,
        });
        if let Before::Fields { fields, .. } = before {
            fields.push((name.to_owned(), old));
        }
    }

    /// The plugin gave up its handle on the document at `position`.
    pub(crate) fn release(&mut self, position: usize) {
        self.held[position] = self.held[position].saturating_sub(1);
    }

    /// How many lent handles the plugin still holds.
    pub(crate) fn kept(&self) -> usize {
        self.held.iter().filter(|&&h| h > 0).count()
    }

    /// End the call: what puts each document back as it was, by position
    /// (none for a document left unchanged, or when nothing was kept).
    pub(crate) fn finish(&mut self) -> Vec<Option<Before>> {
        self.order.clear();
        self.reps.clear();
        self.held.clear();
        std::mem::take(&mut self.before)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{CallJournal, Touch};
    use crate::core::document::Document;

    fn original() -> Document {
        Document::from_json(json!({ "id": "a", "x": 1, "y": [1, 2], "z": "z" })).expect("doc")
    }

    #[test]
    fn positions_follow_the_documents_whatever_the_reps() {
        let mut journal = CallJournal::default();
        journal.start([7, 2, 9], false, true);
        assert_eq!(journal.position(7), Some(0));
        assert_eq!(journal.position(2), Some(1));
        assert_eq!(journal.position(9), Some(2));
        assert_eq!(journal.position(3), None);
        assert_eq!(journal.kept(), 3);
        journal.release(1);
        assert_eq!(journal.kept(), 2);
        journal.before_change(0, &original(), Touch::Whole);
        assert!(journal.finish().iter().all(Option::is_none), "nothing kept");
        assert_eq!(journal.position(7), None);
    }

    #[test]
    fn a_batch_lent_by_position_holds_only_the_handles_asked_for() {
        let mut journal = CallJournal::default();
        journal.start([7, 2, 9], true, false);
        assert_eq!(journal.order(), [7, 2, 9]);
        assert_eq!(journal.kept(), 0, "no handle until one is asked for");
        assert_eq!(
            journal.position(2),
            Some(1),
            "changes are journaled by position"
        );
        assert_eq!(journal.hand(2), Ok(9));
        assert_eq!(journal.kept(), 1);
        let past = journal.hand(3).expect_err("past the batch");
        assert!(past.contains("document 3 of a batch of 3"), "{past}");
        assert_eq!(journal.hand(2), Ok(9), "asked again: a second handle");
        journal.release(2);
        assert_eq!(journal.kept(), 1, "one of the two handles is still held");
        journal.release(2);
        assert_eq!(journal.kept(), 0);
        // Handles are rows of a table in the host: bounded per document.
        for _ in 0..super::MAX_HANDLES_PER_DOCUMENT {
            journal.hand(0).expect("within the bound");
        }
        let over = journal.hand(0).expect_err("one too many");
        assert!(over.contains("more than 16 handles"), "{over}");
        journal.release(0);
        assert_eq!(
            journal.hand(0),
            Ok(7),
            "one dropped: one more may be asked for"
        );
        journal.finish();
        assert!(journal.order().is_empty());
    }

    /// One change of a test: journaled first (what it touches, then the
    /// change), or a set whose replaced value moves into the journal, as
    /// the host's sets do.
    enum Step<'a> {
        Edit(Touch<'a>, &'a dyn Fn(&mut Document)),
        Replace(&'a str, serde_json::Value),
    }
    use Step::{Edit, Replace};

    /// Apply `steps` to a lent copy of the original the way the host does,
    /// put it back, and compare with the original, field order included.
    fn put_back(steps: &[Step<'_>]) {
        let mut journal = CallJournal::default();
        journal.start([1, 2], true, true);
        let mut doc = original();
        for step in steps {
            match step {
                Edit(touch, change) => {
                    journal.before_change(0, &doc, *touch);
                    change(&mut doc);
                }
                Replace(name, value) => {
                    let keep = journal.keeps(0, name);
                    let old = doc.replace(name, value.clone()).expect("replace");
                    if keep {
                        journal.replaced(0, name, old);
                    }
                }
            }
        }
        assert_ne!(doc.to_json_string(), original().to_json_string());
        let mut before = journal.finish();
        assert!(before[1].is_none(), "an untouched document keeps nothing");
        before[0].take().expect("kept").restore(&mut doc);
        assert_eq!(doc.to_json_string(), original().to_json_string());
        assert_eq!(doc.approx_json_bytes(), original().approx_json_bytes());
    }

    #[test]
    fn field_changes_are_put_back_in_place() {
        put_back(&[
            Edit(Touch::Field("x"), &|d| d.set("x", json!(2)).expect("set")),
            Edit(Touch::Field("new"), &|d| {
                d.set("new", json!("n")).expect("set")
            }),
            Edit(Touch::Field("y"), &|d| d.add("y", json!(3)).expect("add")),
            Edit(Touch::Field("x"), &|d| d.set("x", json!(3)).expect("again")),
            Edit(Touch::Flags, &|d| d.set_dropped(true)),
        ]);
    }

    #[test]
    fn replaced_values_are_moved_back_in_place() {
        put_back(&[
            Replace("z", json!("changed")),
            Replace("new", json!(1)),
            Edit(Touch::Field("y"), &|d| d.add("y", json!(3)).expect("add")),
            // Already kept: the first old value is the one put back.
            Replace("z", json!("again")),
            Replace("y", json!("over an append")),
        ]);
    }

    #[test]
    fn other_changes_are_put_back_whole_after_field_changes() {
        put_back(&[
            Edit(Touch::Field("z"), &|d| {
                d.set("z", json!("changed")).expect("set")
            }),
            Replace("new", json!(1)),
            Edit(Touch::Whole, &|d| {
                d.remove("x").expect("remove");
            }),
            // Kept whole already: nothing more is kept.
            Replace("y", json!(0)),
            Edit(Touch::Field("y"), &|d| d.set("y", json!(1)).expect("set")),
        ]);
    }
}
