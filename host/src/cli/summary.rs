//! What `weir run` and `weir replay` show when a run ends: the summary
//! tables (the progress line while it goes on is `progress.rs`).

use std::path::Path;
use std::time::Duration;

use weir::config::Config;
use weir::run::RunResult;

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
    fn a_mean_of_nothing_is_no_figure() {
        assert_eq!(mean(Duration::from_secs(1), 0), "-");
        assert_eq!(mean(Duration::from_millis(10), 4), "2.50ms");
    }
}
