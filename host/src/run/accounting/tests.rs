//! Unit tests of the publisher accounting.

use super::*;

fn event(id: &str, kind: EventKind) -> Event {
    Event {
        document_id: id.into(),
        run_id: Some("run".into()),
        kind,
        message: None,
        attempt: None,
        after_creates: 0,
        root: None,
        stage: None,
    }
}

#[test]
fn terminal_events_before_their_create_are_handled() {
    let a = Accounting::new("run");
    a.published("parent");
    a.apply(&event("child", EventKind::Finish));
    assert_eq!(
        a.pending(),
        1,
        "the child's FINISH came first and waits aside"
    );
    a.apply(&event("child", EventKind::Create));
    assert_eq!(a.pending(), 1);
    a.apply(&event("parent", EventKind::Drop));
    assert_eq!(a.pending(), 0);
    assert_eq!(Accounting::get(&a.created), 1);
    assert_eq!(Accounting::get(&a.succeeded), 1);
    assert_eq!(Accounting::get(&a.dropped), 1);
}

#[test]
fn the_same_id_published_twice_needs_two_terminal_events() {
    let a = Accounting::new("run");
    a.published("d");
    a.published("d");
    a.apply(&event("d", EventKind::Finish));
    assert_eq!(a.pending(), 1);
    a.apply(&event("d", EventKind::Fail));
    assert_eq!(a.pending(), 0);
}

#[test]
fn duplicate_terminal_events_never_hold_up_completion() {
    let a = Accounting::new("run");
    a.published("d");
    a.apply(&event("d", EventKind::Finish));
    a.apply(&event("d", EventKind::Finish));
    assert_eq!(a.pending(), 0, "a redelivered document's second FINISH");
    a.published("e");
    assert_eq!(
        a.pending(),
        1,
        "a duplicate is not taken for another id's or publish's event"
    );
}

fn after(mut e: Event, attempt: u64, after_creates: u32) -> Event {
    e.attempt = Some(attempt);
    e.after_creates = after_creates;
    e
}

#[test]
fn a_parent_indexed_before_its_childrens_creates_arrive_stays_pending() {
    let a = Accounting::new("run");
    a.published("parent");
    // The indexer's FINISH for the parent (made in pass 7 after two
    // CREATEs) overtakes the worker's message with those CREATEs.
    a.apply(&after(event("parent", EventKind::Finish), 7, 2));
    assert_eq!(
        a.pending(),
        1,
        "the parent waits for its children's CREATEs"
    );
    a.apply(&after(event("c1", EventKind::Create), 7, 0));
    assert_eq!(a.pending(), 2, "one CREATE seen: the parent still waits");
    a.apply(&after(event("c2", EventKind::Create), 7, 0));
    assert_eq!(a.pending(), 2, "c1 and c2 pending; the parent is done");
    a.apply(&after(event("c1", EventKind::Finish), 7, 1));
    a.apply(&after(event("c2", EventKind::Finish), 7, 2));
    assert_eq!(a.pending(), 0);
    assert_eq!(Accounting::get(&a.succeeded), 3);
    assert_eq!(a.settle().duplicates, 0);
}

#[test]
fn a_lost_passes_finish_never_counts_and_is_a_duplicate() {
    let a = Accounting::new("run");
    a.published("parent");
    // Pass 1's CREATE message was lost in a crash; pass 2 redid it all.
    a.apply(&after(event("parent", EventKind::Finish), 1, 1));
    a.apply(&after(event("child", EventKind::Create), 2, 0));
    a.apply(&after(event("child", EventKind::Finish), 2, 1));
    a.apply(&after(event("parent", EventKind::Finish), 2, 1));
    assert_eq!(a.pending(), 0);
    let settled = a.settle();
    assert_eq!(settled.duplicates, 1, "pass 1's FINISH");
    assert_eq!(Accounting::get(&a.succeeded), 2);
}

#[test]
fn duplicates_are_counted_apart_and_events_of_other_runs_set_aside() {
    let a = Accounting::new("run");
    for id in ["a", "b"] {
        a.published(id);
    }
    for id in ["a", "b", "a", "a"] {
        a.apply(&event(id, EventKind::Finish));
    }
    let mut other = event("b", EventKind::Fail);
    other.run_id = Some("another-run".into());
    a.apply(&other);
    assert_eq!(a.pending(), 0);
    let settled = a.settle();
    assert_eq!((settled.duplicates, settled.foreign), (2, 1));
    assert_eq!(Accounting::get(&a.succeeded), 2, "each document once");
    assert_eq!(Accounting::get(&a.failed), 0);
}

#[test]
fn deletion_markers_done_with_finish_are_counted_deleted() {
    let a = Accounting::new("run");
    a.published_marker("gone");
    a.published_marker("failed");
    a.published("kept");
    // A child made while the first marker is the least pending shares its
    // position: its FINISH is not a delete.
    a.apply(&event("child", EventKind::Create));
    a.apply(&event("child", EventKind::Finish));
    assert_eq!(Accounting::get(&a.deleted), 0);
    a.apply(&event("gone", EventKind::Finish));
    a.apply(&event("failed", EventKind::Fail));
    a.apply(&event("kept", EventKind::Finish));
    assert_eq!(a.pending(), 0);
    assert_eq!(Accounting::get(&a.deleted), 1);
    assert_eq!(Accounting::get(&a.succeeded), 3);
    // A marker then a new version of its id: the marker is the older.
    a.published_marker("again");
    a.published("again");
    a.apply(&event("again", EventKind::Finish));
    assert_eq!(Accounting::get(&a.deleted), 2);
    a.apply(&event("again", EventKind::Finish));
    assert_eq!(Accounting::get(&a.deleted), 2);
}

#[test]
fn an_abandoned_marker_is_not_waited_for_and_still_holds_back_later_state() {
    let a = Accounting::new("run");
    a.published("doc");
    a.published_marker("doc");
    a.published("after");
    let state_change_at = a.position();
    a.abandoned("doc");
    assert_eq!(a.pending(), 2, "the marker is no longer waited for");
    a.apply(&event("doc", EventKind::Finish));
    a.apply(&event("after", EventKind::Finish));
    assert_eq!(a.pending(), 0);
    assert_eq!(Accounting::get(&a.deleted), 0, "the document's FINISH");
    assert!(
        a.watermark() < state_change_at,
        "a change made after the marker is never committed"
    );
}
