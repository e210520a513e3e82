//! Shadow stages: a new version of a stage run beside the live one on a
//! sample of documents. The shadow gets a copy of each sampled document as
//! the live stage got it; what it makes of it is compared with what the
//! live stage made (the document field by field, its children, a drop or
//! a failure) and thrown away. Differences are counted in metrics
//! (`weir_shadow_documents_total`), written to the shadow's report file or
//! logged, bounded per line and in all (`shadow_report.rs`); nothing of the
//! shadow reaches the index, and a shadow that fails, traps or stops fails
//! nothing but its own comparison.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::{Value, json};

pub(crate) use super::shadow_report::ShadowReport;
use super::shadow_report::{MAX_DIFFERENCES, MAX_ID_BYTES, difference_line};

use crate::config::ShadowConfig;
use crate::core::differences::Differences;
use crate::core::document::Document;
use crate::core::sample::id_hash;
use crate::plugin::{DocumentOutcome, StageInstance};
use crate::telemetry::events::{ShadowCompared, ShadowLog, ShadowStopped, Shadowed};
use crate::telemetry::meters::Scope;

/// Which documents a shadow runs on.
#[derive(Debug)]
pub(crate) struct Sample {
    /// Documents whose id hashes below this, of `u64::MAX`.
    below: u64,
    ids: HashSet<String>,
}

impl Sample {
    pub(crate) fn new(config: &ShadowConfig) -> Self {
        let share = config.share();
        Self {
            below: if share >= 1.0 {
                u64::MAX
            } else {
                (share * u64::MAX as f64) as u64
            },
            ids: config.ids.iter().cloned().collect(),
        }
    }

    /// Whether `id` is sampled: the same answer in every process (a hash
    /// with fixed keys).
    pub(crate) fn holds(&self, id: &str) -> bool {
        if self.below == u64::MAX || self.ids.contains(id) {
            return true;
        }
        if self.below == 0 {
            return false;
        }
        id_hash(id) < self.below
    }
}

/// A shadow's figures, said once its last worker is done with it.
impl Drop for LoadedShadow {
    fn drop(&mut self) {
        let compared = self.report.compared.load(Ordering::Relaxed);
        if compared > 0 {
            let differing = self.report.differing.load(Ordering::Relaxed);
            let report = self.report.path.as_ref().map(|p| p.display().to_string());
            tracing::info!(
                shadow = %self.plugin.name(),
                compared,
                differing,
                report = report.as_deref().unwrap_or("(logged)"),
                "shadow stage: documents compared with the live stage"
            );
        }
    }
}

/// A stage's shadow in one worker.
pub(crate) struct Shadow {
    pub(crate) instance: StageInstance,
    pub(crate) sample: Arc<Sample>,
    pub(crate) report: Arc<ShadowReport>,
    /// It stopped working (a fatal error): it runs no more in this worker.
    pub(crate) broken: bool,
}

impl Shadow {
    /// Run the shadow on `sampled` (documents as the live stage got them,
    /// in calls of up to `size`, as the live stage is called) and compare
    /// each with the live stage's outcome and document in `live`.
    pub(crate) fn compare_all<'a>(
        &mut self,
        scope: &Scope,
        stage: &str,
        size: usize,
        mut sampled: Vec<Document>,
        live: impl Iterator<Item = (&'a DocumentOutcome, &'a Document)>,
    ) {
        let mut outcomes = Vec::with_capacity(sampled.len());
        for chunk in sampled.chunks_mut(size.max(1)) {
            if self.broken {
                break;
            }
            match self.instance.process_batch(chunk) {
                Ok(each) => outcomes.extend(each),
                // The call failed as a whole: each by itself, as the live
                // stage's documents go.
                Err(_) => outcomes.extend(chunk.iter_mut().map(|doc| self.instance.process(doc))),
            }
            if let Some(Err(e)) = outcomes
                .iter()
                .find(|o| o.as_ref().is_err_and(|e| !e.is_document_error()))
            {
                ShadowStopped { stage, error: e }.emit();
                self.broken = true;
            }
        }
        for ((before, outcome), live) in sampled.iter().zip(&outcomes).zip(live) {
            self.judge(scope, stage, before, outcome, live);
        }
    }

    /// Compare the shadow's `outcome` on `before` with the live stage's.
    fn judge(
        &self,
        scope: &Scope,
        stage: &str,
        before: &Document,
        outcome: &DocumentOutcome,
        live: (&DocumentOutcome, &Document),
    ) {
        let same = |scope, stage| ShadowCompared {
            scope,
            stage,
            outcome: Shadowed::Same,
            log: ShadowLog::Nothing,
        };
        if same_quickly(outcome, before, live) {
            self.report.compared.fetch_add(1, Ordering::Relaxed);
            same(scope, stage).emit();
            return;
        }
        let mut differences = Differences::new(MAX_DIFFERENCES + 1, MAX_ID_BYTES);
        let (live_json, shadow_json);
        match (live.0, outcome) {
            // The common case: both made documents. Compared in place,
            // field by field, with no copy of either.
            (Ok(live_children), Ok(children)) => compare_made(
                &mut differences,
                (live_children, live.1),
                (children, before),
            ),
            _ => {
                live_json = output(live.0, live.1);
                shadow_json = output(outcome, before);
                differences.compare(&live_json, &shadow_json);
            }
        }
        self.report.compared.fetch_add(1, Ordering::Relaxed);
        if differences.found().is_empty() {
            same(scope, stage).emit();
            return;
        }
        let line = difference_line(
            scope.pipeline().as_ref(),
            stage,
            before.id(),
            differences.found(),
        );
        let logged = self.report.differs(stage, &line);
        ShadowCompared {
            scope,
            stage,
            outcome: if outcome.is_err() {
                Shadowed::Failed
            } else {
                Shadowed::Differs
            },
            log: logged.as_log(),
        }
        .emit();
    }
}

/// Whether both versions made the same document of it and nothing else
/// (the common case), without turning either into JSON.
fn same_quickly(
    outcome: &DocumentOutcome,
    doc: &Document,
    live: (&DocumentOutcome, &Document),
) -> bool {
    matches!((outcome, live.0), (Ok(a), Ok(b)) if a.is_empty() && b.is_empty())
        && doc.id() == live.1.id()
        && doc.is_dropped() == live.1.is_dropped()
        && doc.fields() == live.1.fields()
}

/// Where what the shadow made (`shadow`: its new children, and the document
/// as it left it) differs from what the live stage made, as [`output`]'s
/// JSON would show it (`document.title`, `children.<id>.title`), walking
/// the documents in place: a copy is made only of what differs whole (a
/// document one side dropped, a child one side lacks, nested children).
fn compare_made<'v>(
    differences: &mut Differences<'v>,
    live: (&'v [Document], &'v Document),
    shadow: (&'v [Document], &'v Document),
) {
    differences.within("document", |d| {
        match (live.1.is_dropped(), shadow.1.is_dropped()) {
            (false, false) => compare_documents(d, live.1, shadow.1),
            (true, true) => {}
            (l, s) => {
                let side = |dropped: bool, doc: &Document| {
                    Cow::Owned(if dropped {
                        json!("dropped")
                    } else {
                        doc.to_json()
                    })
                };
                d.record(Some(side(l, live.1)), Some(side(s, shadow.1)));
            }
        }
    });
    let (live, shadow) = (live.0, shadow.0);
    if live.is_empty() && shadow.is_empty() {
        return;
    }
    // As JSON the children are an object by id (a later one of an id wins).
    let by_id = |children: &'v [Document]| -> HashMap<&'v str, &'v Document> {
        children.iter().map(|c| (c.id(), c)).collect()
    };
    let (live_ids, shadow_ids) = (by_id(live), by_id(shadow));
    let whole = |children: &[Document]| -> Cow<'v, Value> {
        Cow::Owned(Value::Object(
            children
                .iter()
                .map(|c| (c.id().to_owned(), c.to_json()))
                .collect(),
        ))
    };
    differences.within("children", |d| {
        if live.is_empty() || shadow.is_empty() {
            let side = |children: &[Document]| (!children.is_empty()).then(|| whole(children));
            return d.record(side(live), side(shadow));
        }
        let last = |ids: &HashMap<&str, &Document>, c: &Document| {
            ids.get(c.id()).is_some_and(|l| std::ptr::eq(*l, c))
        };
        for child in live.iter().filter(|c| last(&live_ids, c)) {
            d.within(child.id(), |d| match shadow_ids.get(child.id()) {
                Some(other) => compare_documents(d, child, other),
                None => d.record(Some(Cow::Owned(child.to_json())), None),
            });
        }
        for child in shadow
            .iter()
            .filter(|c| last(&shadow_ids, c) && !live_ids.contains_key(c.id()))
        {
            d.within(child.id(), |d| {
                d.record(None, Some(Cow::Owned(child.to_json())));
            });
        }
    });
}

/// Where document `s` differs from `l`, as their JSON would show it (`id`,
/// `run_id`, `_deleted`, each field, `_children`), in place.
fn compare_documents<'v>(d: &mut Differences<'v>, l: &'v Document, s: &'v Document) {
    let text = |t: &str| Cow::Owned(Value::String(t.to_owned()));
    if l.id() != s.id() {
        d.within("id", |d| d.record(Some(text(l.id())), Some(text(s.id()))));
    }
    if l.run_id() != s.run_id() {
        d.within("run_id", |d| {
            d.record(l.run_id().map(text), s.run_id().map(text));
        });
    }
    if l.is_deleted() != s.is_deleted() {
        let deleted = |on: bool| on.then(|| Cow::Owned(Value::Bool(true)));
        d.within("_deleted", |d| {
            d.record(deleted(l.is_deleted()), deleted(s.is_deleted()));
        });
    }
    let (lf, sf) = (l.fields(), s.fields());
    for (name, lv) in lf.iter() {
        d.within(name.as_str(), |d| match sf.get(name.as_str()) {
            Some(sv) => d.compare(lv, sv),
            None => d.record(Some(Cow::Borrowed(lv)), None),
        });
    }
    for (name, sv) in sf.iter().filter(|(n, _)| !lf.contains_key(n.as_str())) {
        d.within(name.as_str(), |d| d.record(None, Some(Cow::Borrowed(sv))));
    }
    if l.children() != s.children() && !d.is_full() {
        // Rare (a stage that nests children): compared whole, as JSON.
        let nested = |doc: &Document| {
            (!doc.children().is_empty())
                .then(|| Value::Array(doc.children().iter().map(Document::to_json).collect()))
        };
        let (ln, sn) = (nested(l), nested(s));
        let same = match (&ln, &sn) {
            (Some(a), Some(b)) => crate::core::document::same_json(a, b),
            (a, b) => a.is_none() && b.is_none(),
        };
        if !same {
            d.within("_children", |d| {
                d.record(ln.map(Cow::Owned), sn.map(Cow::Owned))
            });
        }
    }
}

/// What a stage made of a document, as one JSON value to compare: the
/// document (or that it was dropped), its children, or its failure.
fn output(outcome: &DocumentOutcome, doc: &Document) -> Value {
    match outcome {
        Ok(children) => {
            let mut out = json!({ "document": if doc.is_dropped() { json!("dropped") } else { doc.to_json() } });
            if !children.is_empty() {
                out["children"] = Value::Object(
                    children
                        .iter()
                        .map(|c| (c.id().to_owned(), c.to_json()))
                        .collect(),
                );
            }
            out
        }
        Err(e) => json!({ "failed": failure_text(e) }),
    }
}

/// A failure as both versions would give it: the plugin's own message, or
/// what stopped it (not the error's text, which names the plugin).
fn failure_text(error: &crate::plugin::PluginError) -> String {
    use crate::plugin::PluginError;
    match error {
        PluginError::Document { message, .. } => message.clone(),
        PluginError::Trap { cause, .. } => cause.to_string(),
        other => other.kind().to_owned(),
    }
}

/// A stage's shadow as validation loaded it: the plugin, and what every
/// worker's instance of it shares.
#[derive(Debug)]
pub(crate) struct LoadedShadow {
    pub(crate) plugin: crate::plugin::StagePlugin,
    sample: Arc<Sample>,
    report: Arc<ShadowReport>,
}

impl LoadedShadow {
    pub(crate) fn new(plugin: crate::plugin::StagePlugin, config: &ShadowConfig) -> Self {
        Self {
            plugin,
            sample: Arc::new(Sample::new(config)),
            report: Arc::new(ShadowReport::new(config)),
        }
    }

    /// An instance for one worker.
    pub(crate) fn start(&self) -> Result<Shadow, crate::plugin::PluginError> {
        Ok(Shadow {
            instance: self.plugin.instantiate()?,
            sample: Arc::clone(&self.sample),
            report: Arc::clone(&self.report),
            broken: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::PluginError;

    fn doc(title: &str) -> Document {
        let mut doc = Document::new("d-1");
        doc.set("title", json!(title)).expect("set");
        doc
    }

    /// The quick comparison says `same` only where the full one finds no
    /// difference.
    #[test]
    fn the_quick_comparison_agrees_with_the_full_one() {
        let failed = || -> DocumentOutcome {
            Err(PluginError::Document {
                plugin: "p".into(),
                message: "no".into(),
                transient: false,
            })
        };
        let mut dropped = doc("a");
        dropped.set_dropped(true);
        let cases: Vec<(DocumentOutcome, Document, DocumentOutcome, Document)> = vec![
            (Ok(vec![]), doc("a"), Ok(vec![]), doc("a")),
            (Ok(vec![]), doc("a"), Ok(vec![]), doc("b")),
            (Ok(vec![]), doc("a"), Ok(vec![]), dropped),
            (Ok(vec![doc("c")]), doc("a"), Ok(vec![]), doc("a")),
            (failed(), doc("a"), Ok(vec![]), doc("a")),
            (failed(), doc("a"), failed(), doc("a")),
            (Ok(vec![]), Document::new("d-1"), Ok(vec![]), doc("a")),
        ];
        for (i, (outcome, shadow, live_outcome, live)) in cases.iter().enumerate() {
            let full = crate::core::differences::field_differences(
                "",
                &output(live_outcome, live),
                &output(outcome, shadow),
            )
            .is_empty();
            if let (Ok(children), Ok(live_children)) = (outcome, live_outcome) {
                let mut d = Differences::unbounded();
                compare_made(&mut d, (live_children, live), (children, shadow));
                assert_eq!(d.found().is_empty(), full, "case {i}: in place and as JSON");
            }
            let quick = same_quickly(outcome, shadow, (live_outcome, live));
            assert!(!quick || full, "case {i}: quick says same, full differs");
            if i == 0 {
                assert!(quick, "equal documents are same quickly");
            }
        }
    }

    /// Each difference as text, sorted: the in-place comparison and the
    /// JSON one may find them in another order.
    fn shown(found: &[crate::core::differences::Difference<'_>]) -> Vec<String> {
        let mut shown: Vec<String> = found
            .iter()
            .map(|(at, l, s)| format!("{at}: {:?} / {:?}", l.as_deref(), s.as_deref()))
            .collect();
        shown.sort();
        shown
    }

    /// Comparing documents in place finds what comparing their JSON finds.
    #[test]
    fn in_place_finds_what_json_finds() {
        let mut a = doc("a");
        a.set("meta", json!({ "lang": "en", "n": 1.0, "gone": [1] }))
            .expect("set");
        a.set("only_live", json!(1)).expect("set");
        let mut b = doc("b");
        b.set("meta", json!({ "lang": "fr", "n": 1, "new": null }))
            .expect("set");
        b.set("only_shadow", json!("x")).expect("set");
        b.set_run_id(Some("r".into()));
        let mut dropped = doc("a");
        dropped.set_dropped(true);
        let mut nested = doc("a");
        nested.add_child(doc("inner")).expect("child");
        let mut child = doc("c1");
        child.set("k", json!(1)).expect("set");
        let mut other_child = doc("c1");
        other_child.set("k", json!(2)).expect("set");
        let cases: Vec<(Vec<Document>, Document, Vec<Document>, Document)> = vec![
            (vec![], a.clone(), vec![], b.clone()),
            (vec![], a.clone(), vec![], dropped.clone()),
            (vec![], dropped.clone(), vec![], dropped.clone()),
            (vec![], a.clone(), vec![], nested.clone()),
            (vec![child.clone()], a.clone(), vec![], a.clone()),
            (vec![], a.clone(), vec![child.clone(), doc("c2")], a.clone()),
            (
                vec![child.clone(), doc("c2")],
                a.clone(),
                vec![other_child, doc("c3")],
                b,
            ),
        ];
        for (i, (live_children, live, children, shadow)) in cases.into_iter().enumerate() {
            let (lo, so): (DocumentOutcome, DocumentOutcome) = (Ok(live_children), Ok(children));
            let (live_json, shadow_json) = (output(&lo, &live), output(&so, &shadow));
            let mut as_json = Differences::unbounded();
            as_json.compare(&live_json, &shadow_json);
            let mut in_place = Differences::unbounded();
            let (Ok(lc), Ok(sc)) = (&lo, &so) else {
                unreachable!()
            };
            compare_made(&mut in_place, (lc, &live), (sc, &shadow));
            assert_eq!(shown(in_place.found()), shown(as_json.found()), "case {i}");
        }
    }

    /// A shadow that changes every field of a large document costs the
    /// comparison no more than the line shows: it stops one past.
    #[test]
    fn the_comparison_stops_one_past_what_a_line_shows() {
        let mut live = Document::new("d");
        let mut shadow = Document::new("d");
        for n in 0..20_000 {
            live.set(&format!("f{n}"), json!(n)).expect("set");
            shadow.set(&format!("f{n}"), json!(-n)).expect("set");
        }
        let mut d = Differences::new(MAX_DIFFERENCES + 1, MAX_ID_BYTES);
        compare_made(&mut d, (&[], &live), (&[], &shadow));
        assert_eq!(d.found().len(), MAX_DIFFERENCES + 1);
        let line = difference_line("p", "s", "d", d.found());
        assert_eq!(line["more_differences"], true);
        assert_eq!(
            line["differences"].as_array().map(Vec::len),
            Some(MAX_DIFFERENCES)
        );
    }
}
