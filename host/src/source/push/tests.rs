//! The push source through its seams: what a push is answered once the
//! connector finishes or rejects its lines, the buffer's bound, and a stop.

use std::sync::mpsc;
use std::time::Duration;

use super::*;

/// Where a push's answer arrives.
#[derive(Debug)]
struct Ticket(mpsc::Receiver<Answer>);

impl Ticket {
    fn wait(&self, wait: Duration) -> Option<Answer> {
        self.0.recv_timeout(wait).ok()
    }
}

/// Offer `lines` to `pushes`: the ticket of the answer.
fn offer(pushes: &Pushes, name: Option<&str>, lines: Vec<Line>) -> Result<Ticket, PushRefused> {
    let (to, answer) = mpsc::channel();
    pushes
        .offer(name, lines, Box::new(move |a| drop(to.send(a))))
        .map(|()| Ticket(answer))
}

fn lines(texts: &[&str]) -> Vec<Line> {
    texts
        .iter()
        .enumerate()
        .map(|(i, text)| Line {
            number: i + 1,
            text: (*text).to_owned(),
        })
        .collect()
}

fn opened(buffer: usize) -> (Pushes, Arc<PushSource>) {
    let pushes = Pushes::default();
    let source = pushes.open("docs", &PushGrant { buffer });
    (pushes, source)
}

const NOW: Duration = Duration::ZERO;
const SOON: Duration = Duration::from_millis(50);

#[test]
fn a_push_is_answered_once_every_line_is_finished_or_rejected() {
    let (pushes, source) = opened(10);
    let ticket = offer(
        &pushes,
        None,
        lines(&[r#"{"id":"a"}"#, "not json", r#"{"id":"c"}"#]),
    )
    .expect("taken");
    let got = source.receive(2, NOW).expect("lines");
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].body, br#"{"id":"a"}"#);
    assert_eq!(got[1].origin, "push/docs/0/line 2");
    source.finished(got[0].token);
    source.settle(
        got[1].token,
        Settled::Invalid {
            reason: "not a JSON object".into(),
        },
    );
    assert_eq!(ticket.wait(NOW), None, "a line is left");
    let rest = source.receive(10, NOW).expect("the last line");
    assert_eq!(rest.len(), 1);
    source.finished(rest[0].token);
    // Settled later (indexed): the answer was given already.
    source.settle(rest[0].token, Settled::Done);
    let answer = ticket.wait(SOON).expect("answered");
    assert_eq!(answer.accepted, 2);
    assert_eq!(
        answer.dead_lettered,
        [LineRefused {
            line: 2,
            reason: "not a JSON object".into()
        }]
    );
    assert_eq!(answer.abandoned, 0);
    assert_eq!(source.lock().held, 0);
}

#[test]
fn a_push_past_the_buffer_is_refused_whole_until_lines_are_finished() {
    let (pushes, source) = opened(3);
    let _first = offer(&pushes, None, lines(&["{}", "{}"])).expect("taken");
    let full = offer(&pushes, None, lines(&["{}", "{}"]));
    assert!(
        matches!(
            full,
            Err(PushRefused::Full {
                held: 2,
                buffer: 3,
                ..
            })
        ),
        "{full:?}"
    );
    assert!(matches!(
        offer(&pushes, None, lines(&["{}"; 4])),
        Err(PushRefused::TooMany { lines: 4, .. })
    ));
    assert_eq!(
        source.lock().queue.len(),
        2,
        "nothing of a refused push is taken"
    );
    for line in source.receive(10, NOW).expect("lines") {
        source.finished(line.token);
    }
    offer(&pushes, None, lines(&["{}", "{}", "{}"])).expect("room again");
    let empty = offer(&pushes, None, Vec::new()).expect("an empty push");
    assert_eq!(empty.wait(NOW), Some(Answer::default()));
}

#[test]
fn a_stop_answers_what_is_left_as_abandoned_and_takes_nothing_more() {
    let (pushes, source) = opened(10);
    let ticket = offer(&pushes, None, lines(&["{}", "{}", "{}"])).expect("taken");
    let got = source.receive(1, NOW).expect("a line");
    source.finished(got[0].token);
    source.close();
    let answer = ticket.wait(SOON).expect("answered at the stop");
    assert_eq!((answer.accepted, answer.abandoned), (1, 2));
    assert_eq!(source.receive(1, NOW), Err(ReceiveError::Stopping));
    assert!(matches!(
        offer(&pushes, None, lines(&["{}"])),
        Err(PushRefused::NoSource(_))
    ));
}

#[test]
fn receive_waits_for_a_push_and_a_paused_source_gives_none() {
    let (pushes, source) = opened(10);
    assert_eq!(source.receive(5, SOON).expect("none"), Vec::new());
    source.pause();
    let _ticket = offer(&pushes, Some("docs"), lines(&["{}"])).expect("taken");
    assert_eq!(source.receive(5, NOW).expect("paused"), Vec::new());
    source.resume();
    let waiting = std::thread::spawn({
        let source = Arc::clone(&source);
        move || source.receive(5, Duration::from_secs(30))
    });
    assert_eq!(waiting.join().expect("joined").expect("lines").len(), 1);
    assert!(matches!(
        offer(&pushes, Some("other"), lines(&["{}"])),
        Err(PushRefused::NoSource(_))
    ));
    let _second = pushes.open("more", &PushGrant { buffer: 1 });
    assert!(matches!(
        offer(&pushes, None, lines(&["{}"])),
        Err(PushRefused::Ambiguous(_))
    ));
}
