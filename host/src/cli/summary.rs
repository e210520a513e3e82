//! What `weir run` and `weir replay` show: a progress line while the run
//! goes on, and the summary tables when it ends.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use weir::config::Config;
use weir::run::{RunResult, Runner};

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
            let mut rate = Rate::default();
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(DRAW_EVERY) {
                let s = stats.snapshot();
                let done = s.indexed + s.failed + s.dropped;
                drawn.set_message(format!(
                    "published {} | processed {} | indexed {} | failed {} | dropped {} | {}",
                    s.published,
                    s.processed,
                    s.indexed,
                    s.failed,
                    s.dropped,
                    rate.show(done, std::time::Instant::now())
                ));
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

/// Documents done a second, over the last few seconds (a run's rate
/// changes: a connector's pace, a slow stage, a backend).
#[derive(Debug, Default)]
struct Rate {
    /// (when, done) at each draw, the oldest first, over [`RATE_OVER`].
    seen: std::collections::VecDeque<(std::time::Instant, u64)>,
}

/// How far back the progress line's rate looks.
const RATE_OVER: Duration = Duration::from_secs(5);

impl Rate {
    /// `done` so far at `now`, as the rate over the last few seconds.
    fn show(&mut self, done: u64, now: std::time::Instant) -> String {
        self.seen.push_back((now, done));
        while self
            .seen
            .front()
            .is_some_and(|(at, _)| now.duration_since(*at) > RATE_OVER)
        {
            self.seen.pop_front();
        }
        let (since, before) = self.seen.front().copied().unwrap_or((now, done));
        let seconds = now.duration_since(since).as_secs_f64();
        if seconds < 0.1 {
            return "- docs/s".to_owned();
        }
        format!("{:.0} docs/s", done.saturating_sub(before) as f64 / seconds)
    }
}

/// The run's summary on standard output: connectors, where failed
/// documents went (and how to send them again), CPU, stages. A run of
/// `path` with `config`.
pub(super) fn print_summary(result: &RunResult, path: &Path, config: &Config) {
    println!();
    println!(
        "Run {}: {:?} in {:.2?}",
        result.run_id,
        result.status(),
        result.elapsed
    );
    println!(
        "{:<20} {:<16} {:>10} {:>9} {:>10} {:>8} {:>8} {:>8} {:>10} {:>10}  outcome",
        "connector",
        "pipeline",
        "published",
        "children",
        "succeeded",
        "failed",
        "dropped",
        "deleted",
        "duplicates",
        "time"
    );
    for c in &result.connectors {
        let outcome = match (&c.error, c.skipped, c.interrupted) {
            (_, true, true) => "skipped (the run was interrupted)".to_owned(),
            (_, true, false) => "skipped (an earlier connector did not complete)".to_owned(),
            (Some(e), _, true) => format!("INTERRUPTED: {e}"),
            (Some(e), _, false) => format!("FAILED: {e}"),
            (None, ..) => "ok".to_owned(),
        };
        println!(
            "{:<20} {:<16} {:>10} {:>9} {:>10} {:>8} {:>8} {:>8} {:>10} {:>10.2?}  {}",
            c.name,
            c.pipeline,
            c.published,
            c.created,
            c.succeeded,
            c.failed,
            c.dropped,
            c.deleted,
            c.duplicates,
            c.elapsed,
            outcome
        );
    }
    for c in &result.connectors {
        if let Some(sync) = &c.sync {
            println!("{}: {sync}", c.name);
        }
    }
    let failed: u64 = result.connectors.iter().map(|c| c.failed).sum();
    if failed > 0 {
        println!();
        let documents = format!("{failed} document{} failed", plural(failed));
        if result.dead_letters.is_empty() {
            let why = if config.dead_letters.enabled {
                "they were not kept"
            } else {
                "dead letters are off ([dead_letters] enabled = false), so they were not kept"
            };
            println!("{documents}: {why}");
        }
        for kept in &result.dead_letters {
            println!(
                "{documents}: kept in {kept}; `weir replay {} {}` sends them again",
                path.display(),
                kept.replay_args()
            );
        }
    }
    let cpu = result.cpu;
    if !cpu.workers.is_zero() || !cpu.indexers.is_zero() {
        let documents: u64 = result.connectors.iter().map(|c| c.published).sum();
        // Per document only when there were documents.
        let part = |name: &str, d: Duration| match documents {
            0 => format!("{name} {d:.2?}"),
            n => format!(
                "{name} {d:.2?} ({:.1} us/doc)",
                d.as_secs_f64() * 1e6 / n as f64
            ),
        };
        println!();
        println!(
            "CPU in this process: {}, {}, {}",
            part("connectors", cpu.connectors),
            part("workers", cpu.workers),
            part("indexers", cpu.indexers)
        );
    }
    if !result.stages.is_empty() || cpu.indexed > 0 {
        println!();
        println!(
            "{:<20} {:<16} {:>10} {:>9} {:>8} {:>8} {:>8} {:>12} {:>10}",
            "stage",
            "pipeline",
            "documents",
            "children",
            "failed",
            "skipped",
            "retries",
            "mean/doc",
            "time"
        );
        for s in &result.stages {
            println!(
                "{:<20} {:<16} {:>10} {:>9} {:>8} {:>8} {:>8} {:>12} {:>10.2?}",
                s.stage,
                s.pipeline,
                s.documents,
                s.children,
                s.failed,
                s.skipped,
                s.retries,
                mean(s.time, s.documents),
                s.time
            );
        }
    }
    if cpu.indexed > 0 {
        println!(
            "{:<20} {:<16} {:>10} {:>9} {:>8} {:>8} {:>8} {:>12} {:>10.2?}",
            "(indexer batches)",
            "",
            cpu.indexed,
            "",
            "",
            "",
            "",
            mean(cpu.index_time, cpu.indexed),
            cpu.index_time
        );
    }
}

/// `total` over `count` documents; `-` for none.
fn mean(total: Duration, count: u64) -> String {
    if count == 0 {
        return "-".to_owned();
    }
    let nanos = total.as_nanos() / u128::from(count);
    format!(
        "{:.2?}",
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    )
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_is_of_the_last_seconds_only() {
        let start = std::time::Instant::now();
        let mut rate = Rate::default();
        assert_eq!(rate.show(0, start), "- docs/s");
        assert_eq!(
            rate.show(1000, start + Duration::from_secs(1)),
            "1000 docs/s"
        );
        assert_eq!(
            rate.show(2000, start + Duration::from_secs(2)),
            "1000 docs/s"
        );
        // Stalled for longer than it looks back: nothing is going on.
        assert_eq!(rate.show(2000, start + Duration::from_secs(9)), "- docs/s");
        assert_eq!(
            rate.show(2500, start + Duration::from_secs(10)),
            "500 docs/s"
        );
        assert_eq!(mean(Duration::from_secs(1), 0), "-");
        assert_eq!(mean(Duration::from_millis(10), 4), "2.50ms");
    }
}
