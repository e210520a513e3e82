//! The accounting of a run that never ends holds what is in flight, never
//! what the run has done: millions of events through it, with duplicates,
//! children, and passes whose CREATEs were lost, and its tables stay
//! within their bounds while its counts stay exact.

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

fn in_pass(mut e: Event, attempt: u64, after_creates: u32, root: Option<&str>) -> Event {
    e.attempt = Some(attempt);
    e.after_creates = after_creates;
    e.root = root.map(str::to_owned);
    e
}

/// What the stream below sent, to check the counts against.
#[derive(Default)]
struct Sent {
    documents: u64,
    children: u64,
    duplicates: u64,
    events: u64,
}

/// `docs` documents, at most `window` in flight: every 3rd makes two
/// children in a pass (its FINISH overtaking their CREATEs), every 7th
/// is finished twice (redelivery), every 11th had an earlier pass whose
/// CREATEs were lost (its FINISH waits for them for ever).
fn stream(a: &Accounting, docs: u64, window: u64, sizes: &mut Vec<Holding>) -> Sent {
    let mut sent = Sent::default();
    let apply = |a: &Accounting, e: Event, sent: &mut Sent| {
        a.apply(&e);
        sent.events += 1;
    };
    for n in 0..docs + window {
        if n < docs {
            a.published(&format!("d{n}"));
            sent.documents += 1;
        }
        let Some(done) = n.checked_sub(window) else {
            continue;
        };
        let id = format!("d{done}");
        if done % 11 == 0 {
            // A pass lost in a crash: its FINISH waits for a CREATE that
            // never comes.
            apply(
                a,
                in_pass(event(&id, EventKind::Finish), u64::MAX - done, 1, None),
                &mut sent,
            );
            sent.duplicates += 1;
        }
        if done % 3 == 0 {
            let pass = done;
            apply(
                a,
                in_pass(event(&id, EventKind::Finish), pass, 2, None),
                &mut sent,
            );
            for c in 0..2u32 {
                let child = format!("{id}-c{c}");
                apply(
                    a,
                    in_pass(event(&child, EventKind::Create), pass, 0, Some(&id)),
                    &mut sent,
                );
                apply(
                    a,
                    in_pass(event(&child, EventKind::Finish), pass, c + 1, None),
                    &mut sent,
                );
                sent.children += 1;
            }
        } else {
            apply(a, event(&id, EventKind::Finish), &mut sent);
        }
        if done % 7 == 0 {
            apply(a, event(&id, EventKind::Finish), &mut sent);
            sent.duplicates += 1;
        }
        if done % 100_000 == 0 {
            sizes.push(a.holding());
        }
    }
    sent
}

#[test]
fn millions_of_events_hold_only_what_is_in_flight_and_count_exactly() {
    const HORIZON: u64 = 10_000;
    const WINDOW: u64 = 500;
    let a = Accounting::with_horizon("run", HORIZON);
    let mut sizes = Vec::new();
    let sent = stream(&a, 1_000_000, WINDOW, &mut sizes);
    assert!(sent.events > 2_000_000, "{} events", sent.events);
    for held in &sizes {
        assert!(held.pending as u64 <= WINDOW + 2, "{held:?}");
        assert!(held.positions as u64 <= WINDOW + 2, "{held:?}");
        // Each table holds at most what the last horizon of events left.
        assert!(held.aside.early as u64 <= HORIZON, "{held:?}");
        assert!(held.aside.creates as u64 <= HORIZON, "{held:?}");
        assert!(held.aside.waiting as u64 <= HORIZON, "{held:?}");
        assert!(held.aside.order as u64 <= 3 * HORIZON, "{held:?}");
    }
    // Late in the run it holds no more than early on: bounded, not growing.
    let (early, late) = (sizes[2], sizes[sizes.len() - 1]);
    assert!(
        late.aside.order <= early.aside.order + early.aside.order / 10,
        "{early:?} then {late:?}"
    );
    assert!(
        late.duplicates > early.duplicates,
        "duplicates are settled as the run goes"
    );
    assert_eq!(a.pending(), 0);
    let settled = a.settle();
    assert_eq!(settled.duplicates, sent.duplicates);
    assert_eq!(
        Accounting::get(&a.succeeded),
        sent.documents + sent.children,
        "each document and child once"
    );
    assert_eq!(Accounting::get(&a.created), sent.children);
    assert_eq!(a.holding().aside, AsideSizes::default());
}

#[test]
fn a_childs_finish_before_its_create_is_kept_within_the_horizon() {
    let a = Accounting::with_horizon("run", 100);
    a.published("parent");
    a.apply(&event("child", EventKind::Finish));
    for n in 0..50 {
        a.published(&format!("d{n}"));
        a.apply(&event(&format!("d{n}"), EventKind::Finish));
    }
    a.apply(&event("child", EventKind::Create));
    a.apply(&event("parent", EventKind::Finish));
    assert_eq!(
        a.pending(),
        0,
        "the child's FINISH was matched to its CREATE"
    );
    assert_eq!(a.settle().duplicates, 0);
    assert_eq!(Accounting::get(&a.succeeded), 52);
}

#[test]
fn a_duplicate_aged_past_the_horizon_is_taken_out_of_the_counts_at_once() {
    let a = Accounting::with_horizon("run", 10);
    a.published("d");
    a.apply(&event("d", EventKind::Finish));
    a.apply(&event("d", EventKind::Finish));
    assert_eq!(Accounting::get(&a.succeeded), 2, "not known yet");
    for n in 0..10 {
        let mut other = event(&format!("o{n}"), EventKind::Finish);
        other.run_id = Some("another-run".into());
        a.apply(&other);
    }
    assert_eq!(Accounting::get(&a.succeeded), 1);
    assert_eq!(a.holding().duplicates, 1);
    assert_eq!(a.holding().aside.early, 0);
    assert_eq!(
        a.settle().duplicates,
        1,
        "counted once, not again at the end"
    );
}
