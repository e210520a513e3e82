//! The operations endpoints every Weir process serves on its metrics
//! address: `/metrics` (the Prometheus text format), `/healthz` (the
//! process is alive) and `/readyz` (it is ready for work).

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use metrics_util::MetricKindMask;

/// Bucket bounds of the `_seconds` histograms: 50 µs to 60 s.
const SECONDS_BUCKETS: [f64; 14] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.1, 0.5, 2.5, 10.0,
    60.0,
];
/// Bucket bounds of the batch sizes.
const BATCH_BUCKETS: [f64; 9] = [
    1.0, 10.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 5000.0, 10000.0,
];

/// Why the Prometheus recorder could not be installed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct RecorderError(String);

/// The Prometheus recorder of this process, installed on first use.
pub fn recorder() -> Result<PrometheusHandle, RecorderError> {
    install(None)
}

/// As [`recorder`], for a process whose series come and go with the runs it
/// serves (`weir serve`): a series not updated for `idle` is dropped (and
/// starts again from zero if it comes back), so the names of finished runs'
/// pipelines, connectors and stages do not pile up.
pub fn expiring_recorder(idle: Duration) -> Result<PrometheusHandle, RecorderError> {
    install(Some(idle))
}

/// The first call installs the recorder; later ones get its handle.
fn install(idle: Option<Duration>) -> Result<PrometheusHandle, RecorderError> {
    static HANDLE: OnceLock<Result<PrometheusHandle, String>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = builder(idle).map_err(|e| e.to_string())?.build_recorder();
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder).map_err(|e| {
                format!("cannot install the Prometheus recorder (another is installed): {e}")
            })?;
            super::meters::describe();
            Ok(handle)
        })
        .clone()
        .map_err(RecorderError)
}

fn builder(
    idle: Option<Duration>,
) -> Result<PrometheusBuilder, metrics_exporter_prometheus::BuildError> {
    let builder = PrometheusBuilder::new()
        .idle_timeout(MetricKindMask::ALL, idle)
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &SECONDS_BUCKETS)?;
    builder.set_buckets_for_metric(Matcher::Suffix("_batch_size".into()), &BATCH_BUCKETS)
}

/// The lines of Prometheus `text` that are `tenant`'s: its samples (those
/// labelled `tenant="<tenant>"`) and the `# HELP` and `# TYPE` lines of
/// their metrics. Nothing of another tenant's, nor of the process.
pub fn tenant_lines(text: &str, tenant: &str) -> String {
    let label = format!("tenant=\"{tenant}\"");
    let theirs = |sample: &str| {
        let Some((_, labels)) = sample.split_once('{') else {
            return false;
        };
        let labels = labels.split_once('}').map_or(labels, |(l, _)| l);
        labels.split(',').any(|pair| pair == label)
    };
    let mut out = String::new();
    // The `#` lines of the metric being read, until a sample of it is kept.
    let mut heading: Vec<&str> = Vec::new();
    let mut heading_of = "";
    for line in text.lines() {
        if let Some(comment) = line.strip_prefix("# ") {
            let metric = comment.split_whitespace().nth(1).unwrap_or("");
            if metric != heading_of {
                heading.clear();
                heading_of = metric;
            }
            heading.push(line);
        } else if theirs(line) {
            for kept in heading.drain(..).chain([line]) {
                out.push_str(kept);
                out.push('\n');
            }
        }
    }
    out
}

/// The metrics text as of now.
pub fn render(handle: &PrometheusHandle) -> String {
    super::meters::record_process_memory();
    handle.render()
}

/// Whether a process is ready for work, as `/readyz` answers.
#[derive(Debug, Clone, Default)]
pub struct Health(Arc<AtomicU8>);

impl Health {
    const STARTING: u8 = 0;
    const READY: u8 = 1;
    const STOPPING: u8 = 2;

    /// Plugins are loaded and the process has started its work.
    pub fn ready(&self) {
        let _ = self.0.compare_exchange(
            Self::STARTING,
            Self::READY,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    /// The process is shutting down: no longer ready.
    pub fn stopping(&self) {
        self.0.store(Self::STOPPING, Ordering::Release);
    }

    pub fn is_ready(&self) -> bool {
        self.0.load(Ordering::Acquire) == Self::READY
    }

    fn state(&self) -> &'static str {
        match self.0.load(Ordering::Acquire) {
            Self::STARTING => "starting",
            Self::READY => "ready",
            _ => "stopping",
        }
    }
}

/// `/metrics`, `/healthz` and `/readyz`.
pub fn routes(handle: PrometheusHandle, health: Health) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(move || {
                let text = metrics_text(&handle);
                async move { text }
            }),
        )
        .merge(health_routes(health))
}

/// The metrics as of now, as a Prometheus text-format response.
pub fn metrics_text(handle: &PrometheusHandle) -> impl axum::response::IntoResponse + use<> {
    text_response(render(handle))
}

/// Prometheus `text` as a text-format response.
pub fn text_response(text: String) -> impl axum::response::IntoResponse {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
}

/// `/healthz` and `/readyz`, answering as `health` says.
pub fn health_routes(health: Health) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/readyz",
            get(move || {
                let state = health.state();
                let status = if health.is_ready() {
                    StatusCode::OK
                } else {
                    StatusCode::SERVICE_UNAVAILABLE
                };
                async move { (status, format!("{state}\n")) }
            }),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_reads_its_own_series_and_nothing_else() {
        let text = "\
# HELP weir_docs_published_total Documents published by connectors
# TYPE weir_docs_published_total counter
weir_docs_published_total{pipeline=\"a\",tenant=\"acme\",connector=\"c\"} 5
weir_docs_published_total{pipeline=\"z\",tenant=\"zeta\",connector=\"c\"} 7
weir_docs_published_total{pipeline=\"x\",tenant=\"acme-two\",connector=\"tenant=\\\"acme\\\"\"} 1
# HELP weir_runs_total Runs finished, by status
# TYPE weir_runs_total counter
weir_runs_total{tenant=\"zeta\",status=\"success\"} 2
# HELP weir_resident_bytes Resident memory
# TYPE weir_resident_bytes gauge
weir_resident_bytes 1000
# TYPE weir_pipeline_seconds histogram
weir_pipeline_seconds_bucket{pipeline=\"a\",tenant=\"acme\",le=\"0.1\"} 3
weir_pipeline_seconds_sum{pipeline=\"a\",tenant=\"acme\"} 0.2
";
        assert_eq!(
            tenant_lines(text, "acme"),
            "\
# HELP weir_docs_published_total Documents published by connectors
# TYPE weir_docs_published_total counter
weir_docs_published_total{pipeline=\"a\",tenant=\"acme\",connector=\"c\"} 5
# TYPE weir_pipeline_seconds histogram
weir_pipeline_seconds_bucket{pipeline=\"a\",tenant=\"acme\",le=\"0.1\"} 3
weir_pipeline_seconds_sum{pipeline=\"a\",tenant=\"acme\"} 0.2
"
        );
        assert_eq!(tenant_lines(text, "nobody"), "");
    }

    #[test]
    fn series_not_updated_for_the_idle_time_are_dropped() {
        let recorder = builder(Some(Duration::from_millis(300)))
            .expect("builder")
            .build_recorder();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, || {
            metrics::counter!("weir_test_total", "stage" => "finished-run").increment(1);
        });
        assert!(handle.render().contains("finished-run"));
        // The series' only update is behind it: time passing is the point.
        std::thread::sleep(Duration::from_millis(600));
        assert!(
            !handle.render().contains("finished-run"),
            "{}",
            handle.render()
        );
    }
}
