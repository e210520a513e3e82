//! `weir serve-run`: one run of `weir serve` in its own process. It reads
//! its run from stdin ([`ToRun::Start`]), admits and validates it, says so,
//! runs it while it takes pause, resume, stop and rate changes from stdin
//! and reports its counts a few times a second, and says how it ended.
//! When its stdin closes (the server is gone) it stops its run.

use std::io::{BufRead, BufReader, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusHandle;

use super::protocol::{FromRun, ToRun, line};
use crate::control::fleet::letters::Letters;
use crate::control::live::LiveRun;
use crate::control::reload::{self, ReloadFailure};
use crate::control::store::Counts;
use crate::control::{ApiError, prepare, supervise};
use crate::run::Reloaded;
use crate::run::Throttle;

/// How often the process reports its counts; its metrics go with counts
/// that moved, and every [`METRICS_EVERY`]th time (once a second) anyway.
const COUNTS_EVERY: Duration = Duration::from_millis(100);
const METRICS_EVERY: u32 = 10;

/// Exit code when what the server sent is not a run.
const EXIT_USAGE: u8 = 2;

/// Run the run the server sends on stdin; the exit code.
pub fn serve_run() -> u8 {
    let mut input = BufReader::new(std::io::stdin());
    let mut first = String::new();
    let start = match input.read_line(&mut first) {
        Ok(_) => serde_json::from_str::<ToRun>(&first),
        Err(e) => {
            eprintln!("error: cannot read the run from stdin: {e}");
            return EXIT_USAGE;
        }
    };
    let Ok(ToRun::Start {
        operator,
        tenant,
        run_id,
        config,
        per_second,
        fleet,
    }) = start
    else {
        eprintln!("error: `weir serve-run` is started by `weir serve`, which sends it a run");
        return EXIT_USAGE;
    };
    let out = Reporter::default();
    let metrics = match crate::telemetry::export::recorder() {
        Ok(handle) => Some(handle),
        Err(e) => {
            tracing::warn!(error = %e, "the run's metrics will not reach the server");
            None
        }
    };
    let Some(policy) = operator.tenant(&tenant) else {
        out.send(&FromRun::Failed {
            error: format!("no tenant `{tenant}`"),
        });
        return 0;
    };
    let throttle = per_second.map(|rate| Arc::new(Throttle::new(rate)));
    let prepared = prepare(
        &operator,
        policy,
        &run_id,
        &config,
        throttle.clone(),
        fleet.as_deref(),
    );
    let (runner, plugins) = match prepared {
        Ok((runner, plugins)) => (Arc::new(runner), plugins),
        Err(e) => {
            out.send(&refusal(e));
            return 0;
        }
    };
    let reloading = Arc::clone(&runner);
    let live = Arc::new(LiveRun::new(
        run_id.clone(),
        tenant.clone(),
        runner.stats(),
        runner.pauser(),
        runner.interrupter(),
        None,
        None,
    ));
    out.send(&FromRun::Started);
    listen(
        input,
        Arc::clone(&live),
        throttle,
        fleet.is_some(),
        out.clone(),
        Arc::new(move |config: &str| {
            let Some(policy) = operator.tenant(&tenant) else {
                return Err(ApiError::NoSuchTenant);
            };
            reload::reload(&reloading, &operator, policy, &run_id, config)
        }),
    );
    let (done, ended) = mpsc::channel::<()>();
    let reporting = report(&out, &live, metrics.clone(), ended);
    let letters = fleet
        .is_some()
        .then(|| Letters::follow(runner.config(), &live.id));
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        runner.run_validated(&plugins, &live.id)
    }));
    if let Some(letters) = letters {
        tracing::debug!("the run has ended: reading the last of its dead letters");
        letters.finish();
        tracing::debug!("the run's dead letters are kept");
    }
    let record = supervise::ended(&live, outcome);
    drop(done);
    if let Some(reporting) = reporting {
        let _ = reporting.join();
    }
    if let Some(handle) = &metrics {
        out.send(&FromRun::Metrics {
            text: crate::telemetry::export::render(handle),
        });
    }
    out.send(&FromRun::Finished(Box::new(record)));
    0
}

/// A refusal to start, as the server answers it.
fn refusal(error: ApiError) -> FromRun {
    match error {
        ApiError::Forbidden { problems, .. } => FromRun::Refused {
            forbidden: true,
            problems,
        },
        ApiError::Invalid(problems) => FromRun::Refused {
            forbidden: false,
            problems,
        },
        other => FromRun::Failed {
            error: other.to_string(),
        },
    }
}

/// How the run's process reloads its run with a config.
type Reload = Arc<dyn Fn(&str) -> Result<Reloaded, ApiError> + Send + Sync>;

/// Take the server's controls from `input` until it closes; then stop.
fn listen(
    input: impl BufRead + Send + 'static,
    live: Arc<LiveRun>,
    throttle: Option<Arc<Throttle>>,
    fleet: bool,
    out: Reporter,
    reload: Reload,
) {
    let listening = Arc::clone(&live);
    let spawned = std::thread::Builder::new()
        .name("weir-serve-run-control".into())
        .spawn(move || {
            let live = listening;
            let mut taps = std::collections::HashMap::new();
            for line in input.lines().map_while(Result::ok) {
                match serde_json::from_str::<ToRun>(&line) {
                    Ok(ToRun::Pause) => live.pause(),
                    Ok(ToRun::Resume) => live.resume(),
                    Ok(ToRun::Stop) => live.stop(),
                    Ok(ToRun::Rate { per_second }) => {
                        if let Some(throttle) = &throttle {
                            throttle.set_rate(per_second);
                        }
                    }
                    Ok(ToRun::Tap {
                        tap,
                        pipeline,
                        stage,
                        limit,
                        percent,
                    }) => {
                        let filter = crate::telemetry::tap::TapFilter {
                            pipeline,
                            stage,
                            run_id: Some(live.id.clone()),
                            limit,
                            percent,
                        };
                        match crate::telemetry::tap::open(filter) {
                            Some((rx, guard)) => {
                                taps.insert(tap, guard);
                                forward_tap(tap, rx, limit, out.clone());
                            }
                            None => out.send(&FromRun::TapEnded { tap }),
                        }
                    }
                    Ok(ToRun::Untap { tap }) => {
                        taps.remove(&tap);
                    }
                    Ok(ToRun::Reload {
                        reload: asked,
                        config,
                    }) => {
                        // Off this thread: a reload waits for the workers,
                        // and stop must still be heard meanwhile.
                        let answer = out.clone();
                        let reload = Arc::clone(&reload);
                        let spawned = std::thread::Builder::new()
                            .name("weir-serve-run-reload".into())
                            .spawn(move || {
                                let outcome = reload(&config).map_err(ReloadFailure::of);
                                answer.send(&FromRun::Reloaded {
                                    reload: asked,
                                    outcome,
                                });
                            });
                        if let Err(e) = spawned {
                            out.send(&FromRun::Reloaded {
                                reload: asked,
                                outcome: Err(ReloadFailure::Failed(e.to_string())),
                            });
                        }
                    }
                    Ok(ToRun::Start { .. }) | Err(_) => {
                        tracing::warn!("the server sent what is not a control; ignored");
                    }
                }
            }
            if fleet {
                // Its journal and event topic stay as they are: the control
                // plane that takes over resumes the run from them.
                tracing::warn!(
                    "the control plane is gone: the run is left to the one that takes over"
                );
                std::process::exit(0);
            }
            tracing::warn!("the server is gone: stopping the run");
            live.stop();
        });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "cannot listen to the server: stopping the run");
        live.stop();
    }
}

/// Send what tap `tap` takes to the server, up to `limit` documents.
fn forward_tap(
    tap: u64,
    mut rx: tokio::sync::mpsc::Receiver<serde_json::Value>,
    limit: usize,
    out: Reporter,
) {
    let spawned = std::thread::Builder::new()
        .name("weir-serve-run-tap".into())
        .spawn(move || {
            for _ in 0..limit {
                let Some(line) = rx.blocking_recv() else {
                    break;
                };
                out.send(&FromRun::Tapped { tap, line });
            }
            out.send(&FromRun::TapEnded { tap });
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start a tap");
    }
}

/// Report `live`'s counts every [`COUNTS_EVERY`], and its metrics every
/// [`METRICS_EVERY`] of those, until `ended` says so.
fn report(
    out: &Reporter,
    live: &Arc<LiveRun>,
    metrics: Option<PrometheusHandle>,
    ended: mpsc::Receiver<()>,
) -> Option<std::thread::JoinHandle<()>> {
    let (out, live) = (out.clone(), Arc::clone(live));
    std::thread::Builder::new()
        .name("weir-serve-run-report".into())
        .spawn(move || {
            // The receiver's timeout is the reporting clock. Metrics go
            // with counts that moved, so the two agree, and once a second.
            let mut ticks = 0_u32;
            let mut last = None;
            while let Err(RecvTimeoutError::Timeout) = ended.recv_timeout(COUNTS_EVERY) {
                let s = live.stats.snapshot();
                let counts = Counts {
                    published: s.published,
                    processed: s.processed,
                    indexed: s.indexed,
                    failed: s.failed,
                    dropped: s.dropped,
                };
                ticks = ticks.wrapping_add(1);
                let moved = last != Some(counts);
                if let Some(handle) = metrics
                    .as_ref()
                    .filter(|_| moved || ticks.is_multiple_of(METRICS_EVERY))
                {
                    out.send(&FromRun::Metrics {
                        text: crate::telemetry::export::render(handle),
                    });
                }
                out.send(&FromRun::Counts(counts));
                last = Some(counts);
            }
        })
        .ok()
}

/// The process's stdout, one message a line, from any thread.
#[derive(Clone, Default)]
struct Reporter(Arc<Mutex<()>>);

impl Reporter {
    fn send(&self, message: &FromRun) {
        let _one_at_a_time = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let mut stdout = std::io::stdout().lock();
        // A server that stopped listening learns nothing more; its run is
        // stopped by `listen` when its stdin closes.
        let _ = stdout
            .write_all(line(message).as_bytes())
            .and_then(|()| stdout.flush());
    }
}
