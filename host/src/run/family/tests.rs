//! Unit tests of children following their parent.

use std::collections::BTreeMap;

use super::codec::{decode, encode};
use super::*;
use crate::core::event::Event;

const RUN: &str = "run";

/// Kept children in memory, each change with the position it waits for.
#[derive(Default)]
struct Memory {
    keys: Mutex<BTreeMap<String, String>>,
    changes: Mutex<Vec<(String, Option<String>, u64)>>,
    refuse: bool,
}

impl Kept for Memory {
    fn get(&self, root: &str) -> Option<String> {
        self.keys.lock().expect("lock").get(root).cloned()
    }
    fn set(&self, root: &str, value: Option<&str>, position: u64) -> Result<(), String> {
        if self.refuse {
            return Err("over limits.max_state_mib".into());
        }
        let mut keys = self.keys.lock().expect("lock");
        match value {
            Some(v) => keys.insert(root.into(), v.into()),
            None => keys.remove(root),
        };
        self.changes
            .lock()
            .expect("lock")
            .push((root.into(), value.map(str::to_owned), position));
        Ok(())
    }
}

impl Memory {
    fn children(&self, root: &str) -> Vec<String> {
        self.get(root)
            .map(|v| decode(root, &v).expect("readable"))
            .unwrap_or_default()
    }
}

fn ids(ids: &[&str]) -> Vec<String> {
    ids.iter().map(|s| (*s).to_owned()).collect()
}

fn event(id: &str, kind: EventKind) -> Event {
    let mut doc = Document::new(id);
    doc.set_run_id(Some(RUN.into()));
    Event::new(&doc, kind)
}

fn create(child: &str, root: &str) -> Event {
    let mut doc = Document::new(child);
    doc.set_run_id(Some(RUN.into()));
    Event::created(&doc, root)
}

fn setup(memory: &Arc<Memory>) -> (Arc<Accounting>, Arc<Family>) {
    let accounting = Arc::new(Accounting::new(RUN));
    let family = Arc::new(Family::new(Arc::clone(memory) as Arc<dyn Kept>, RUN));
    accounting
        .family
        .set(Arc::clone(&family) as Arc<dyn Children>)
        .expect("a value");
    (accounting, family)
}

/// Publish `root`, make `children` of it, end it with `kind`.
fn version(accounting: &Accounting, root: &str, children: &[&str], kind: EventKind) {
    accounting.published(root);
    for child in children {
        accounting.apply(&create(child, root));
        accounting.apply(&event(child, EventKind::Finish));
    }
    accounting.apply(&event(root, kind));
}

fn queued(family: &Family) -> Vec<String> {
    family.inner().queue.iter().cloned().collect()
}

#[test]
fn ids_are_written_compactly_and_read_back() {
    let chunks: Vec<String> = (0..1000).map(|n| format!("page-{n}")).collect();
    let value = encode("page", &chunks).expect("a value");
    assert_eq!(value, r#"[["+-",0,999]]"#);
    let mut back = decode("page", &value).expect("a value");
    back.sort();
    let mut want = chunks.clone();
    want.sort();
    assert_eq!(back, want);

    let odd = ids(&[
        "page-7",
        "other",
        "page-01",
        "page",
        "page-2",
        "page-3",
        "page-x",
        "page-9",
        "page-4",
        "page-7",
        "42",
        "page-18446744073709551615",
    ]);
    let value = encode("page", &odd).expect("a value");
    let mut back = decode("page", &value).expect("a value");
    back.sort();
    let mut want = odd.clone();
    want.sort();
    want.dedup();
    assert_eq!(back, want, "{value}");
    assert_eq!(
        encode("page", &ids(&["page-3", "page-2", "page-4"])),
        encode("page", &ids(&["page-4", "page-3", "page-2", "page-3"])),
        "one value whatever the order"
    );
    assert_eq!(encode("page", &[]), None);
}

#[test]
fn values_not_written_by_the_host_are_refused() {
    for bad in [
        "{}",
        "[1]",
        r#"["x"]"#,
        r#"[["+-", 5, 1]]"#,
        r#"[["+-", 0, 99999999999]]"#,
        "not json",
    ] {
        assert!(decode("p", bad).is_err(), "{bad}");
    }
}

#[test]
fn a_page_that_shrinks_deletes_the_chunks_it_no_longer_makes() {
    let memory = Arc::new(Memory::default());
    let (accounting, family) = setup(&memory);
    version(
        &accounting,
        "page",
        &["page-0", "page-1", "page-2", "page-3", "page-4"],
        EventKind::Finish,
    );
    assert_eq!(
        accounting.pending(),
        0,
        "nothing was kept before: no markers"
    );
    assert_eq!(memory.children("page").len(), 5);

    // The next run: the page makes 3 chunks.
    let (accounting, family2) = setup(&memory);
    drop(family);
    accounting.published("unrelated");
    version(
        &accounting,
        "page",
        &["page-0", "page-1", "page-2"],
        EventKind::Finish,
    );
    assert_eq!(queued(&family2), ids(&["page-3", "page-4"]));
    assert_eq!(accounting.pending(), 3, "the markers and `unrelated`");
    assert_eq!(
        memory.children("page"),
        ids(&["page-0", "page-1", "page-2"])
    );
    let (_, _, position) = memory
        .changes
        .lock()
        .expect("lock")
        .last()
        .cloned()
        .expect("a value");
    assert_eq!(position, 2, "the key waits for the page (position 1)");
    accounting.apply(&event("unrelated", EventKind::Finish));
    assert!(
        accounting.watermark() < position,
        "markers held at the page's position hold back the key"
    );
    accounting.apply(&event("page-3", EventKind::Finish));
    accounting.apply(&event("page-4", EventKind::Finish));
    assert_eq!(accounting.pending(), 0);
    assert!(accounting.watermark() >= position);
    assert_eq!(family2.deleted(), 2);
}

#[test]
fn a_deleted_page_deletes_all_its_chunks_and_its_key() {
    let memory = Arc::new(Memory::default());
    let (accounting, _family) = setup(&memory);
    version(
        &accounting,
        "page",
        &["page-0", "page-1"],
        EventKind::Finish,
    );
    let (accounting, family) = setup(&memory);
    // Its deletion marker goes through without children.
    version(&accounting, "page", &[], EventKind::Finish);
    assert_eq!(queued(&family), ids(&["page-0", "page-1"]));
    assert_eq!(memory.get("page"), None);
}

#[test]
fn a_page_that_grows_or_stays_deletes_nothing() {
    let memory = Arc::new(Memory::default());
    let (accounting, family) = setup(&memory);
    version(&accounting, "page", &["page-0"], EventKind::Finish);
    version(
        &accounting,
        "page",
        &["page-0", "page-1"],
        EventKind::Finish,
    );
    let writes = memory.changes.lock().expect("lock").len();
    version(
        &accounting,
        "page",
        &["page-1", "page-0"],
        EventKind::Finish,
    );
    assert!(queued(&family).is_empty());
    assert_eq!(
        memory.changes.lock().expect("lock").len(),
        writes,
        "the same children: the key is not written again"
    );
    // A document that never made children costs no write.
    version(&accounting, "plain", &[], EventKind::Finish);
    assert_eq!(memory.changes.lock().expect("lock").len(), writes);
}

#[test]
fn a_failed_version_deletes_nothing_and_keeps_what_it_made() {
    let memory = Arc::new(Memory::default());
    let (accounting, family) = setup(&memory);
    version(
        &accounting,
        "page",
        &["page-0", "page-1"],
        EventKind::Finish,
    );
    version(&accounting, "page", &["page-2"], EventKind::Fail);
    assert!(queued(&family).is_empty());
    assert_eq!(
        memory.children("page"),
        ids(&["page-0", "page-1", "page-2"])
    );
    // The next version that goes through deletes what it does not make.
    version(&accounting, "page", &["page-0"], EventKind::Finish);
    assert_eq!(queued(&family), ids(&["page-1", "page-2"]));
}

#[test]
fn a_dropped_root_deletes_the_children_it_no_longer_makes() {
    let memory = Arc::new(Memory::default());
    let (accounting, family) = setup(&memory);
    version(&accounting, "page", &["page-0", "page-1"], EventKind::Drop);
    version(&accounting, "page", &["page-0"], EventKind::Drop);
    assert_eq!(queued(&family), ids(&["page-1"]));
}

#[test]
fn grandchildren_count_for_their_root() {
    let memory = Arc::new(Memory::default());
    let (accounting, family) = setup(&memory);
    accounting.published("book");
    for id in ["book-0", "book-0-0", "book-0-1"] {
        accounting.apply(&create(id, "book"));
    }
    accounting.apply(&event("book", EventKind::Finish));
    assert_eq!(memory.children("book").len(), 3);
    version(
        &accounting,
        "book",
        &["book-0", "book-0-0"],
        EventKind::Finish,
    );
    assert_eq!(queued(&family), ids(&["book-0-1"]));
}

#[test]
fn two_versions_pending_at_once_are_taken_together() {
    let memory = Arc::new(Memory::default());
    let (accounting, family) = setup(&memory);
    version(
        &accounting,
        "page",
        &["page-0", "page-1", "page-2"],
        EventKind::Finish,
    );
    accounting.published("page");
    accounting.published("page");
    accounting.apply(&create("page-0", "page"));
    accounting.apply(&create("page-1", "page"));
    accounting.apply(&event("page", EventKind::Finish));
    assert!(queued(&family).is_empty(), "another version is pending");
    accounting.apply(&create("page-0", "page"));
    accounting.apply(&event("page", EventKind::Finish));
    assert_eq!(queued(&family), ids(&["page-2"]));
    assert_eq!(memory.children("page"), ids(&["page-0", "page-1"]));
}

#[test]
fn creates_of_a_root_not_pending_are_not_collected() {
    let memory = Arc::new(Memory::default());
    let (accounting, family) = setup(&memory);
    version(&accounting, "page", &["page-0"], EventKind::Finish);
    // A redelivered pass's CREATE after its root was done.
    accounting.apply(&create("page-9", "page"));
    assert!(family.inner().made.is_empty());
}

#[test]
fn children_that_cannot_be_kept_stop_the_run_and_delete_nothing() {
    let memory = Arc::new(Memory {
        refuse: true,
        ..Memory::default()
    });
    memory.keys.lock().expect("lock").insert(
        "page".into(),
        encode("page", &ids(&["page-0", "page-1"])).expect("a value"),
    );
    let (accounting, family) = setup(&memory);
    version(&accounting, "page", &["page-0"], EventKind::Finish);
    assert!(queued(&family).is_empty());
    assert!(family.error().expect("a value").contains("max_state_mib"));
}

#[test]
fn markers_an_earlier_runner_published_are_not_published_again() {
    let memory = Arc::new(Memory::default());
    memory.keys.lock().expect("lock").insert(
        "page".into(),
        encode("page", &ids(&["page-0", "page-1"])).expect("a value"),
    );
    let (accounting, family) = setup(&memory);
    family.resumed(&Arc::new(Skip::new(&ids(&["page-1"]))));
    // Resumed: the earlier runner's marker is pending at a position of its own.
    accounting.published("page-1");
    accounting.published("page");
    accounting.published("later");
    accounting.apply(&event("page", EventKind::Finish));
    assert_eq!(queued(&family), ids(&["page-0"]));
    let (_, _, position) = memory
        .changes
        .lock()
        .expect("lock")
        .last()
        .cloned()
        .expect("a value");
    assert_eq!(position, 3, "the key waits for everything published so far");
}

/// A pipeline with room for `room` documents.
struct Pipe {
    room: Mutex<usize>,
    sent: Mutex<Vec<Document>>,
}

impl PublisherMessenger for Pipe {
    fn send_for_processing(
        &self,
        doc: Document,
        timeout: Duration,
    ) -> Result<Option<Document>, MessengerError> {
        assert_eq!(timeout, Duration::ZERO, "markers never wait for room");
        let mut room = self.room.lock().expect("lock");
        if *room == 0 {
            return Ok(Some(doc));
        }
        *room -= 1;
        self.sent.lock().expect("lock").push(doc);
        Ok(None)
    }
    fn poll_event(&self, _: Duration) -> Result<crate::messenger::Polled<Event>, MessengerError> {
        Ok(crate::messenger::Polled::Idle)
    }
}

#[test]
fn markers_are_published_as_room_allows_without_waiting() {
    let memory = Arc::new(Memory::default());
    memory.keys.lock().expect("lock").insert(
        "page".into(),
        encode("page", &ids(&["page-0", "page-1", "page-2"])).expect("a value"),
    );
    let (accounting, family) = setup(&memory);
    version(&accounting, "page", &[], EventKind::Finish);
    let pipe = Pipe {
        room: Mutex::new(2),
        sent: Mutex::default(),
    };
    family.flush(&pipe, &accounting).expect("a value");
    assert_eq!(pipe.sent.lock().expect("lock").len(), 2);
    *pipe.room.lock().expect("lock") = 5;
    family.flush(&pipe, &accounting).expect("a value");
    let sent = pipe.sent.lock().expect("lock");
    let sent_ids: Vec<&str> = sent.iter().map(Document::id).collect();
    assert_eq!(sent_ids, ["page-0", "page-1", "page-2"]);
    assert!(
        sent.iter()
            .all(|d| d.is_deleted() && d.run_id() == Some(RUN))
    );
    assert_eq!(Accounting::get(&accounting.published), 3, "the markers");
}

#[test]
fn kept_children_commit_in_position_order_and_before_the_connectors_state() {
    use crate::core::state::{MemoryStates, StateStores};
    let states = Arc::new(MemoryStates::default());
    let accounting = Arc::new(Accounting::new(RUN));
    let load = |name: &str| {
        let store = states.open("p", name).expect("a value");
        Arc::new(Ledger::load(store, Arc::clone(&accounting), 1 << 20, false).expect("a value"))
    };
    let (state, children) = (load("c"), load("c#children"));
    state.commit_first(Arc::clone(&children));
    let stored = |name: &str| {
        states
            .open("p", name)
            .expect("a value")
            .load()
            .expect("a value")
            .len()
    };
    accounting.published("a");
    accounting.published("b");
    // `b` ends first: its key waits for `a` too; `a`'s goes before it.
    Kept::set(&*children, "b", Some("[]"), 2).expect("a value");
    Kept::set(&*children, "a", Some("[]"), 1).expect("a value");
    state
        .change("fingerprint-of-b", Some("1"))
        .expect("a value");
    accounting.apply(&event("a", EventKind::Finish));
    state.commit().expect("a value");
    assert_eq!(
        (stored("c#children"), stored("c")),
        (1, 0),
        "`a`'s key only"
    );
    accounting.apply(&event("b", EventKind::Finish));
    state.commit().expect("a value");
    assert_eq!((stored("c#children"), stored("c")), (2, 1));
    assert_eq!(children.uncommitted(), 0);
}

#[test]
fn a_marker_done_counts_as_a_delete_and_one_that_failed_keeps_its_child() {
    let memory = Arc::new(Memory::default());
    let (accounting, family) = setup(&memory);
    version(
        &accounting,
        "page",
        &["page-0", "page-1", "page-2"],
        EventKind::Finish,
    );
    version(&accounting, "page", &["page-0"], EventKind::Finish);
    assert_eq!(queued(&family), ids(&["page-1", "page-2"]));
    assert_eq!(memory.children("page"), ids(&["page-0"]));
    let (_, _, position) = memory
        .changes
        .lock()
        .expect("lock")
        .last()
        .cloned()
        .expect("a value");
    accounting.apply(&event("page-1", EventKind::Finish));
    assert_eq!(Accounting::get(&accounting.deleted), 1);
    accounting.apply(&event("page-2", EventKind::Fail));
    assert_eq!(Accounting::get(&accounting.deleted), 1);
    assert_eq!(
        memory.children("page"),
        ids(&["page-0", "page-2"]),
        "page-2 may still be in the index: a later version deletes it"
    );
    let (_, _, again) = memory
        .changes
        .lock()
        .expect("lock")
        .last()
        .cloned()
        .expect("a value");
    assert_eq!(again, position, "with the key's change, where it waits");
    assert!(family.error().is_none());
}
