//! Taps: live documents as they leave a stage, copied to a reader
//! (`weir tap`, `GET /tap` on the ops server, a tenant's run in `weir
//! serve`). A tap is bounded every way: it takes at most its `limit`
//! documents, a sample of them (`percent`, by id), each cut to
//! [`MAX_DOCUMENT_BYTES`], and a reader that falls behind misses documents
//! rather than slowing the pipeline: workers never wait for a tap. With no
//! tap open, a worker's cost is one atomic load per stage call.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};

use super::events::{TapOffered, TapRefused, Tapped};

mod names;
use crate::core::document::Document;
pub use names::{TapNames, TapRefusal};

/// Most documents one tap takes.
pub const MAX_LIMIT: usize = 10_000;
/// Documents a tap holds for a reader that is behind; more are dropped.
const BUFFER: usize = 64;
/// A document bigger than this (as JSON) is sent as its id and size only.
pub const MAX_DOCUMENT_BYTES: usize = 64 * 1024;
/// Taps open at once on one [`Taps`] (a process's runner); more are refused. `weir serve` holds
/// each tenant to fewer (`control/taps.rs`), so one tenant cannot take them all.
pub const MAX_TAPS: usize = 64;

/// What a tap takes.
#[derive(Debug, Clone)]
pub struct TapFilter {
    pub pipeline: String,
    /// Documents leaving this stage; none: leaving the pipeline (to the indexer).
    pub stage: Option<String>,
    /// Only documents of this run.
    pub run_id: Option<String>,
    pub limit: usize,
    /// The share of documents taken, 0 to 100, by a hash of their id.
    pub percent: f64,
}

struct Tap {
    filter: TapFilter,
    below: u64,
    /// Taken out when the run it taps ends: the reader then sees the end.
    tx: Mutex<Option<tokio::sync::mpsc::Sender<Value>>>,
    taken: AtomicUsize,
}

/// Why a tap's stream ended, its last line (`{"end": "run"}`): it had its
/// `limit` of documents, its `time` was up, or the `run` it taps ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TapEnd {
    Limit,
    Time,
    Run,
}

impl TapEnd {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Limit => "limit",
            Self::Time => "time",
            Self::Run => "run",
        }
    }

    /// The line that ends a tap's stream.
    pub fn line(self) -> Value {
        json!({ "end": self.as_str() })
    }

    /// The end a stream's `line` says, when it is an end line.
    pub fn of_line(line: &Value) -> Option<Self> {
        let object = line.as_object().filter(|o| o.len() == 1)?;
        match object.get("end")?.as_str()? {
            "limit" => Some(Self::Limit),
            "time" => Some(Self::Time),
            "run" => Some(Self::Run),
            _ => None,
        }
    }
}

/// The taps open on a process's documents: made by the process's topology
/// (`topology::runner`) and held by its runner, whose workers offer their
/// documents to it, and by whatever opens taps (the ops server's `/tap`,
/// `weir serve`). Cloning it shares it.
#[derive(Clone, Default)]
pub struct Taps(Arc<Open>);

#[derive(Default)]
struct Open {
    open: AtomicUsize,
    taps: Mutex<Vec<Arc<Tap>>>,
    /// What a tap may name; unknown (anything goes) until a runner says.
    names: Mutex<Option<TapNames>>,
}

impl std::fmt::Debug for Taps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Taps")
            .field("open", &self.0.open.load(Ordering::Relaxed))
            .finish()
    }
}

/// An open tap: documents arrive on its receiver until it has its limit;
/// dropping it closes the tap.
pub struct TapGuard(Taps, Arc<Tap>);

impl std::fmt::Debug for TapGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TapGuard")
            .field("pipeline", &self.1.filter.pipeline)
            .finish_non_exhaustive()
    }
}

impl Drop for TapGuard {
    fn drop(&mut self) {
        let open = &self.0.0;
        let mut taps = open.taps.lock().unwrap_or_else(PoisonError::into_inner);
        taps.retain(|t| !Arc::ptr_eq(t, &self.1));
        open.open.store(taps.len(), Ordering::Relaxed);
    }
}

impl Taps {
    /// Whether any tap is open: the one check workers make.
    #[inline]
    pub(crate) fn any(&self) -> bool {
        self.0.open.load(Ordering::Relaxed) > 0
    }

    /// Open a tap; refused when it names a pipeline or stage the running
    /// config does not have, or [`MAX_TAPS`] are open already.
    pub fn open(
        &self,
        mut filter: TapFilter,
    ) -> Result<(tokio::sync::mpsc::Receiver<Value>, TapGuard), TapRefusal> {
        if let Some(names) = &*self.0.names.lock().unwrap_or_else(PoisonError::into_inner) {
            names.check(&filter)?;
        }
        filter.limit = filter.limit.clamp(1, MAX_LIMIT);
        let share = filter.percent.clamp(0.0, 100.0) / 100.0;
        let below = if share >= 1.0 {
            u64::MAX
        } else {
            (share * u64::MAX as f64) as u64
        };
        let (tx, rx) = tokio::sync::mpsc::channel(BUFFER);
        let tap = Arc::new(Tap {
            filter,
            below,
            tx: Mutex::new(Some(tx)),
            taken: AtomicUsize::new(0),
        });
        let mut taps = self.0.taps.lock().unwrap_or_else(PoisonError::into_inner);
        if taps.len() >= MAX_TAPS {
            TapRefused { open: taps.len() }.emit();
            return Err(TapRefusal::TooMany { max: MAX_TAPS });
        }
        taps.push(Arc::clone(&tap));
        self.0.open.store(taps.len(), Ordering::Relaxed);
        Ok((rx, TapGuard(self.clone(), tap)))
    }

    /// What taps may name from now on (a runner's config, and each
    /// config a reload takes up).
    pub(crate) fn know(&self, names: TapNames) {
        *self.0.names.lock().unwrap_or_else(PoisonError::into_inner) = Some(names);
    }

    /// Run `run_id` ended: the taps on it (and those on any run) end, their
    /// readers told so once they have what was sent.
    pub(crate) fn run_ended(&self, run_id: &str) {
        let mut taps = self.0.taps.lock().unwrap_or_else(PoisonError::into_inner);
        taps.retain(|tap| {
            let on_it = tap.filter.run_id.as_deref().is_none_or(|id| id == run_id);
            if on_it {
                tap.tx.lock().unwrap_or_else(PoisonError::into_inner).take();
            }
            !on_it
        });
        self.0.open.store(taps.len(), Ordering::Relaxed);
    }

    /// `doc` left `stage` of `pipeline` (none: the pipeline): copy it to
    /// the taps that take it. Call only when [`any`](Self::any) says a tap
    /// is open.
    pub(crate) fn offer(&self, pipeline: &str, stage: Option<&str>, doc: &Document) {
        let taps: Vec<Arc<Tap>> = self
            .0
            .taps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|t| {
                t.filter.pipeline == pipeline
                    && t.filter.stage.as_deref() == stage
                    && (t.filter.run_id.is_none() || t.filter.run_id.as_deref() == doc.run_id())
            })
            .cloned()
            .collect();
        for tap in taps {
            if tap.below != u64::MAX && crate::core::sample::id_hash(doc.id()) >= tap.below {
                continue;
            }
            if tap.taken.load(Ordering::Relaxed) >= tap.filter.limit {
                continue;
            }
            let tx = tap.tx.lock().unwrap_or_else(PoisonError::into_inner);
            let Some(tx) = tx.as_ref() else {
                continue;
            };
            match tx.try_reserve() {
                Ok(permit) => {
                    if tap.taken.fetch_add(1, Ordering::Relaxed) < tap.filter.limit {
                        permit.send(line(pipeline, stage, doc));
                        TapOffered {
                            outcome: Tapped::Sent,
                        }
                        .emit();
                    }
                }
                Err(_) => TapOffered {
                    outcome: Tapped::Dropped,
                }
                .emit(),
            }
        }
    }
}

/// One tapped document as its line: where it was, and the document (or
/// its id and size when it is too big to send).
fn line(pipeline: &str, stage: Option<&str>, doc: &Document) -> Value {
    let bytes = doc.approx_json_bytes();
    let document = if bytes > MAX_DOCUMENT_BYTES {
        json!({ "id": doc.id(), "truncated": true, "bytes": bytes })
    } else {
        doc.to_json()
    };
    json!({
        "pipeline": pipeline,
        "stage": stage,
        "run_id": doc.run_id(),
        "document": document,
    })
}

/// The longest a tap stays open, and how long by default.
pub const MAX_SECONDS: u64 = 3600;
const DEFAULT_SECONDS: u64 = 60;
/// Documents a tap takes when it does not say.
const DEFAULT_LIMIT: usize = 10;

/// `GET /tap` on an ops server: `pipeline`, `stage`, `run_id`, `limit`,
/// `percent`, `seconds`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TapQuery {
    pub pipeline: String,
    #[serde(default)]
    pub stage: Option<String>,
    #[serde(default)]
    pub run_id: Option<String>,
    #[serde(default)]
    pub limit: Option<usize>,
    #[serde(default)]
    pub percent: Option<f64>,
    #[serde(default)]
    pub seconds: Option<u64>,
}

impl TapQuery {
    /// What the tap takes; a problem with the query as its message.
    pub fn filter(&self) -> Result<TapFilter, String> {
        let percent = self.percent.unwrap_or(100.0);
        if !(0.0..=100.0).contains(&percent) {
            return Err(format!("percent {percent} is not from 0 to 100"));
        }
        let limit = self.limit.unwrap_or(DEFAULT_LIMIT);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(format!("limit {limit} is not from 1 to {MAX_LIMIT}"));
        }
        Ok(TapFilter {
            pipeline: self.pipeline.clone(),
            stage: self.stage.clone(),
            run_id: self.run_id.clone(),
            limit,
            percent,
        })
    }

    /// How long the tap stays open.
    pub fn duration(&self) -> Result<std::time::Duration, String> {
        let seconds = self.seconds.unwrap_or(DEFAULT_SECONDS);
        if !(1..=MAX_SECONDS).contains(&seconds) {
            return Err(format!("seconds {seconds} is not from 1 to {MAX_SECONDS}"));
        }
        Ok(std::time::Duration::from_secs(seconds))
    }
}

/// The ops server's `/tap` on `taps`: refused unless the process's config
/// allows taps (`allowed`, `[metrics] tap = true`); with no `taps` (a
/// process that runs no pipeline), refused as not allowed.
pub fn routes(taps: Option<Taps>, allowed: bool) -> axum::Router {
    use axum::extract::Query;
    use axum::http::StatusCode;
    use axum::response::IntoResponse;
    let taps = taps.filter(|_| allowed);
    axum::Router::new().route(
        "/tap",
        axum::routing::get(move |query: Result<Query<TapQuery>, axum::extract::rejection::QueryRejection>| {
            let taps = taps.clone();
            async move {
            let Some(taps) = taps else {
                return (
                    StatusCode::FORBIDDEN,
                    "this process does not allow taps: set `tap = true` in its config's [metrics]\n",
                )
                    .into_response();
            };
            let query = match query {
                Ok(Query(query)) => query,
                Err(e) => return (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response(),
            };
            match (query.filter(), query.duration()) {
                (Ok(filter), Ok(duration)) => match taps.open(filter.clone()) {
                    Ok((rx, guard)) => stream(rx, guard, filter.limit, duration),
                    Err(refused) => {
                        let status = match refused {
                            TapRefusal::TooMany { .. } => StatusCode::TOO_MANY_REQUESTS,
                            TapRefusal::NoPipeline { .. } | TapRefusal::NoStage { .. } => {
                                StatusCode::NOT_FOUND
                            }
                        };
                        (status, format!("{refused}\n")).into_response()
                    }
                },
                (Err(e), _) | (_, Err(e)) => (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response(),
            }
            }
        }),
    )
}

/// Documents from `rx` as JSON lines, as they come, until `limit` of them,
/// `duration`, the run ending (its sender gone) or the reader going away
/// (which closes the tap: `hold` is dropped with the answer). The last line
/// says why it ended ([`TapEnd`]), so a reader tells an end from a break.
pub fn stream<H: Send + Unpin + 'static>(
    rx: tokio::sync::mpsc::Receiver<Value>,
    hold: H,
    limit: usize,
    duration: std::time::Duration,
) -> axum::response::Response {
    let body = TapBody {
        rx,
        _hold: hold,
        left: limit,
        until: Box::pin(tokio::time::sleep(duration)),
        ended: false,
    };
    axum::response::Response::builder()
        .header(axum::http::header::CONTENT_TYPE, "application/x-ndjson")
        .body(axum::body::Body::new(body))
        .expect("a valid response")
}

struct TapBody<H> {
    rx: tokio::sync::mpsc::Receiver<Value>,
    _hold: H,
    left: usize,
    until: std::pin::Pin<Box<tokio::time::Sleep>>,
    /// The end line is sent.
    ended: bool,
}

impl<H: Unpin> hyper::body::Body for TapBody<H> {
    type Data = axum::body::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        use std::task::Poll;
        let send = |line: Value| {
            let text = format!("{line}\n");
            Poll::Ready(Some(Ok(hyper::body::Frame::data(text.into()))))
        };
        if self.ended {
            return Poll::Ready(None);
        }
        let end = if self.left == 0 {
            Some(TapEnd::Limit)
        } else if self.until.as_mut().poll(cx).is_ready() {
            Some(TapEnd::Time)
        } else {
            match self.rx.poll_recv(cx) {
                Poll::Ready(Some(line)) => {
                    self.left -= 1;
                    return send(line);
                }
                Poll::Ready(None) => Some(TapEnd::Run),
                Poll::Pending => None,
            }
        };
        match end {
            Some(end) => {
                self.ended = true;
                send(end.line())
            }
            None => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests;
