//! What Weir measures: the live counters behind progress lines and run
//! summaries (here), every metric it exports ([`meters`], the one place
//! that names them), and the Prometheus exporter with the health endpoints
//! ([`export`]).
//!
//! Metrics go through the `metrics` facade, so any recorder the embedding
//! program installs sees them; `weir` installs the Prometheus one when it is
//! given a metrics address.

pub(crate) mod events;
pub mod export;
pub mod merge;
pub(crate) mod meters;
pub mod tap;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

/// Live counts for one run, read by the progress bar and throughput logs.
#[derive(Debug, Default)]
pub struct RunStats {
    pub published: Padded,
    pub processed: Padded,
    pub indexed: Padded,
    pub failed: Padded,
    pub dropped: Padded,
    /// Nanoseconds spent in pipelines, summed over documents.
    pub pipeline_nanos: Padded,
    /// Nanoseconds spent sending batches, summed.
    pub index_nanos: Padded,
    /// CPU time of the threads that ran connectors, workers and indexers
    /// in this process, in nanoseconds, added as each thread ends.
    pub connector_cpu_nanos: Padded,
    pub worker_cpu_nanos: Padded,
    pub indexer_cpu_nanos: Padded,
    /// Per stage of each pipeline, in the order first seen.
    stages: std::sync::Mutex<Vec<StageEntry>>,
    /// The running connector's word on how much it will publish
    /// (`progress`): the number, whether it said one, and `published` when
    /// it started (connectors run one after another).
    expected: Padded,
    expecting: Padded,
    expected_from: Padded,
}

/// How far the running connector is through what it said it would publish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expected {
    /// Published by it so far.
    pub published: u64,
    /// What it expects to publish in all.
    pub total: u64,
}

/// CPU time spent by each kind of thread of a run, in this process: where
/// a pipeline's time goes, for tuning (which one to give more threads).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuSummary {
    pub connectors: Duration,
    pub workers: Duration,
    pub indexers: Duration,
    /// Documents indexed in this process, and the time their batches took
    /// in the indexer plugin (retries included): the indexer's row of the
    /// summary beside the stages'.
    pub indexed: u64,
    pub index_time: Duration,
}

/// CPU time the calling thread has used so far.
pub fn thread_cpu() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid out-pointer for this clock.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(
        u64::try_from(now.tv_sec).unwrap_or(0),
        u32::try_from(now.tv_nsec).unwrap_or(0),
    )
}

/// Adds the CPU time its thread uses from now until it is dropped to a counter.
pub(crate) struct ThreadCpu<'a> {
    counter: &'a AtomicU64,
    start: Duration,
}

impl<'a> ThreadCpu<'a> {
    pub(crate) fn count_into(counter: &'a AtomicU64) -> Self {
        Self {
            counter,
            start: thread_cpu(),
        }
    }
}

impl Drop for ThreadCpu<'_> {
    fn drop(&mut self) {
        RunStats::add_time(self.counter, thread_cpu().saturating_sub(self.start));
    }
}

/// A pipeline, one of its stages, and the stage's figures.
type StageEntry = (Arc<str>, Arc<str>, Arc<StageStats>);

/// A counter alone on its cache line: threads counting different things
/// (the connector publishing, workers processing, the indexer indexing)
/// never slow each other down by sharing one.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct Padded(AtomicU64);

impl std::ops::Deref for Padded {
    type Target = AtomicU64;

    fn deref(&self) -> &AtomicU64 {
        &self.0
    }
}

/// What one instance of a stage did: each worker counts its own, on cache
/// lines of its own, and the summary adds them up.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct StageStats {
    /// Documents (children included) it was called with.
    pub documents: AtomicU64,
    /// Children it made.
    pub children: AtomicU64,
    /// Documents it failed (its own errors and traps).
    pub failed: AtomicU64,
    /// Documents its condition left out (not among `documents`).
    pub skipped: AtomicU64,
    /// Calls made again after a failure that may pass later.
    pub retries: AtomicU64,
    /// Nanoseconds in its calls, summed.
    pub nanos: AtomicU64,
}

/// A stage's figures at the end of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageSummary {
    pub pipeline: String,
    pub stage: String,
    pub documents: u64,
    pub children: u64,
    pub failed: u64,
    /// Documents its condition (`when`) left out, which passed it untouched.
    pub skipped: u64,
    /// Calls made again (the worker's retry policy).
    pub retries: u64,
    pub time: Duration,
}

/// A point-in-time copy of [`RunStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    pub published: u64,
    pub processed: u64,
    pub indexed: u64,
    pub failed: u64,
    pub dropped: u64,
    pub pipeline_nanos: u64,
    pub index_nanos: u64,
    /// When the running connector said how much it will publish.
    pub expected: Option<Expected>,
}

impl RunStats {
    /// A connector starts: nothing expected until it says.
    pub(crate) fn connector_started(&self) {
        self.expecting.store(0, Ordering::Relaxed);
        self.expected_from
            .store(self.published.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    /// The running connector expects to publish `total` in all.
    pub(crate) fn expect(&self, total: u64) {
        self.expected.store(total, Ordering::Relaxed);
        self.expecting.store(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> StatsSnapshot {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        StatsSnapshot {
            published: get(&self.published),
            processed: get(&self.processed),
            indexed: get(&self.indexed),
            failed: get(&self.failed),
            dropped: get(&self.dropped),
            pipeline_nanos: get(&self.pipeline_nanos),
            index_nanos: get(&self.index_nanos),
            expected: (get(&self.expecting) == 1).then(|| Expected {
                published: get(&self.published).saturating_sub(get(&self.expected_from)),
                total: get(&self.expected),
            }),
        }
    }

    /// Count from zero again, for the next run of the same runner
    /// (`weir run --every`); call it between runs.
    pub fn reset(&self) {
        for counter in [
            &self.published,
            &self.processed,
            &self.indexed,
            &self.failed,
            &self.dropped,
            &self.pipeline_nanos,
            &self.index_nanos,
            &self.connector_cpu_nanos,
            &self.worker_cpu_nanos,
            &self.indexer_cpu_nanos,
            &self.expected,
            &self.expecting,
            &self.expected_from,
        ] {
            counter.store(0, Ordering::Relaxed);
        }
        self.stages
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// The CPU time of each kind of thread so far.
    pub fn cpu(&self) -> CpuSummary {
        let get = |a: &AtomicU64| Duration::from_nanos(a.load(Ordering::Relaxed));
        CpuSummary {
            connectors: get(&self.connector_cpu_nanos),
            workers: get(&self.worker_cpu_nanos),
            indexers: get(&self.indexer_cpu_nanos),
            indexed: self.indexed.load(Ordering::Relaxed),
            index_time: get(&self.index_nanos),
        }
    }

    /// Figures for one more instance of `stage` in `pipeline`.
    pub fn stage(&self, pipeline: &str, stage: &str) -> Arc<StageStats> {
        let stats = Arc::new(StageStats::default());
        self.stages
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((pipeline.into(), stage.into(), Arc::clone(&stats)));
        stats
    }

    /// Every stage's figures so far.
    pub fn stage_summaries(&self) -> Vec<StageSummary> {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut summaries: Vec<StageSummary> = Vec::new();
        for (pipeline, stage, stats) in self
            .stages
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            let i = match summaries
                .iter()
                .position(|s| s.pipeline == **pipeline && s.stage == **stage)
            {
                Some(i) => i,
                None => {
                    summaries.push(StageSummary {
                        pipeline: pipeline.to_string(),
                        stage: stage.to_string(),
                        documents: 0,
                        children: 0,
                        failed: 0,
                        skipped: 0,
                        retries: 0,
                        time: Duration::ZERO,
                    });
                    summaries.len() - 1
                }
            };
            let summary = &mut summaries[i];
            summary.documents += get(&stats.documents);
            summary.retries += get(&stats.retries);
            summary.children += get(&stats.children);
            summary.failed += get(&stats.failed);
            summary.skipped += get(&stats.skipped);
            summary.time += Duration::from_nanos(get(&stats.nanos));
        }
        summaries
    }

    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn add_time(counter: &AtomicU64, elapsed: Duration) {
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        counter.fetch_add(nanos, Ordering::Relaxed);
    }
}

/// Throughput lines between two snapshots `elapsed` apart, as the log shows them.
pub fn throughput_lines(
    before: &StatsSnapshot,
    now: &StatsSnapshot,
    elapsed: Duration,
    pending: usize,
) -> [String; 3] {
    let secs = elapsed.as_secs_f64().max(1e-9);
    let rate = |a: u64, b: u64| (b.saturating_sub(a)) as f64 / secs;
    // Latencies are known where the work is done in this process.
    let mean_ms = |what: &str, nanos: u64, count: u64| {
        if count == 0 || nanos == 0 {
            String::new()
        } else {
            format!(
                " Mean {what} latency: {:.3} ms/doc.",
                nanos as f64 / count as f64 / 1e6
            )
        }
    };
    [
        format!(
            "{} docs published. Rate: {:.1} docs/s. Waiting on {pending} docs.",
            now.published,
            rate(before.published, now.published)
        ),
        format!(
            "{} docs processed. Rate: {:.1} docs/s.{}",
            now.processed,
            rate(before.processed, now.processed),
            mean_ms("pipeline", now.pipeline_nanos, now.processed)
        ),
        format!(
            "{} docs indexed. Rate: {:.1} docs/s.{}",
            now.indexed,
            rate(before.indexed, now.indexed),
            mean_ms("backend", now.index_nanos, now.indexed + now.failed)
        ),
    ]
}
