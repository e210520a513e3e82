use super::*;
use crate::core::document::Document;

fn header(run: &str, generation: u64) -> Header {
    Header {
        run: run.into(),
        at: "2026-12-07T05:00:00Z".into(),
        generation,
        pipelines: vec![TracedPipeline {
            name: "books".into(),
            stages: vec![TracedStage {
                name: "trim".into(),
                sha256: "ab".repeat(32),
            }],
        }],
        connectors: [("c".to_owned(), "books".to_owned())].into(),
        dead_letters: Some(PathBuf::from("dl/run.jsonl")),
    }
}

fn event(id: &str, kind: EventKind) -> Event {
    let mut doc = Document::new(id);
    doc.set_run_id(Some("r1".into()));
    Event::new(&doc, kind)
}

/// Lines for `events`, as the accounting writes them.
fn record(trace: &Trace, events: &[(Event, bool)]) {
    let mut lines = Vec::new();
    for (event, deleted) in events {
        trace.line(&mut lines, "c", event, *deleted);
    }
    trace.write(&lines);
    trace.flush();
}

#[test]
fn a_documents_history_holds_its_end_its_children_and_its_generations() {
    let dir = tempfile::tempdir().expect("dir");
    let trace = Trace::start(dir.path(), &header("r1", 1), u64::MAX).expect("trace");
    let mut child = Event::created(&Document::new("p-1"), "p").with_stage("split");
    child.run_id = Some("r1".into());
    record(
        &trace,
        &[
            (child, false),
            (event("p-1", EventKind::Finish), false),
            (event("p", EventKind::Finish), false),
            // An id that holds the other: not its history.
            (event("pp", EventKind::Drop).with_stage("trim"), false),
            (event("gone", EventKind::Finish), true),
        ],
    );
    trace.header(&header("r1", 2));
    record(
        &trace,
        &[(
            event("p", EventKind::Fail)
                .with_message("asked to fail")
                .with_stage("trim"),
            false,
        )],
    );
    drop(trace);

    let runs = history(dir.path(), "p").expect("history");
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    assert_eq!((run.run.as_str(), run.cut), ("r1", false));
    let seen: Vec<(&str, EventKind, u64)> = run
        .lines
        .iter()
        .map(|l| (l.id.as_str(), l.event, l.generation))
        .collect();
    assert_eq!(
        seen,
        [
            ("p-1", EventKind::Create, 1),
            ("p", EventKind::Finish, 1),
            ("p", EventKind::Fail, 2)
        ]
    );
    assert_eq!(run.lines[0].stage.as_deref(), Some("split"));
    assert_eq!(run.lines[2].message.as_deref(), Some("asked to fail"));
    assert_eq!(
        run.generations
            .iter()
            .map(|g| g.generation)
            .collect::<Vec<_>>(),
        [1, 2]
    );
    // The child's own: made from p, then indexed.
    let child = history(dir.path(), "p-1").expect("history");
    let kinds: Vec<EventKind> = child[0].lines.iter().map(|l| l.event).collect();
    assert_eq!(kinds, [EventKind::Create, EventKind::Finish]);
    assert_eq!(child[0].lines[0].root.as_deref(), Some("p"));
    // A deletion is said; an id no trace names has no history.
    let gone = history(dir.path(), "gone").expect("history");
    assert!(gone[0].lines[0].deleted);
    assert!(history(dir.path(), "nobody").expect("history").is_empty());
}

#[test]
fn a_long_history_is_cut_and_says_so() {
    let dir = tempfile::tempdir().expect("dir");
    let trace = Trace::start(dir.path(), &header("r2", 1), u64::MAX).expect("trace");
    let events: Vec<(Event, bool)> = (0..MAX_LINES_PER_RUN + 5)
        .map(|_| (event("again", EventKind::Finish), false))
        .collect();
    record(&trace, &events);
    drop(trace);
    let runs = history(dir.path(), "again").expect("history");
    assert_eq!(runs[0].lines.len(), MAX_LINES_PER_RUN);
    assert!(runs[0].cut);
}

#[test]
fn ids_that_need_escaping_are_found() {
    let dir = tempfile::tempdir().expect("dir");
    let trace = Trace::start(dir.path(), &header("r3", 1), u64::MAX).expect("trace");
    let odd = "a \"quoted\"\\id\n";
    record(&trace, &[(event(odd, EventKind::Finish), false)]);
    drop(trace);
    let runs = history(dir.path(), odd).expect("history");
    assert_eq!(runs[0].lines[0].id, odd);
}

#[test]
fn a_trace_stops_at_its_bound_and_says_so() {
    let dir = tempfile::tempdir().expect("dir");
    let bound = 4096;
    let trace = Trace::start(dir.path(), &header("r4", 1), bound).expect("trace");
    for n in 0..200 {
        record(
            &trace,
            &[(event(&format!("doc-{n}"), EventKind::Finish), false)],
        );
    }
    drop(trace);
    let text = std::fs::read_to_string(dir.path().join("r4.jsonl")).expect("trace");
    assert!(text.len() as u64 <= bound, "{} bytes", text.len());
    assert!(text.ends_with("{\"full\":true}\n"), "{text}");
    // Every line it kept is whole, and a history read from it says it was cut.
    assert!(
        text.lines()
            .all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok())
    );
    let first = history(dir.path(), "doc-0").expect("history");
    assert!(first[0].cut);
    assert!(history(dir.path(), "doc-199").expect("history").is_empty());
}
