//! Deliveries settle when their documents are done, through the real
//! accounting; rejected ones at once; the rest are abandoned at close.

use std::sync::Mutex;

use super::*;
use crate::core::event::{Event, EventKind};

/// A source that hands out what it is given and records what it is told.
#[derive(Default)]
struct Fake {
    queue: Mutex<Vec<Delivery>>,
    settled: Mutex<Vec<(u64, Settled)>>,
    closed: std::sync::atomic::AtomicBool,
}

impl Source for Fake {
    fn receive(&self, max: usize, _wait: Duration) -> Result<Vec<Delivery>, ReceiveError> {
        let mut queue = self.queue.lock().expect("lock");
        let n = max.min(queue.len());
        Ok(queue.drain(..n).collect())
    }
    fn settle(&self, token: u64, settled: Settled) {
        self.settled.lock().expect("lock").push((token, settled));
    }
    fn close(&self) {
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    fn describe(&self) -> String {
        "fake".into()
    }
}

fn delivery(token: u64) -> Delivery {
    Delivery {
        token,
        origin: format!("t/0/{token}"),
        key: None,
        body: b"{}".to_vec(),
        headers: Vec::new(),
        timestamp_ms: None,
        attempt: 1,
    }
}

struct Setup {
    fake: Arc<Fake>,
    accounting: Arc<Accounting>,
    deliveries: Arc<Deliveries>,
}

fn setup(tokens: &[u64]) -> Setup {
    let fake = Arc::new(Fake::default());
    fake.queue
        .lock()
        .expect("lock")
        .extend(tokens.iter().map(|&t| delivery(t)));
    let accounting = Arc::new(Accounting::new("r1"));
    let deliveries = Arc::new(Deliveries::new(
        "p",
        "c",
        "r1",
        vec![("orders".into(), Arc::clone(&fake) as Arc<dyn Source>)],
        &accounting,
        None,
    ));
    accounting
        .positions
        .set(Arc::clone(&deliveries) as Arc<dyn Positions>)
        .expect("once");
    Setup {
        fake,
        accounting,
        deliveries,
    }
}

impl Setup {
    fn receive(&self) -> Vec<u64> {
        self.deliveries
            .receive("orders", 10, Duration::ZERO)
            .expect("receive")
            .into_iter()
            .map(|(handle, _)| handle)
            .collect()
    }

    fn publish(&self, handle: u64, id: &str) {
        let accounting = Arc::clone(&self.accounting);
        self.deliveries
            .publish_for(handle, &mut || {
                accounting.published(id);
                Ok(())
            })
            .expect("publish");
    }

    fn event(&self, id: &str, kind: EventKind) {
        let mut doc = Document::new(id);
        doc.set_run_id(Some("r1".into()));
        let event = Event::new(&doc, kind);
        let event = if kind == EventKind::Fail {
            event.with_message("mapper_parsing_exception")
        } else {
            event
        };
        self.accounting.apply(&event);
    }

    fn settled(&self) -> Vec<(u64, Settled)> {
        self.fake.settled.lock().expect("lock").clone()
    }
}

#[test]
fn a_message_settles_once_finished_and_all_its_documents_are_done() {
    let s = setup(&[7, 8]);
    let handles = s.receive();
    assert_eq!(handles.len(), 2);
    s.publish(handles[0], "a");
    s.publish(handles[0], "b");
    s.publish(handles[1], "c");
    s.deliveries.finish(handles[1]);
    s.event("a", EventKind::Finish);
    assert!(s.settled().is_empty(), "not finished yet");
    s.deliveries.finish(handles[0]);
    assert!(s.settled().is_empty(), "b pending");
    // A later message done first settles first: no order between messages.
    s.event("c", EventKind::Drop);
    assert_eq!(s.settled(), [(8, Settled::Done)]);
    s.event("b", EventKind::Finish);
    assert_eq!(s.settled(), [(8, Settled::Done), (7, Settled::Done)]);
    assert_eq!(s.deliveries.in_flight(), 0, "nothing held once settled");
    assert!(s.deliveries.lock().positions.is_empty());
}

#[test]
fn a_failed_document_fails_its_message_with_the_first_error() {
    let s = setup(&[1]);
    let h = s.receive()[0];
    s.publish(h, "a");
    s.publish(h, "b");
    s.deliveries.finish(h);
    s.event("a", EventKind::Fail);
    s.event("b", EventKind::Finish);
    assert_eq!(
        s.settled(),
        [(
            1,
            Settled::Failed {
                error: "mapper_parsing_exception".into()
            }
        )]
    );
}

#[test]
fn a_message_with_no_documents_is_done_when_finished() {
    let s = setup(&[3]);
    let h = s.receive()[0];
    assert!(s.deliveries.finish(h));
    assert_eq!(s.settled(), [(3, Settled::Done)]);
    assert!(!s.deliveries.finish(h), "finished twice: unknown");
    let refused = s
        .deliveries
        .publish_for(h, &mut || panic!("not called for a finished message"));
    assert!(refused.expect_err("refused").contains("not in flight"));
    assert!(s.deliveries.publish_for(999, &mut || Ok(())).is_err());
}

#[test]
fn a_rejected_message_is_invalid_at_once_and_its_documents_count_for_none() {
    let s = setup(&[4, 5]);
    let handles = s.receive();
    s.publish(handles[0], "a");
    assert!(s.deliveries.reject(handles[0], "not JSON"));
    assert_eq!(
        s.settled(),
        [(
            4,
            Settled::Invalid {
                reason: "not JSON".into()
            }
        )]
    );
    s.event("a", EventKind::Finish);
    assert_eq!(s.settled().len(), 1);
    assert!(!s.deliveries.reject(handles[0], "again"));
    assert_eq!(
        Accounting::get(&s.accounting.failed),
        1,
        "counted as failed"
    );
}

#[test]
fn a_child_holds_back_the_message_whose_position_it_takes() {
    let s = setup(&[1]);
    let h = s.receive()[0];
    s.publish(h, "parent");
    s.deliveries.finish(h);
    let mut child = Document::new("child");
    child.set_run_id(Some("r1".into()));
    s.accounting.apply(&Event::created(&child, "parent"));
    s.event("parent", EventKind::Finish);
    assert!(s.settled().is_empty(), "its child is pending");
    s.event("child", EventKind::Finish);
    assert_eq!(s.settled(), [(1, Settled::Done)]);
}

/// A child of a younger message's document holds back that message, not
/// the oldest one still pending (messages of other channels or partitions
/// are settled apart: the younger must not be done before its child).
#[test]
fn a_child_holds_back_its_roots_message_not_the_oldest_pending() {
    let s = setup(&[1, 2]);
    let handles = s.receive();
    s.publish(handles[0], "slow");
    s.deliveries.finish(handles[0]);
    s.publish(handles[1], "parent");
    s.deliveries.finish(handles[1]);
    let mut child = Document::new("child");
    child.set_run_id(Some("r1".into()));
    s.accounting.apply(&Event::created(&child, "parent"));
    s.event("parent", EventKind::Finish);
    assert!(s.settled().is_empty(), "the parent's child is pending");
    s.event("slow", EventKind::Finish);
    assert_eq!(
        s.settled(),
        [(1, Settled::Done)],
        "the slow one was never held"
    );
    s.event("child", EventKind::Finish);
    assert_eq!(s.settled(), [(1, Settled::Done), (2, Settled::Done)]);
}

#[test]
fn unknown_sources_fail_stopping_answers_stopping_and_close_abandons() {
    let s = setup(&[1, 2]);
    let err = s
        .deliveries
        .receive("other", 1, Duration::ZERO)
        .expect_err("not granted");
    assert!(
        matches!(err, ReceiveError::Failed(ref m) if m.contains("[orders]")),
        "{err:?}"
    );
    let handles = s.receive();
    s.publish(handles[0], "a");
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    s.deliveries
        .stop_when(move || flag.load(std::sync::atomic::Ordering::SeqCst));
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(
        s.deliveries.receive("orders", 1, Duration::ZERO),
        Err(ReceiveError::Stopping)
    );
    s.deliveries.close();
    assert!(s.fake.closed.load(std::sync::atomic::Ordering::SeqCst));
    assert_eq!(s.deliveries.in_flight(), 0);
    // Events after the close settle nothing: the source abandoned them.
    s.event("a", EventKind::Finish);
    assert!(s.settled().is_empty());
}

#[test]
fn a_publish_cut_by_the_stop_never_settles_its_message() {
    let s = setup(&[1]);
    let h = s.receive()[0];
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let flag = Arc::clone(&stop);
    s.deliveries
        .stop_when(move || flag.load(std::sync::atomic::Ordering::SeqCst));
    let accounting = Arc::clone(&s.accounting);
    let cut = s.deliveries.publish_for(h, &mut || {
        accounting.published("a");
        accounting.unpublished("a");
        Err("the run was interrupted".into())
    });
    assert!(cut.is_err());
    s.deliveries.finish(h);
    assert!(s.settled().is_empty(), "abandoned at close, never failed");
}

#[test]
fn the_sources_go_with_the_accounting_no_cycle_keeps_them() {
    let s = setup(&[1]);
    let fake = Arc::downgrade(&s.fake);
    let Setup {
        fake: held,
        accounting,
        deliveries,
    } = s;
    drop((held, deliveries));
    assert!(fake.upgrade().is_some(), "the accounting holds them");
    drop(accounting);
    assert!(fake.upgrade().is_none(), "gone with the run's accounting");
}
