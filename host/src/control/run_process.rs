//! `weir serve-run`: one run of `weir serve` in its own process. It reads
//! its run from stdin ([`ToRun::Start`]), admits and validates it, says so,
//! runs it while it takes pause, resume, stop and rate changes from stdin
//! and reports its counts a few times a second, and says how it ended.
//!
//! It ends when its control plane is gone, whatever its log does: when its
//! stdin closes, and when the kernel sends it SIGTERM as the plane's
//! process ends (`PR_SET_PDEATHSIG`, set as it starts). A fleet's run ends
//! at once (the plane that takes over resumes it from its journal); any
//! other run is stopped as `POST .../stop` stops it, and the process ends
//! after the run's grace period and [`ORPHAN_SLACK`] whether or not it
//! did. Nothing on that path can panic: a log line written to a closed
//! pipe is dropped (and logging is the last thing it does).

use std::io::{BufRead, BufReader, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusHandle;

use crate::control::fleet::letters::Letters;
use crate::control::live::LiveRun;
use crate::control::reload;
use crate::control::start::prepare;
use crate::control::{ApiError, view};
use crate::run::Reloaded;
use crate::run::Throttle;
use crate::tenancy::process::protocol::{Failure, FromRun, ToRun, line};
use crate::tenancy::record::Counts;

/// How often the process reports its counts; its metrics go with counts
/// that moved, and every [`METRICS_EVERY`]th time (once a second) anyway.
const COUNTS_EVERY: Duration = Duration::from_millis(100);
const METRICS_EVERY: u32 = 10;

/// Exit code when what the server sent is not a run.
const EXIT_USAGE: u8 = 2;

/// How much longer than its grace period a run whose control plane is gone
/// may take to stop before its process ends anyway.
const ORPHAN_SLACK: Duration = Duration::from_secs(5);

/// Run the run the server sends on stdin; the exit code.
pub fn serve_run() -> u8 {
    let orphan = Arc::new(Orphan::default());
    orphan.on_sigterm();
    let mut input = BufReader::new(std::io::stdin());
    let mut first = String::new();
    let start = match input.read_line(&mut first) {
        Ok(_) => serde_json::from_str::<ToRun>(&first),
        Err(e) => {
            say(&format!("error: cannot read the run from stdin: {e}"));
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
        say("error: `weir serve-run` is started by `weir serve`, which sends it a run");
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
        out.send(&FromRun::NotStarted(Failure::Failed(format!(
            "no tenant `{tenant}`"
        ))));
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
            out.send(&FromRun::NotStarted(e.into_failure()));
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
    if fleet.is_none() {
        orphan.runs(Arc::clone(&live), runner.config().runner.grace_period);
    }
    out.send(&FromRun::Started);
    listen(
        input,
        Arc::clone(&live),
        throttle,
        Arc::clone(&orphan),
        out.clone(),
        Arc::clone(&runner),
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
    let record = view::ended(&live, outcome);
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

/// How the run's process reloads its run with a config.
type Reload = Arc<dyn Fn(&str) -> Result<Reloaded, ApiError> + Send + Sync>;

/// Take the server's controls from `input` until it closes; then the
/// control plane is gone.
fn listen(
    input: impl BufRead + Send + 'static,
    live: Arc<LiveRun>,
    throttle: Option<Arc<Throttle>>,
    orphan: Arc<Orphan>,
    out: Reporter,
    runner: Arc<crate::run::Runner>,
    reload: Reload,
) {
    let listening = Arc::clone(&live);
    let spawned = std::thread::Builder::new()
        .name("weir-serve-run-control".into())
        .spawn(move || {
            let live = listening;
            let (tapping, pushes) = (runner.taps(), runner.pushes());
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
                        match tapping.open(filter) {
                            Ok((rx, guard)) => {
                                taps.insert(tap, guard);
                                forward_tap(tap, rx, limit, out.clone());
                            }
                            Err(_) => out.send(&FromRun::TapEnded { tap }),
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
                                let outcome = reload(&config).map_err(ApiError::into_failure);
                                answer.send(&FromRun::Reloaded {
                                    reload: asked,
                                    outcome,
                                });
                            });
                        if let Err(e) = spawned {
                            out.send(&FromRun::Reloaded {
                                reload: asked,
                                outcome: Err(Failure::Failed(e.to_string())),
                            });
                        }
                    }
                    Ok(ToRun::Push {
                        push,
                        source,
                        lines,
                    }) => {
                        // Answered as the connector publishes the lines.
                        let answer = out.clone();
                        let reply = Box::new(move |a| {
                            answer.send(&FromRun::Pushed {
                                push,
                                outcome: Ok(a),
                            });
                        });
                        if let Err(refused) = pushes.offer(source.as_deref(), lines, reply) {
                            out.send(&FromRun::Pushed {
                                push,
                                outcome: Err(refused),
                            });
                        }
                    }
                    Ok(ToRun::Start { .. }) | Err(_) => {
                        tracing::warn!("the server sent what is not a control; ignored");
                    }
                }
            }
            orphan.plane_gone();
        });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "cannot listen to the server: stopping the run");
        live.stop();
    }
}

/// What the process does once its control plane is gone: before its run
/// started, and for a fleet's run, it ends at once (a fleet's journal and
/// event topic stay as they are: the plane that takes over resumes the run
/// from them); any other run is stopped, and the process ends after the
/// run's grace period and [`ORPHAN_SLACK`] if it has not ended by then.
#[derive(Default)]
struct Orphan {
    /// The run to stop, with its grace period: none for a fleet's run.
    run: Mutex<Option<(Arc<LiveRun>, Duration)>>,
    gone: std::sync::atomic::AtomicBool,
}

impl Orphan {
    /// From now on the plane's going stops `live` first.
    fn runs(&self, live: Arc<LiveRun>, grace: Duration) {
        *self.run.lock().unwrap_or_else(PoisonError::into_inner) = Some((live, grace));
    }

    /// SIGTERM (sent by the kernel when the plane's process ends, or by an
    /// operator) means the plane is gone.
    fn on_sigterm(self: &Arc<Self>) {
        let orphan = Arc::clone(self);
        let watching = signal_hook::iterator::Signals::new([signal_hook::consts::SIGTERM])
            .and_then(|mut signals| {
                std::thread::Builder::new()
                    .name("weir-serve-run-signals".into())
                    .spawn(move || {
                        if signals.forever().next().is_some() {
                            orphan.plane_gone();
                        }
                    })
            });
        if let Err(e) = watching {
            // SIGTERM then ends the process as it does by default.
            tracing::warn!(error = %e, "cannot watch for SIGTERM");
        }
    }

    /// The control plane is gone (the first call acts; it returns only if
    /// another call is acting).
    fn plane_gone(&self) {
        use std::sync::atomic::Ordering;
        if self.gone.swap(true, Ordering::SeqCst) {
            return;
        }
        let run = self
            .run
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let Some((live, grace)) = run else {
            log_quietly("the control plane is gone: this run is left to the one that takes over");
            end_now(0);
        };
        live.stop();
        log_quietly("the server is gone: the run is stopped");
        // This thread has nothing else to do: it is the deadline.
        std::thread::sleep(grace.saturating_add(ORPHAN_SLACK));
        log_quietly("the run did not stop within its grace period: its process ends");
        end_now(1);
    }
}

/// Log `message` as a warning; a logger that fails (or panics) is ignored.
fn log_quietly(message: &'static str) {
    let _ = catch_unwind(|| tracing::warn!("{message}"));
}

/// Write `line` to stderr, ignoring a closed pipe (`eprintln!` would panic).
fn say(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// End the process now: no destructor, no handler, nothing that can wait
/// on a cluster or a pipe that is gone.
fn end_now(code: i32) -> ! {
    // SAFETY: _exit has no preconditions; it ends the process at once.
    unsafe { libc::_exit(code) }
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
                let counts = Counts::of(&live.stats);
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
