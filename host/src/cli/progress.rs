//! The progress line of `weir run` and `weir replay` while the run goes on:
//! counts, a rate, and, when the running connector has said how much it
//! will publish (the `progress` interface), its share done and the time
//! left.

use std::io::IsTerminal;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use weir::run::Runner;
use weir::run::StatsSnapshot;

/// A progress line fed from the runner's live counts, drawn by a thread of
/// its own only when standard error is a terminal and `--no-progress` is not
/// given: a scripted run starts no thread for it and never waits for one.
pub(super) struct Progress {
    drawing: Option<Drawing>,
}

struct Drawing {
    bar: ProgressBar,
    /// Dropped at the end: the thread wakes at once, not at its next tick.
    stop: mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

/// How often the progress line is drawn again.
const DRAW_EVERY: Duration = Duration::from_millis(200);

impl Progress {
    pub(super) fn start(runner: &Runner, hidden: bool) -> Self {
        if hidden || !std::io::stderr().is_terminal() {
            return Self { drawing: None };
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        let (stop, stopped) = mpsc::channel::<()>();
        let stats = runner.stats();
        let drawn = bar.clone();
        let thread = std::thread::spawn(move || {
            let mut rates = Rates::default();
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(DRAW_EVERY) {
                drawn.set_message(rates.line(&stats.snapshot(), Instant::now()));
                drawn.tick();
            }
        });
        Self {
            drawing: Some(Drawing { bar, stop, thread }),
        }
    }

    pub(super) fn finish(self) {
        if let Some(Drawing { bar, stop, thread }) = self.drawing {
            drop(stop);
            let _ = thread.join();
            bar.finish_and_clear();
        }
    }
}

/// The rates the line shows: documents done, and documents the running
/// connector published (what its expected total counts).
#[derive(Debug, Default)]
struct Rates {
    done: Rate,
    published: Rate,
}

impl Rates {
    /// The progress line for `s`, seen at `now`.
    fn line(&mut self, s: &StatsSnapshot, now: Instant) -> String {
        let done = self.done.per_second(s.indexed + s.failed + s.dropped, now);
        let published = match s.expected {
            Some(e) => format!(
                "published {} of {} ({}%)",
                e.published,
                e.total,
                percent(e.published, e.total)
            ),
            None => format!("published {}", s.published),
        };
        let mut line = format!(
            "{published} | processed {} | indexed {} | failed {} | dropped {} | {}",
            s.processed,
            s.indexed,
            s.failed,
            s.dropped,
            match done {
                Some(rate) => format!("{rate:.0} docs/s"),
                None => "- docs/s".to_owned(),
            }
        );
        if let Some(e) = s.expected {
            let rate = self.published.per_second(e.published, now);
            if let Some(rate) = rate.filter(|r| *r > 0.0)
                && e.published < e.total
            {
                let seconds = (e.total - e.published) as f64 / rate;
                line.push_str(&format!(" | ~{} left", left(seconds)));
            }
        }
        line
    }
}

/// `part` of `whole` as a whole percentage, at most 100.
fn percent(part: u64, whole: u64) -> u64 {
    if whole == 0 {
        return 100;
    }
    (part.min(whole) as f64 * 100.0 / whole as f64).floor() as u64
}

/// A time left, as a person reads it: `40 s`, `3 min 5 s`, `2 h 4 min`.
fn left(seconds: f64) -> String {
    let s = seconds.ceil().min(360_000.0) as u64;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, s % 3600 / 60),
    }
}

/// A count's rate a second, over the last few seconds (a run's rate
/// changes: a connector's pace, a slow stage, a backend).
#[derive(Debug, Default)]
struct Rate {
    /// (when, count) at each look, the oldest first, over [`RATE_OVER`].
    seen: std::collections::VecDeque<(Instant, u64)>,
}

/// How far back the progress line's rates look.
const RATE_OVER: Duration = Duration::from_secs(5);

impl Rate {
    /// `count` so far at `now`, as the rate over the last few seconds: none
    /// before there is a tenth of a second to look at.
    fn per_second(&mut self, count: u64, now: Instant) -> Option<f64> {
        self.seen.push_back((now, count));
        while self
            .seen
            .front()
            .is_some_and(|(at, _)| now.duration_since(*at) > RATE_OVER)
        {
            self.seen.pop_front();
        }
        let (since, before) = self.seen.front().copied().unwrap_or((now, count));
        let seconds = now.duration_since(since).as_secs_f64();
        (seconds >= 0.1).then(|| count.saturating_sub(before) as f64 / seconds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir::run::Expected;

    #[test]
    fn the_rate_is_of_the_last_seconds_only() {
        let start = Instant::now();
        let at = |s| start + Duration::from_secs(s);
        let mut rate = Rate::default();
        assert_eq!(rate.per_second(0, start), None);
        assert_eq!(rate.per_second(1000, at(1)), Some(1000.0));
        assert_eq!(rate.per_second(2000, at(2)), Some(1000.0));
        // Stalled for longer than it looks back: nothing is going on.
        assert_eq!(rate.per_second(2000, at(9)), None);
        assert_eq!(rate.per_second(2500, at(10)), Some(500.0));
    }

    #[test]
    fn with_a_total_the_line_shows_the_share_and_the_time_left() {
        let start = Instant::now();
        let at = |s| start + Duration::from_secs(s);
        let mut rates = Rates::default();
        let mut s = StatsSnapshot {
            published: 1000,
            expected: Some(Expected {
                published: 0,
                total: 5000,
            }),
            ..StatsSnapshot::default()
        };
        let first = rates.line(&s, start);
        assert!(first.starts_with("published 0 of 5000 (0%) |"), "{first}");
        assert!(!first.contains("left"), "no rate yet: {first}");
        s.expected = Some(Expected {
            published: 1000,
            total: 5000,
        });
        s.indexed = 800;
        let line = rates.line(&s, at(2));
        assert_eq!(
            line,
            "published 1000 of 5000 (20%) | processed 0 | indexed 800 | failed 0 | dropped 0 | 400 docs/s | ~8 s left"
        );
        // Past what it said: no time left to give, and never over 100%.
        s.expected = Some(Expected {
            published: 6000,
            total: 5000,
        });
        let over = rates.line(&s, at(4));
        assert!(over.starts_with("published 6000 of 5000 (100%)"), "{over}");
        assert!(!over.contains("left"), "{over}");
    }

    #[test]
    fn without_a_total_the_line_shows_counts_and_a_rate() {
        let s = StatsSnapshot {
            published: 7,
            ..StatsSnapshot::default()
        };
        let line = Rates::default().line(&s, Instant::now());
        assert_eq!(
            line,
            "published 7 | processed 0 | indexed 0 | failed 0 | dropped 0 | - docs/s"
        );
    }

    #[test]
    fn time_left_reads_as_a_person_says_it() {
        assert_eq!(left(0.2), "1 s");
        assert_eq!(left(59.0), "59 s");
        assert_eq!(left(185.0), "3 min 5 s");
        assert_eq!(left(7440.0), "2 h 4 min");
        assert_eq!(left(f64::INFINITY), "100 h 0 min");
        assert_eq!(percent(1, 3), 33);
        assert_eq!(percent(0, 0), 100);
    }
}
