//! What `weir run` and `weir replay` show: a progress line while the run
//! goes on, and the summary tables when it ends.

use std::io::IsTerminal;
use std::sync::mpsc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
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
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(DRAW_EVERY) {
                let s = stats.snapshot();
                drawn.set_message(format!(
                    "published {} | processed {} | indexed {} | failed {} | dropped {}",
                    s.published, s.processed, s.indexed, s.failed, s.dropped
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

/// The run's summary on standard output: connectors, CPU, stages.
pub(super) fn print_summary(result: &RunResult) {
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
    let cpu = result.cpu;
    if !cpu.workers.is_zero() || !cpu.indexers.is_zero() {
        let documents: u64 = result.connectors.iter().map(|c| c.published).sum();
        let per_doc = |d: std::time::Duration| d.as_secs_f64() * 1e6 / documents.max(1) as f64;
        println!();
        println!(
            "CPU in this process: connectors {:.2?} ({:.1} us/doc), workers {:.2?} ({:.1} us/doc), indexers {:.2?} ({:.1} us/doc)",
            cpu.connectors,
            per_doc(cpu.connectors),
            cpu.workers,
            per_doc(cpu.workers),
            cpu.indexers,
            per_doc(cpu.indexers)
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
                "{:<20} {:<16} {:>10} {:>9} {:>8} {:>8} {:>8} {:>12.2?} {:>10.2?}",
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
            "{:<20} {:<16} {:>10} {:>9} {:>8} {:>8} {:>8} {:>12.2?} {:>10.2?}",
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

/// `total` over `count` documents (at least one).
fn mean(total: std::time::Duration, count: u64) -> std::time::Duration {
    let nanos = total.as_nanos() / u128::from(count.max(1));
    std::time::Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}
