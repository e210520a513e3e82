//! Property test of the document interface, through the very host functions
//! a guest calls: random sequences of the WIT document operations, with
//! random paths, values and sizes (deep, huge, malformed), against small
//! limits.
//!
//! The *generator* ([`ops`]) makes the sequences; the *oracle*
//! ([`run_case`]) replays one as a guest would and decides whether the host
//! held: no panic, no stack overflow (the process would die), a trap only
//! where a limit was hit, every document within its limits and measured
//! right, readable back from its JSON, and the host's memory for the whole
//! sequence within a bound set by the limits.
//!
//! It runs bounded in the test suite (64 cases); for a longer run:
//! `PROPTEST_CASES=100000 cargo test -p weir --lib plugin::host::fuzz`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use wasmtime::component::Resource;

use super::{GuestOutput, HttpPolicy, LogLimiter, PluginState};
use crate::core::document::{DocLimits, Document};
use crate::plugin::bindings::stage::weir::plugin::document::HostDocument;
use crate::plugin::bindings::{UpdateMode, Value};
use crate::plugin::budget::Budget;
use crate::plugin::spec::Limits;

// ---- memory: what this thread has allocated, at most, during a case ----

/// Counts the bytes each thread holds (tests run on several threads; a case
/// runs on one), and the highest count since it was last reset.
struct Counting;

thread_local! {
    static HELD: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn note(delta: isize) {
    // `try_with`: a thread being torn down has no counters left.
    let _ = HELD.try_with(|held| {
        let now = held.get() + delta;
        held.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

// SAFETY: every call is passed on to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size() as isize);
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note(-(layout.size() as isize));
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size as isize - layout.size() as isize);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Run `f`; how many bytes it held at most beyond what was held before.
fn peak_of(f: impl FnOnce()) -> isize {
    let start = HELD.with(Cell::get);
    PEAK.with(|p| p.set(start));
    f();
    PEAK.with(Cell::get) - start
}

// ---- the generator ----

/// One call a guest may make through the document interface. Handles are
/// indexes into the documents the guest holds (the lent one is first).
#[derive(Debug, Clone)]
enum Op {
    New(String),
    FromJson(String),
    FromJsonWithId(String),
    Set(usize, String, Value),
    SetAll(usize, String, Vec<Value>),
    Add(usize, String, Value),
    SetOrAdd(usize, String, Value),
    SetPath(usize, String, Value),
    RemovePath(usize, String),
    Remove(usize, String),
    Rename(usize, String, String, u8),
    AddChild(usize, usize),
    Children(usize),
    LoadJson(usize, String),
    ToJson(usize),
    Drop(usize),
}

/// Text of a few sizes, up to past the document limit.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z ]{0,12}",
        1 => (0usize..4).prop_map(|i| "x".repeat([100, 64 << 10, 600 << 10, 1536 << 10][i])),
    ]
}

/// JSON text: small valid values, deep nesting (balanced or not), many
/// tiny values, and garbage.
fn json_text() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("null".to_owned()),
        Just("true".to_owned()),
        any::<i32>().prop_map(|n| n.to_string()),
        "[a-z]{0,6}".prop_map(|s| format!("\"{s}\"")),
    ];
    let small = leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec(("[a-z]{1,3}", inner), 0..4).prop_map(|v| {
                let entries: Vec<String> = v.iter().map(|(k, x)| format!("\"{k}\":{x}")).collect();
                format!("{{{}}}", entries.join(","))
            }),
        ]
    });
    prop_oneof![
        6 => small,
        1 => (0usize..5).prop_map(|i| {
            let n = [10, 20, 120, 200, 100_000][i];
            format!("{}1{}", "[".repeat(n), "]".repeat(n))
        }),
        1 => Just("[".repeat(100_000)),
        1 => (0usize..3).prop_map(|i| {
            let n = [100, 20_000, 200_000][i];
            format!("[{}null]", "null,".repeat(n))
        }),
        1 => "[\\[\\]{}:,\"a-z0-9]{0,16}",
    ]
}

/// A whole document as JSON, sometimes claiming a run id or children.
fn document_json() -> impl Strategy<Value = String> {
    prop_oneof![
        ("[a-z]{1,4}", json_text()).prop_map(|(id, v)| format!(r#"{{"id":"{id}","f":{v}}}"#)),
        "[a-z]{1,4}".prop_map(|id| format!(
            r#"{{"id":"{id}","run_id":"other","_children":[{{"id":"c","run_id":"x"}}]}}"#
        )),
        (1usize..80).prop_map(|n| {
            let mut json = r#"{"id":"leaf"}"#.to_owned();
            for _ in 0..n {
                json = format!(r#"{{"id":"p","_children":[{json}]}}"#);
            }
            json
        }),
        json_text(),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Boolean),
        any::<i64>().prop_map(Value::Integer),
        prop_oneof![Just(f64::NAN), Just(f64::INFINITY), any::<f64>()].prop_map(Value::Float),
        text().prop_map(Value::Text),
        json_text().prop_map(Value::Json),
    ]
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => "[a-c]{1,2}",
        1 => Just("id".to_owned()),
        1 => Just("_children".to_owned()),
        1 => Just(String::new()),
    ]
}

/// Paths: chains of keys and indexes, short or very deep, with indexes up
/// to `u64::MAX` and past it, and malformed ones.
fn path() -> impl Strategy<Value = String> {
    let index = prop_oneof![
        Just("0".to_owned()),
        Just("3".to_owned()),
        Just("1000".to_owned()),
        Just("5000000".to_owned()),
        Just(u64::MAX.to_string()),
        Just("18446744073709551616".to_owned()),
    ];
    let step = prop_oneof![
        3 => "[a-c]".prop_map(|k| format!(".{k}")),
        1 => index.prop_map(|i| format!("[{i}]")),
    ];
    prop_oneof![
        8 => ("[a-c]", prop::collection::vec(step, 0..24)).prop_map(|(first, steps)| first + &steps.concat()),
        1 => (1usize..3).prop_map(|i| vec!["a"; [300, 100_000][i - 1]].join(".")),
        1 => "[a-c\\.\\[\\]0-9]{0,12}",
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let h = 0usize..8;
    prop_oneof![
        1 => text().prop_map(Op::New),
        1 => document_json().prop_map(Op::FromJson),
        1 => json_text().prop_map(Op::FromJsonWithId),
        1 => (h.clone(), name(), value()).prop_map(|(h, n, v)| Op::Set(h, n, v)),
        1 => (h.clone(), name(), prop::collection::vec(value(), 0..4))
            .prop_map(|(h, n, v)| Op::SetAll(h, n, v)),
        1 => (h.clone(), name(), value()).prop_map(|(h, n, v)| Op::Add(h, n, v)),
        1 => (h.clone(), name(), value()).prop_map(|(h, n, v)| Op::SetOrAdd(h, n, v)),
        3 => (h.clone(), path(), value()).prop_map(|(h, p, v)| Op::SetPath(h, p, v)),
        1 => (h.clone(), path()).prop_map(|(h, p)| Op::RemovePath(h, p)),
        1 => (h.clone(), name()).prop_map(|(h, n)| Op::Remove(h, n)),
        1 => (h.clone(), name(), name(), 0u8..3).prop_map(|(h, s, t, m)| Op::Rename(h, s, t, m)),
        3 => (h.clone(), h.clone()).prop_map(|(p, c)| Op::AddChild(p, c)),
        2 => h.clone().prop_map(Op::Children),
        1 => (h.clone(), document_json()).prop_map(|(h, j)| Op::LoadJson(h, j)),
        1 => h.clone().prop_map(Op::ToJson),
        1 => h.prop_map(Op::Drop),
    ]
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(), 1..40)
}

// ---- the oracle ----

fn limits() -> Limits {
    Limits {
        memory_mib: Some(8),
        max_children: Some(64),
        max_document_mib: Some(1),
        max_depth: Some(16),
        ..Limits::default()
    }
}

/// A store's data as an instance has it, under [`limits`] (1 MiB documents).
pub(crate) fn plugin_state() -> PluginState {
    let plugin: Arc<str> = Arc::from("fuzzed");
    let logs = Arc::new(Mutex::new(LogLimiter::new(1_000)));
    let budget = Budget::new(&limits());
    let mut docs = wasmtime::component::ResourceTable::new();
    docs.set_max_capacity(budget.documents_capacity());
    PluginState {
        plugin: Arc::clone(&plugin),
        table: Default::default(),
        docs,
        wasi: wasmtime_wasi::WasiCtxBuilder::new().build(),
        http: Default::default(),
        http_policy: HttpPolicy::new(Arc::clone(&plugin), None, Arc::from([]), Arc::clone(&logs)),
        budget,
        journal: Default::default(),
        stderr: GuestOutput::new(Arc::clone(&plugin), "stderr", Arc::clone(&logs)),
        logs,
        cancel: Default::default(),
        interrupt_at: None,
        sync: None,
        messages: None,
        sql: Default::default(),
        cache: Default::default(),
    }
}

fn own(rep: u32) -> Resource<Document> {
    Resource::new_own(rep)
}

/// Apply `op` as the guest holding `held` (reps; the lent one first) would.
fn apply(state: &mut PluginState, held: &mut Vec<u32>, op: Op) -> wasmtime::Result<()> {
    let pick = |i: usize| held[i % held.len()];
    match op {
        Op::New(id) => held.push(state.new(id)?.rep()),
        Op::FromJson(json) => {
            if let Ok(h) = state.from_json(json)? {
                held.push(h.rep());
            }
        }
        Op::FromJsonWithId(json) => {
            if let Ok(h) = state.from_json_with_id("w".into(), json)? {
                held.push(h.rep());
            }
        }
        Op::Set(h, n, v) => drop(state.set(own(pick(h)), n, v)?),
        Op::SetAll(h, n, v) => drop(state.set_all(own(pick(h)), n, v)?),
        Op::Add(h, n, v) => drop(state.add(own(pick(h)), n, v)?),
        Op::SetOrAdd(h, n, v) => drop(state.set_or_add(own(pick(h)), n, v)?),
        Op::SetPath(h, p, v) => drop(state.set_path(own(pick(h)), p, v)?),
        Op::RemovePath(h, p) => drop(state.remove_path(own(pick(h)), p)?),
        Op::Remove(h, n) => drop(state.remove(own(pick(h)), n)?),
        Op::Rename(h, s, t, m) => {
            let mode = [UpdateMode::Overwrite, UpdateMode::Append, UpdateMode::Skip][m as usize];
            drop(state.rename(own(pick(h)), s, t, mode)?)
        }
        Op::AddChild(p, c) => {
            // The guest hands over an owned child: never the lent document,
            // never the parent itself (it could not hold both).
            let (parent, child) = (pick(p), pick(c));
            if child != held[0] && child != parent {
                held.retain(|&r| r != child);
                drop(state.add_child(own(parent), own(child))?);
            }
        }
        Op::Children(h) => {
            let copies = state.children(own(pick(h)))?;
            held.extend(copies.iter().map(Resource::rep));
        }
        Op::LoadJson(h, j) => drop(state.load_json(own(pick(h)), j)?),
        Op::ToJson(h) => {
            let text = state.to_json(own(pick(h)))?;
            let back = Document::from_json_str(&text).expect("what is written reads back");
            assert_eq!(&back, state.docs.get(&own(pick(h)))?);
        }
        Op::Drop(h) => {
            let rep = pick(h);
            if rep != held[0] {
                held.retain(|&r| r != rep);
                HostDocument::drop(state, own(rep))?;
            }
        }
    }
    Ok(())
}

/// Every document the guest holds is within its limits and measured right.
fn check_documents(state: &PluginState, held: &[u32]) {
    let doc_limits = limits().doc_limits();
    let mut total = 0;
    for &rep in held {
        let doc = state.docs.get(&own(rep)).expect("held documents exist");
        assert_eq!(doc.approx_json_bytes(), doc.measure_bytes(), "{}", doc.id());
        assert!(doc.depth() <= doc_limits.max_depth, "{}", doc.depth());
        assert!(doc.approx_json_bytes() <= doc_limits.max_bytes.max(1 << 20));
        if rep != held[0] {
            total += doc.approx_json_bytes();
        }
    }
    // At most one document past the account before the call traps.
    assert!(total <= (8 << 20) + doc_limits.max_bytes, "{total}");
}

/// Replay `ops`; a trap ends the case, as it ends the instance.
fn run_case(ops: Vec<Op>) {
    let mut state = plugin_state();
    let mut lent = Document::new("lent");
    lent.set_limits(DocLimits::HOST);
    lent.set("title", serde_json::json!("a document"))
        .expect("set");
    lent.set_limits(state.budget.doc_limits);
    let rep = state.docs.push(lent).expect("lend").rep();
    state.journal.start([rep], false, true);
    let mut held = vec![rep];
    for op in ops {
        state.budget.start_call();
        if let Err(trap) = apply(&mut state, &mut held, op) {
            assert!(
                state.budget.hit.is_some(),
                "a trap must come from a limit: {trap:#}"
            );
            return;
        }
        check_documents(&state, &held);
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(64),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn document_operations_keep_the_host_within_bounds(ops in ops()) {
        let peak = peak_of(|| run_case(ops));
        // Limits: 8 MiB of memory, 1 MiB documents. What the host holds for
        // them, with parsing and copying on the way, stays within a small
        // multiple; without the limits, a single `a[5000000]` takes 400 MB.
        prop_assert!(peak < 160 << 20, "the host held {} MiB at once", peak >> 20);
    }
}
