//! The ledger commits a change only once every document published before it
//! is done, children included, and keeps what it commits.

use std::sync::Arc;

use super::{Ledger, SqliteStates};
use crate::core::document::Document;
use crate::core::event::{Event, EventKind};
use crate::core::state::{MemoryStates, StateChange, StateError, StateStore, StateStores};
use crate::plugin::ConnectorState;
use crate::run::accounting::Accounting;

const RUN: &str = "r1";

fn event(id: &str, kind: EventKind) -> Event {
    let mut doc = Document::new(id);
    doc.set_run_id(Some(RUN.into()));
    Event::new(&doc, kind)
}

fn ledger(states: &dyn StateStores, accounting: &Arc<Accounting>) -> Ledger {
    let store = states.open("p", "c").expect("store");
    Ledger::load(store, Arc::clone(accounting), 1 << 20, false).expect("loaded")
}

fn committed(states: &dyn StateStores) -> Vec<(String, String)> {
    let mut all = states.open("p", "c").expect("store").load().expect("load");
    all.sort();
    all
}

fn pair(k: &str, v: &str) -> (String, String) {
    (k.to_owned(), v.to_owned())
}

#[test]
fn a_change_waits_for_every_document_published_before_it() {
    let states = Arc::new(MemoryStates::default());
    let accounting = Arc::new(Accounting::new(RUN));
    let state = ledger(&states, &accounting);
    accounting.published("a");
    state.change("a", Some("1")).expect("set");
    accounting.published("b");
    state.change("b", Some("2")).expect("set");
    // Seen at once by the connector, kept by nobody yet.
    assert_eq!(state.get("b").as_deref(), Some("2"));
    state.commit().expect("commit");
    assert!(committed(&states).is_empty());
    // b done first: a still holds both back.
    accounting.apply(&event("b", EventKind::Finish));
    state.commit().expect("commit");
    assert!(committed(&states).is_empty());
    accounting.apply(&event("a", EventKind::Fail));
    state.commit().expect("commit");
    assert_eq!(committed(&states), [pair("a", "1"), pair("b", "2")]);
    assert_eq!(state.committed(), 2);
    assert_eq!(state.uncommitted(), 0);
}

#[test]
fn a_child_holds_back_what_its_parent_did() {
    let states = Arc::new(MemoryStates::default());
    let accounting = Arc::new(Accounting::new(RUN));
    let state = ledger(&states, &accounting);
    accounting.published("parent");
    state.change("parent", Some("v")).expect("set");
    accounting.published("later");
    state.change("later", Some("w")).expect("set");
    // The parent makes a child, then is indexed; the child is not yet.
    accounting.apply(&event("child", EventKind::Create));
    accounting.apply(&event("parent", EventKind::Finish));
    accounting.apply(&event("later", EventKind::Finish));
    state.commit().expect("commit");
    assert!(
        committed(&states).is_empty(),
        "the parent's change waits for its child too"
    );
    accounting.apply(&event("child", EventKind::Finish));
    state.commit().expect("commit");
    assert_eq!(
        committed(&states),
        [pair("later", "w"), pair("parent", "v")]
    );
}

#[test]
fn two_versions_of_an_id_are_done_oldest_first() {
    let states = Arc::new(MemoryStates::default());
    let accounting = Arc::new(Accounting::new(RUN));
    let state = ledger(&states, &accounting);
    accounting.published("x");
    accounting.published("x");
    state.change("x", Some("2")).expect("set");
    accounting.apply(&event("x", EventKind::Finish));
    state.commit().expect("commit");
    assert!(
        committed(&states).is_empty(),
        "the second version is not done"
    );
    accounting.apply(&event("x", EventKind::Finish));
    state.commit().expect("commit");
    assert_eq!(committed(&states), [pair("x", "2")]);
}

#[test]
fn removes_and_repeated_changes_are_committed_in_order() {
    let states = Arc::new(MemoryStates::default());
    states
        .open("p", "c")
        .and_then(|mut s| s.commit(&[("gone".into(), Some("old".into()))]))
        .expect("seeded");
    let accounting = Arc::new(Accounting::new(RUN));
    let state = ledger(&states, &accounting);
    assert_eq!(state.get("gone").as_deref(), Some("old"), "loaded");
    for v in ["1", "2", "3"] {
        state.change("k", Some(v)).expect("set");
    }
    assert_eq!(state.uncommitted(), 1, "no publish between: one change");
    state.change("gone", None).expect("remove");
    assert_eq!(state.get("gone"), None);
    assert_eq!(state.list(None, 10), [pair("k", "3")]);
    state.commit().expect("commit");
    assert_eq!(committed(&states), [pair("k", "3")]);
}

#[test]
fn state_past_its_limit_is_refused_and_nothing_changes() {
    use crate::core::state::{CHANGE_ENTRY_BYTES, VIEW_ENTRY_BYTES};
    let states = Arc::new(MemoryStates::default());
    let accounting = Arc::new(Accounting::new(RUN));
    let store = states.open("p", "c").expect("store");
    // Room for two keys and their changes, with 100 bytes of text.
    let limit = 2 * (VIEW_ENTRY_BYTES + CHANGE_ENTRY_BYTES) + 100;
    let state = Ledger::load(store, Arc::clone(&accounting), limit, false).expect("loaded");
    state.change("a", Some(&"x".repeat(40))).expect("within");
    let error = state
        .change("b", Some(&"y".repeat(10)))
        .expect_err("over the limit with the uncommitted changes");
    assert!(error.contains("limits.max_state_mib"), "{error}");
    assert_eq!(state.get("b"), None);
    assert_eq!(state.size(), (1, 41), "size counts keys and values only");
    // Committed, a's change no longer counts twice: b fits.
    state.commit().expect("commit");
    state.change("b", Some(&"y".repeat(10))).expect("fits now");
}

/// The bound counts what the host holds for each key, not the bytes of its
/// text: a connector of many tiny keys is stopped at as many as the bytes
/// the host spends on them allow (4M keys of 8 bytes counted 32 MB of text
/// and took the host to 723 MB).
#[test]
fn many_tiny_keys_count_what_the_host_spends_on_each() {
    use crate::core::state::{CHANGE_ENTRY_BYTES, VIEW_ENTRY_BYTES};
    let states = Arc::new(MemoryStates::default());
    let accounting = Arc::new(Accounting::new(RUN));
    let store = states.open("p", "c").expect("store");
    let limit = 4 << 20;
    let state = Ledger::load(store, Arc::clone(&accounting), limit, false).expect("loaded");
    let mut kept = 0usize;
    let error = loop {
        match state.change(&format!("k{kept:07}"), Some("")) {
            Ok(()) => kept += 1,
            Err(e) => break e,
        }
        assert!(kept <= limit / 8, "counted as text only");
    };
    let per_key = 8 + VIEW_ENTRY_BYTES + 8 + CHANGE_ENTRY_BYTES;
    assert_eq!(kept, limit / per_key, "{error}");
    assert!(
        error.contains("limits.max_state_mib") && error.contains("bytes a key"),
        "{error}"
    );
    // Removing a key at the limit is let through: it holds no more, and
    // gives bytes back once committed.
    state.change("k0000000", None).expect("a removal");
    // Committed in slices, every one of them.
    state.commit().expect("commit");
    assert_eq!(state.committed(), kept as u64 + 1);
    assert!(kept > super::COMMIT_SLICE, "{kept}");
    state
        .change("another", Some(""))
        .expect("room again once committed");
}

#[test]
fn pages_of_keys_follow_key_order() {
    let states = Arc::new(MemoryStates::default());
    let accounting = Arc::new(Accounting::new(RUN));
    let state = ledger(&states, &accounting);
    for key in ["b", "a", "d", "c"] {
        state.change(key, Some(key)).expect("set");
    }
    let first = state.list(None, 3);
    assert_eq!(first, [pair("a", "a"), pair("b", "b"), pair("c", "c")]);
    assert_eq!(state.list(Some("c"), 3), [pair("d", "d")]);
    assert!(state.list(Some("d"), 3).is_empty());
}

#[test]
fn sqlite_keeps_each_scope_apart_across_opens() {
    let dir = tempfile::tempdir().expect("dir");
    let states = SqliteStates::new(dir.path().join("deep/state.sqlite"));
    let mut one = states.open("p", "c").expect("open");
    one.commit(&[
        ("k".into(), Some("v".into())),
        ("x".into(), Some("1".into())),
        ("x".into(), None),
    ])
    .expect("commit");
    let mut other = states.open("p", "other").expect("open");
    other
        .commit(&[("k".into(), Some("w".into()))])
        .expect("commit");
    drop((one, other));
    assert_eq!(committed(&states), [pair("k", "v")]);
    let mut again = states.open("p", "other").expect("open");
    assert_eq!(again.load().expect("load"), [pair("k", "w")]);
    again.clear().expect("clear");
    assert!(again.load().expect("load").is_empty());
    assert_eq!(
        committed(&states),
        [pair("k", "v")],
        "another scope untouched"
    );
}

#[test]
fn sqlite_makes_its_file_only_to_keep_a_connectors_own_keys() {
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("deep/state.sqlite");
    let states = SqliteStates::new(&file);
    assert!(!states.exists("p").expect("asked"));
    // A load that finds nothing, a clear, a commit of nothing or of
    // removals only: no file (and no folder).
    let mut own = states.open("p", "s/c").expect("open");
    assert!(own.load().expect("load").is_empty());
    own.clear().expect("clear");
    own.commit(&[]).expect("commit");
    own.commit(&[("gone".into(), None)]).expect("commit");
    // The host's parts are held in memory while there is no file: seen by
    // a later open of the same states, written by the first commit that
    // makes the file.
    let mut meta = states.open("p", "s/c#meta").expect("open");
    meta.commit(&[("source".into(), Some("f1".into()))])
        .expect("commit");
    meta.commit(&[("generation".into(), Some("7".into()))])
        .expect("commit");
    let mut children = states.open("p", "s/c#children").expect("open");
    children
        .commit(&[("parent".into(), Some("[]".into()))])
        .expect("commit");
    children.clear().expect("clear");
    assert!(!file.exists() && !file.parent().expect("dir").exists());
    let mut seen = states
        .open("p", "s/c#meta")
        .expect("open")
        .load()
        .expect("load");
    seen.sort();
    assert_eq!(seen, [pair("generation", "7"), pair("source", "f1")]);
    own.commit(&[("k".into(), Some("v".into()))])
        .expect("commit");
    assert!(states.exists("p").expect("asked"));
    // Read from the file alone, as another process would.
    let fresh = SqliteStates::new(&file);
    let load = |scope: &str| {
        let mut kept = fresh.open("p", scope).expect("open").load().expect("load");
        kept.sort();
        kept
    };
    assert_eq!(load("s/c"), [pair("k", "v")]);
    assert_eq!(
        load("s/c#meta"),
        [pair("generation", "7"), pair("source", "f1")]
    );
    assert!(
        load("s/c#children").is_empty(),
        "cleared before the file was made"
    );
    // Once the file exists, the host's parts write to it at once.
    meta.commit(&[("generation".into(), Some("8".into()))])
        .expect("commit");
    assert_eq!(
        load("s/c#meta"),
        [pair("generation", "8"), pair("source", "f1")]
    );
}

#[test]
fn sqlite_refuses_a_file_that_is_not_a_database_and_leaves_it() {
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("state.sqlite");
    std::fs::write(&file, vec![b'x'; 4096]).expect("write");
    let states = SqliteStates::new(&file);
    let e = states.open("p", "c").err().expect("refused");
    assert!(e.to_string().contains("not a database"), "{e}");
    assert_eq!(std::fs::read(&file).expect("read"), vec![b'x'; 4096]);
}

/// What a store runs once, while it writes a commit.
type Hook = Arc<std::sync::Mutex<Option<Box<dyn FnOnce() + Send>>>>;

/// A store that runs `during` (once) while it writes a commit, as the
/// connector's thread may: the ledger's lock is not held then.
struct Interleaved {
    inner: Box<dyn StateStore>,
    during: Hook,
}

impl StateStore for Interleaved {
    fn load(&mut self) -> Result<Vec<(String, String)>, StateError> {
        self.inner.load()
    }
    fn commit(&mut self, changes: &[StateChange]) -> Result<(), StateError> {
        let during = self.during.lock().expect("hook").take();
        if let Some(during) = during {
            during();
        }
        self.inner.commit(changes)
    }
    fn clear(&mut self) -> Result<(), StateError> {
        self.inner.clear()
    }
}

/// A ledger over memory whose store runs `key = value` as a change of the
/// connector's in the middle of the next commit's write: the stores, the
/// ledger, and the hook (empty once it ran).
fn changed_mid_commit(
    key: &'static str,
    value: &'static str,
) -> (Arc<MemoryStates>, Arc<Ledger>, Hook) {
    let states = Arc::new(MemoryStates::default());
    let accounting = Arc::new(Accounting::new(RUN));
    let during: Hook = Arc::default();
    let store = Interleaved {
        inner: states.open("p", "c").expect("store"),
        during: Arc::clone(&during),
    };
    let state = Arc::new(
        Ledger::load(Box::new(store), Arc::clone(&accounting), 1 << 20, false).expect("loaded"),
    );
    let connector = Arc::downgrade(&state);
    *during.lock().expect("hook") = Some(Box::new(move || {
        let state = connector.upgrade().expect("ledger");
        state
            .change(key, Some(value))
            .expect("set while the commit writes");
    }) as Box<dyn FnOnce() + Send>);
    (states, state, during)
}

/// A change that replaces the one a commit is writing (same key, nothing
/// published between) is not lost: the commit removes only what it wrote,
/// and the next one writes the new value.
#[test]
fn a_change_made_while_a_commit_writes_is_kept() {
    let (states, state, during) = changed_mid_commit("k", "v2");
    state.change("k", Some("v1")).expect("set");
    state.commit().expect("commit");
    assert!(during.lock().expect("hook").is_none(), "ran mid-commit");
    assert_eq!(committed(&states), [pair("k", "v1")], "what was taken");
    assert_eq!(state.get("k").as_deref(), Some("v2"));
    assert_eq!(state.uncommitted(), 1, "the new value waits");
    state.commit().expect("commit");
    assert_eq!(
        committed(&states),
        [pair("k", "v2")],
        "store and view agree"
    );
    assert_eq!(state.uncommitted(), 0);
}

/// A change to another key made mid-commit waits too, and counts.
#[test]
fn a_new_key_made_while_a_commit_writes_waits_for_the_next() {
    let (states, state, _during) = changed_mid_commit("b", "2");
    state.change("a", Some("1")).expect("set");
    state.commit().expect("commit");
    assert_eq!(committed(&states), [pair("a", "1")]);
    assert_eq!((state.committed(), state.uncommitted()), (1, 1));
    state.commit().expect("commit");
    assert_eq!(committed(&states), [pair("a", "1"), pair("b", "2")]);
}

/// State kept under a larger limit (or edited by hand) is refused while it
/// is read, naming the limit and the key it was at; within the limit it
/// loads whole.
#[test]
fn state_past_the_limit_is_refused_as_it_loads() {
    use crate::core::state::VIEW_ENTRY_BYTES;
    let dir = tempfile::tempdir().expect("dir");
    let states = SqliteStates::new(dir.path().join("state.sqlite"));
    let changes: Vec<StateChange> = (0..100)
        .map(|n| (format!("key-{n:03}"), Some("v".repeat(100))))
        .collect();
    states
        .open("p", "c")
        .and_then(|mut s| s.commit(&changes))
        .expect("seeded");
    let per_key = 7 + 100 + VIEW_ENTRY_BYTES;
    let accounting = Arc::new(Accounting::new(RUN));
    let load = |limit| {
        let store = states.open("p", "c").expect("store");
        Ledger::load(store, Arc::clone(&accounting), limit, false)
    };
    let whole = load(100 * per_key).expect("exactly at the limit");
    assert_eq!(whole.size(), (100, 100 * 107));
    let error = load(40 * per_key + 10).expect_err("past the limit").0;
    assert!(
        error.contains("limits.max_state_mib") && error.contains("41 keys read when key `key-040`"),
        "{error}"
    );
    // One enormous key (a file edited by hand) is named clipped.
    let huge = "h".repeat(1 << 20);
    states
        .open("p", "huge")
        .and_then(|mut s| s.commit(&[(huge, Some(String::new()))]))
        .expect("seeded");
    let store = states.open("p", "huge").expect("store");
    let error = Ledger::load(store, Arc::clone(&accounting), 1 << 20, false)
        .expect_err("past the limit")
        .0;
    assert!(error.len() < 1024, "{error}");
    assert!(error.contains("(1048576 bytes in all)"), "{error}");
}

/// A store read change by change (a log with removals, as Kafka's is) is
/// bounded at every step and counts a removal as giving bytes back.
#[test]
fn loading_follows_removals_as_it_bounds() {
    use crate::core::state::VIEW_ENTRY_BYTES;
    struct Log(Vec<StateChange>);
    impl StateStore for Log {
        fn load(&mut self) -> Result<Vec<(String, String)>, StateError> {
            unreachable!("read change by change")
        }
        fn load_each(
            &mut self,
            each: &mut dyn FnMut(StateChange) -> Result<(), StateError>,
        ) -> Result<(), StateError> {
            self.0.drain(..).try_for_each(each)
        }
        fn commit(&mut self, _: &[StateChange]) -> Result<(), StateError> {
            Ok(())
        }
        fn clear(&mut self) -> Result<(), StateError> {
            Ok(())
        }
    }
    let set = |k: &str| (k.to_owned(), Some("x".to_owned()));
    let gone = |k: &str| (k.to_owned(), None);
    let accounting = Arc::new(Accounting::new(RUN));
    // Room for two keys: a, b, (a removed), c, b again: never three at once.
    let limit = 2 * (2 + VIEW_ENTRY_BYTES);
    let log = Log(vec![set("a"), set("b"), gone("a"), set("c"), set("b")]);
    let state = Ledger::load(Box::new(log), Arc::clone(&accounting), limit, false).expect("fits");
    assert_eq!(state.list(None, 10), [pair("b", "x"), pair("c", "x")]);
    let log = Log(vec![set("a"), set("b"), set("c"), gone("a")]);
    let error = Ledger::load(Box::new(log), accounting, limit, false).expect_err("three at once");
    assert!(error.0.contains("key `c`"), "{}", error.0);
}
