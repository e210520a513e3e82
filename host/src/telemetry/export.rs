//! The operations endpoints every Weir process serves on its metrics
//! address: `/metrics` (the Prometheus text format), `/healthz` (the
//! process is alive) and `/readyz` (it is ready for work).

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

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
    static HANDLE: OnceLock<Result<PrometheusHandle, String>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &SECONDS_BUCKETS)
                .and_then(|b| {
                    b.set_buckets_for_metric(Matcher::Suffix("_batch_size".into()), &BATCH_BUCKETS)
                })
                .map_err(|e| e.to_string())?
                .build_recorder();
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
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        render(handle),
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
