use super::*;

fn filter(limit: usize) -> TapFilter {
    TapFilter {
        pipeline: "tap-test".into(),
        stage: Some("s".into()),
        run_id: None,
        limit,
        percent: 100.0,
    }
}

#[test]
fn a_tap_takes_its_limit_and_no_more_and_closes_when_dropped() {
    let taps = Taps::default();
    let (mut rx, guard) = taps.open(filter(3)).expect("a tap");
    assert!(taps.any());
    for i in 0..10 {
        taps.offer("tap-test", Some("s"), &Document::new(format!("d{i}")));
        taps.offer("tap-test", Some("other"), &Document::new(format!("o{i}")));
    }
    let mut got = Vec::new();
    while let Ok(line) = rx.try_recv() {
        got.push(line["document"]["id"].as_str().expect("an id").to_owned());
    }
    assert_eq!(got, ["d0", "d1", "d2"]);
    drop(guard);
    assert!(!taps.any());
    // Each process's taps are its own: another's see nothing of these.
    let other = Taps::default();
    let (mut elsewhere, _guard) = other.open(filter(3)).expect("a tap");
    let (mut here, _guard) = taps.open(filter(3)).expect("a tap");
    taps.offer("tap-test", Some("s"), &Document::new("d"));
    assert!(here.try_recv().is_ok());
    assert!(elsewhere.try_recv().is_err());
}

#[test]
fn a_slow_reader_misses_documents_and_never_blocks() {
    let taps = Taps::default();
    let (mut rx, _guard) = taps
        .open(TapFilter {
            pipeline: "tap-slow".into(),
            ..filter(MAX_LIMIT)
        })
        .expect("a tap");
    for i in 0..(BUFFER * 3) {
        taps.offer("tap-slow", Some("s"), &Document::new(format!("d{i}")));
    }
    let mut n = 0;
    while rx.try_recv().is_ok() {
        n += 1;
    }
    assert_eq!(n, BUFFER);
}

#[test]
fn a_big_document_is_sent_as_its_id_and_size() {
    let mut doc = Document::new("big");
    doc.set("text", "x".repeat(MAX_DOCUMENT_BYTES + 10).into())
        .expect("a field");
    let line = line("p", None, &doc);
    assert_eq!(line["document"]["truncated"], true);
    assert_eq!(line["document"]["id"], "big");
}

#[test]
fn a_tap_naming_what_the_config_lacks_is_refused_with_what_it_has() {
    let taps = Taps::default();
    let stages = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect();
    taps.know(TapNames::new([
        ("tap-test".to_owned(), stages(&["s", "t"])),
        ("other".to_owned(), stages(&[])),
    ]));
    let refused = taps
        .open(TapFilter {
            pipeline: "nope".into(),
            ..filter(1)
        })
        .expect_err("no such pipeline");
    assert_eq!(
        refused.to_string(),
        "no pipeline `nope` (there are: other, tap-test)"
    );
    let refused = taps
        .open(TapFilter {
            stage: Some("x".into()),
            ..filter(1)
        })
        .expect_err("no such stage");
    assert!(
        refused
            .to_string()
            .starts_with("pipeline `tap-test` has no stage `x` (it has: s, t;"),
        "{refused}"
    );
    assert!(taps.open(filter(1)).is_ok());
    assert!(
        taps.open(TapFilter {
            stage: None,
            ..filter(1)
        })
        .is_ok()
    );
}

#[test]
fn a_tap_ends_with_its_run_after_what_was_sent() {
    let taps = Taps::default();
    let (mut on_run, _a) = taps
        .open(TapFilter {
            run_id: Some("r1".into()),
            ..filter(5)
        })
        .expect("a tap");
    let (mut on_other, _b) = taps
        .open(TapFilter {
            run_id: Some("r2".into()),
            ..filter(5)
        })
        .expect("a tap");
    let (mut on_any, _c) = taps.open(filter(5)).expect("a tap");
    let mut doc = Document::new("d");
    doc.set_run_id(Some("r1".into()));
    taps.offer("tap-test", Some("s"), &doc);
    taps.run_ended("r1");
    // What was sent is still read, then the end.
    assert!(on_run.try_recv().is_ok());
    assert_eq!(
        on_run.try_recv(),
        Err(tokio::sync::mpsc::error::TryRecvError::Disconnected)
    );
    assert!(on_any.try_recv().is_ok());
    assert_eq!(
        on_any.try_recv(),
        Err(tokio::sync::mpsc::error::TryRecvError::Disconnected)
    );
    assert_eq!(
        on_other.try_recv(),
        Err(tokio::sync::mpsc::error::TryRecvError::Empty)
    );
    assert!(taps.any(), "the other run's tap stays open");
    for end in [TapEnd::Limit, TapEnd::Time, TapEnd::Run] {
        assert_eq!(TapEnd::of_line(&end.line()), Some(end));
    }
    assert_eq!(
        TapEnd::of_line(&json!({"end": "run", "document": {}})),
        None
    );
}
