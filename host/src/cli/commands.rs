//! The commands that load a config: `weir validate`, `run`, `replay`, the
//! serving processes and `weir serve`. Each loads, asks `weir::topology`
//! for what runs, and turns the outcome into output and an exit code.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use weir::messenger::kafka::KafkaTopics;
use weir::run::{RunStatus, Runner, Shutdown, new_run_id};
use weir::topology::serving::{self, Role};
use weir::topology::{self, Health, Mode};

mod rebuild;

use super::EXIT_INVALID_CONFIG;
use super::prepare::{
    Stopped, draft_with, prepare, prepare_validated, report_invalid, stopped, validated,
};
use super::progress::Progress;
use super::signals::{control_by_signals, on_pause_signals, on_signal};
use super::summary::print_summary;

/// `weir validate`, and with `backends`, each indexer's server reached.
pub(super) fn validate(path: &Path, backends: bool) -> anyhow::Result<u8> {
    stopped(
        prepare_validated(path, Mode::Local).and_then(|(runner, plugins)| {
            if backends {
                let checked = super::backends::check(runner.config());
                for line in &checked.reached {
                    println!("{line}");
                }
                if !checked.problems.is_empty() {
                    report_invalid(path, &checked.problems);
                    return Err(Stopped::Invalid);
                }
            }
            println!("{}: valid", path.display());
            super::state::print_syncs_of(&runner, &plugins);
            Ok(0)
        }),
    )
}

/// The ops server, signals and progress of a run, around `run`.
fn run_with_controls(
    config: &Path,
    runner: &Runner,
    metrics_addr: Option<&str>,
    no_progress: bool,
    run: impl FnOnce() -> Result<weir::run::RunResult, u8>,
) -> Result<u8, Stopped> {
    let _ops = ops_of(runner, metrics_addr)?;
    controlled(config, runner, no_progress, run)
}

/// The ops server of `runner`'s runs, ready.
fn ops_of(
    runner: &Runner,
    metrics_addr: Option<&str>,
) -> Result<(Health, Option<weir::http::HttpServer>), Stopped> {
    let health = Health::default();
    let ops = topology::ops_server_for(
        runner,
        metrics_addr.or(runner.config().metrics.addr.as_deref()),
        &health,
    )?;
    health.ready();
    Ok((health, ops))
}

/// The signals and progress of a run, around `run`; its summary printed.
fn controlled(
    config: &Path,
    runner: &Runner,
    no_progress: bool,
    run: impl FnOnce() -> Result<weir::run::RunResult, u8>,
) -> Result<u8, Stopped> {
    control_by_signals(runner).map_err(Stopped::Error)?;
    let progress = Progress::start(runner, no_progress);
    let result = run();
    progress.finish();
    Ok(match result {
        Ok(result) => {
            print_summary(&result, config, runner.config());
            result.status().exit_code()
        }
        Err(code) => code,
    })
}

/// How `weir run` runs.
pub(super) struct RunOptions<'a> {
    pub(super) mode: Mode,
    pub(super) full: bool,
    pub(super) allow_deletes: bool,
    pub(super) rebuild: bool,
    pub(super) no_progress: bool,
    pub(super) resume: Option<&'a str>,
    pub(super) watch: bool,
    /// `--every`: run again on this schedule until stopped.
    pub(super) every: Option<&'a weir::core::schedule::Schedule>,
}

/// `weir run`.
pub(super) fn run(
    path: &Path,
    options: RunOptions<'_>,
    metrics_addr: Option<&str>,
) -> anyhow::Result<u8> {
    let RunOptions {
        mode,
        full,
        allow_deletes,
        rebuild,
        no_progress,
        resume,
        watch,
        every,
    } = options;
    let prepared = match resume {
        None if rebuild => rebuild::prepare_rebuild(path, mode),
        None => prepare_validated(path, mode),
        Some(_) if mode != Mode::Kafka => {
            eprintln!("error: --resume resumes a Kafka-mode run: add --mode kafka");
            return Ok(EXIT_INVALID_CONFIG);
        }
        Some(id) if !weir::run::is_run_id(id) => {
            eprintln!(
                "error: --resume {id:?} is not a run id (1 to 64 letters, digits, `-` and `_`)"
            );
            return Ok(EXIT_INVALID_CONFIG);
        }
        Some(_) => {
            draft_with(path, topology::resuming_runner).and_then(|draft| validated(path, draft))
        }
    };
    let run_id = resume.map_or_else(new_run_id, str::to_owned);
    stopped(prepared.and_then(|(runner, plugins)| {
        if let Some(error) = runner.config().needs_a_source() {
            report_invalid(path, &weir::config::Problems::one(error));
            return Err(Stopped::Invalid);
        }
        let runner = runner
            .with_full_sync(full)
            .with_allow_deletes(allow_deletes);
        let once = |run_id: &str| {
            controlled(path, &runner, no_progress, || {
                super::reload::reloading(&runner, path, watch, || {
                    runner.run_validated(&plugins, run_id)
                })
                .map_err(|e| {
                    eprintln!("error: {e:#}");
                    RunStatus::Failure.exit_code()
                })
            })
        };
        if every.is_some()
            && let Some(why) = weir::config::unschedulable(&runner.config().connectors)
        {
            eprintln!("error: --every: {why}");
            return Ok(super::EXIT_INVALID_CONFIG);
        }
        let _ops = ops_of(&runner, metrics_addr)?;
        // The config's own [schedule], unless --every says otherwise.
        let configured = every
            .is_none()
            .then(|| runner.config().schedule.as_ref()?.schedule().ok())
            .flatten();
        match every.or(configured.as_ref()) {
            None => once(&run_id),
            Some(schedule) => super::every::repeat(schedule, &runner.interrupter(), || {
                runner.stats().reset();
                once(&new_run_id())
            }),
        }
    }))
}

/// Where `weir replay` reads dead letters: a file, or a pipeline's fail topic.
pub(super) struct Letters {
    pub(super) file: Option<PathBuf>,
    pub(super) fail_topic: Option<String>,
}

/// `weir replay`.
pub(super) fn replay(
    path: &Path,
    from: Letters,
    pipeline: Option<&str>,
    no_progress: bool,
    metrics_addr: Option<&str>,
) -> anyhow::Result<u8> {
    let runner = match prepare(path, Mode::Local) {
        Ok(runner) => runner,
        Err(e) => return stopped(Err(e)),
    };
    let (letters, source) = match (&from.file, &from.fail_topic) {
        (Some(file), _) => (
            weir::run::read_dead_letters(file).map_err(anyhow::Error::msg)?,
            file.display().to_string(),
        ),
        (None, Some(failed_in)) => {
            let Some(kafka) = runner.config().kafka.clone() else {
                eprintln!("error: --fail-topic needs a [kafka] section in the config");
                return Ok(EXIT_INVALID_CONFIG);
            };
            let topics = KafkaTopics::new(kafka, failed_in);
            let (letters, skipped) = weir::messenger::kafka::read_fail_topic(&topics, failed_in)?;
            if skipped > 0 {
                eprintln!(
                    "{skipped} messages on {} are not documents: not replayed",
                    topics.fail()
                );
            }
            (letters, topics.fail())
        }
        (None, None) => unreachable!("clap requires a file or --fail-topic"),
    };
    let plugins = match runner.validate() {
        Ok(plugins) => plugins,
        Err(errors) => return Ok(report_invalid(path, &errors)),
    };
    eprintln!(
        "replaying {} dead letter{} from {source}",
        letters.len(),
        if letters.len() == 1 { "" } else { "s" },
    );
    stopped(run_with_controls(
        path,
        &runner,
        metrics_addr,
        no_progress,
        || {
            runner
                .replay(&plugins, &new_run_id(), letters, pipeline)
                .map_err(|e| {
                    eprintln!("error: {e}");
                    EXIT_INVALID_CONFIG
                })
        },
    ))
}

/// `weir worker` / `weir indexer` / `weir hybrid`: serve one
/// pipeline until SIGINT or SIGTERM.
pub(super) fn serve(
    path: &Path,
    pipeline: Option<String>,
    role: Role,
    metrics_addr: Option<&str>,
    watch: bool,
) -> anyhow::Result<u8> {
    let (runner, plugins) = match prepare_validated(path, Mode::Kafka) {
        Ok(prepared) => prepared,
        Err(e) => return stopped(Err(e)),
    };
    let pipeline = serving::pipeline_to_serve(runner.config(), pipeline)?;
    let health = Health::default();
    let _ops = topology::ops_server_for(
        &runner,
        metrics_addr.or(runner.config().metrics.addr.as_deref()),
        &health,
    )?;
    let span = tracing::info_span!("serve", pipeline = %pipeline, tenant = tracing::field::Empty);
    if let Some(tenant) = runner.config().tenant_of(&pipeline) {
        span.record("tenant", tenant);
    }
    let _entered = span.enter();
    let shutdown = Shutdown::default();
    let handler = shutdown.clone();
    let stopping = health.clone();
    on_signal(move || {
        stopping.stopping();
        handler.trigger();
    })?;
    on_pause_signals(runner.pauser())?;
    let served = super::reload::reloading(&runner, path, watch, || {
        serving::serve(&runner, &plugins, &pipeline, role, &shutdown, &health)
    })??;
    match served {
        Ok(()) => {
            tracing::info!("stopped");
            Ok(0)
        }
        Err(reason) => {
            eprintln!("error: {reason}");
            Ok(RunStatus::Failure.exit_code())
        }
    }
}

/// `weir serve`: the control plane until SIGINT or SIGTERM.
pub(super) fn control_plane(
    path: &Path,
    metrics_addr: Option<&str>,
    log_format: &str,
    watch: bool,
) -> anyhow::Result<u8> {
    use weir::control::isolate::{Isolation, RunProcess};
    use weir::control::operator::RunIsolation;
    let operator = weir::control::operator::OperatorConfig::load(path)?;
    let addr = metrics_addr.unwrap_or(&operator.server.addr).to_owned();
    let isolation = match operator.server.isolation {
        RunIsolation::Thread => Isolation::Thread,
        // Each run in a process of this very binary, logging as it does.
        RunIsolation::Process => Isolation::Process(RunProcess {
            program: std::env::current_exe()?,
            args: vec!["--log-format".into(), log_format.into()],
            memory_mib: Some(operator.server.run_memory_mib),
        }),
    };
    let limits = operator.server.http_limits();
    // From the start: a standby stopped while it waits to lead exits cleanly.
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    on_signal(move || {
        let _ = stop.send(());
    })?;
    let _leading = match &operator.fleet {
        Some(fleet) => match lead(fleet, &addr, &stopped)? {
            Some(leading) => Some(leading),
            None => {
                tracing::info!("stopped while standing by");
                return Ok(0);
            }
        },
        None => None,
    };
    let plane = weir::control::ControlPlane::new(operator, isolation)?;
    let health = Health::default();
    let routes = weir::control::server_routes(Arc::clone(&plane), &health)?;
    let server = weir::http::HttpServer::start_with(&addr, routes, limits)?;
    health.ready();
    tracing::info!(addr = %server.addr(), "weir serve: status page on http://{}/ and the API under /api", server.addr());
    super::reload::on_change(
        "every live run's plugins",
        || plane.plugin_files(),
        || plane.reload_all(),
        watch,
        || stopped.recv(),
    )?
    .ok();
    health.stopping();
    tracing::info!("stopping: the runs going on are stopped");
    plane.shut_down();
    drop(server);
    Ok(0)
}

/// Wait until this control plane leads its fleet (the one member of the
/// control group owning its partition), answering `/healthz` (and `/readyz`
/// not ready) on `addr` meanwhile; then keep the membership alive. Losing
/// it later ends the process (a supervisor starts it again as a standby).
/// `None` when `stopped` says to stop first.
fn lead(
    fleet: &weir::fleet::FleetConfig,
    addr: &str,
    stopped: &std::sync::mpsc::Receiver<()>,
) -> anyhow::Result<Option<std::thread::JoinHandle<()>>> {
    use std::sync::atomic::Ordering;
    use weir::messenger::kafka::table::Leadership;
    let (leadership, leads) = Leadership::join(
        &fleet.kafka,
        &fleet.control_topic(),
        &format!("{}-control", fleet.name),
        fleet.session_timeout,
    )
    .map_err(|e| anyhow::anyhow!("cannot join the fleet's control group: {e}"))?;
    let standby = {
        let health = Health::default();
        let server = topology::ops_server(Some(addr), &health)?;
        tracing::info!("standby: waiting to lead the fleet (another control plane leads)");
        server
    };
    while !leads.load(Ordering::SeqCst) {
        if stopped.try_recv().is_ok() {
            leadership.resign();
            return Ok(None);
        }
        leadership.poll(Duration::from_millis(100));
    }
    drop(standby);
    tracing::info!("this control plane leads the fleet now");
    Ok(Some(
        std::thread::Builder::new()
            .name("weir-leadership".into())
            .spawn(move || {
                loop {
                    leadership.poll(Duration::from_millis(100));
                }
            })?,
    ))
}

/// `weir fleet`: a fleet worker until SIGINT or SIGTERM.
pub(super) fn fleet(
    path: &Path,
    metrics_addr: Option<&str>,
    log_format: &str,
) -> anyhow::Result<u8> {
    use std::sync::atomic::{AtomicBool, Ordering};
    use weir::control::isolate::RunProcess;
    let operator = weir::control::operator::OperatorConfig::load(path)?;
    let health = Health::default();
    let _ops = topology::ops_server(metrics_addr, &health)?;
    let stop = Arc::new(AtomicBool::new(false));
    let stopping = Arc::clone(&stop);
    let signalled = health.clone();
    on_signal(move || {
        signalled.stopping();
        stopping.store(true, Ordering::Relaxed);
    })?;
    let process = RunProcess {
        program: std::env::current_exe()?,
        args: vec!["--log-format".into(), log_format.into()],
        memory_mib: Some(operator.server.run_memory_mib),
    };
    let ready = health.clone();
    weir::fleet::worker::serve_fleet(operator, process, stop, move || ready.ready())?;
    Ok(0)
}
