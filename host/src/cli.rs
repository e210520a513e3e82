//! The `weir` command line: `weir run`, `validate`, `test`, `new` and the
//! Kafka-mode serving processes.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::config::{Config, ConfigError, ConfigErrors, KafkaConfig};
use crate::messenger::kafka::{
    HeartbeatSender, KafkaIndexerMessenger, KafkaMessengers, KafkaTopics, KafkaWorkerMessenger,
};
use crate::messenger::{IndexerMessenger, LocalMessengers, ServerRole, WorkerMessenger};
use crate::run::{RunResult, RunStatus, Runner, Shutdown, new_run_id};
use anyhow::Context;
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Exit code when the configuration is invalid (clap also uses 2 for usage errors).
const EXIT_INVALID_CONFIG: u8 = 2;

/// `weir test`: the plugin could not be loaded, started or called (a fatal error).
const EXIT_PLUGIN_FAILED: u8 = 4;

/// Parse `args` (program name first) and run the command; returns the exit code.
pub fn run(args: impl IntoIterator<Item = OsString>) -> u8 {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return u8::try_from(e.exit_code()).unwrap_or(EXIT_INVALID_CONFIG);
        }
    };
    init_logging(cli.log_format);
    match execute(cli.command, cli.metrics_addr.as_deref()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            RunStatus::Failure.exit_code()
        }
    }
}

#[derive(Parser)]
#[command(
    name = "weir",
    version,
    about = "Moves documents from sources into search engines through sandboxed WebAssembly plugins."
)]
#[command(
    after_help = "Exit codes: 0 success, 1 run failed (or stalled), 2 invalid config or usage, 3 partial success (some documents failed), 130 interrupted.\nSIGINT/SIGTERM: `weir run` stops its connector and waits up to runner.grace_period for documents in flight, then prints its summary; a second signal stops at once. Serving processes finish the document at hand and commit what is complete.\nSIGUSR1 pauses `weir run` (connectors wait to publish, workers stop taking documents, what is in flight finishes, the stall clock stops) and a serving worker; SIGUSR2 resumes.\nLogs go to stderr; set RUST_LOG (e.g. RUST_LOG=weir=debug) to change what is logged."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log lines as text, or as JSON objects (one per line, with the run
    /// id, pipeline and tenant of the spans they were logged in).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "WEIR_LOG_FORMAT")]
    log_format: LogFormat,
    /// Serve /metrics (Prometheus text format), /healthz and /readyz on this
    /// `host:port` (port 0: any free port, logged). Overrides `[metrics] addr`.
    #[arg(
        long,
        global = true,
        value_name = "HOST:PORT",
        env = "WEIR_METRICS_ADDR"
    )]
    metrics_addr: Option<String>,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// Send log lines to stderr as `format` says, filtered by `RUST_LOG`. Does
/// nothing when the process already has a subscriber.
fn init_logging(format: LogFormat) {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,wasmtime=warn,cranelift=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(true)
            .try_init(),
    };
}

/// Where this process serves its metrics and health: `--metrics-addr`,
/// else `[metrics] addr`, else nowhere.
fn ops_server(
    flag: Option<&str>,
    config: &Config,
    health: &crate::telemetry::export::Health,
) -> anyhow::Result<Option<crate::http::HttpServer>> {
    let Some(addr) = flag.or(config.metrics.addr.as_deref()) else {
        return Ok(None);
    };
    let handle = crate::telemetry::export::recorder()?;
    let routes = crate::telemetry::export::routes(handle, health.clone());
    let server = crate::http::HttpServer::start(addr, routes)?;
    tracing::info!(addr = %server.addr(), "metrics on http://{}/metrics", server.addr());
    Ok(Some(server))
}

#[derive(Subcommand)]
enum Command {
    /// Validate a config, then run every connector in order.
    Run {
        /// The run configuration (TOML).
        config: PathBuf,
        /// local: connectors, workers and indexers in this process, no services.
        /// kafka: connectors and publisher only; `weir worker` and `weir indexer`
        /// processes do the rest through the Kafka cluster in `[kafka]`.
        #[arg(long, value_enum, default_value_t = Mode::Local)]
        mode: Mode,
        /// Do not draw a progress bar.
        #[arg(long)]
        no_progress: bool,
    },
    /// Send the documents of a dead-letter file through their pipelines again,
    /// as a new local run (the same stages and indexer, per the config).
    ///
    /// Documents that fail again go to the new run's dead-letter file.
    Replay {
        /// The run configuration (TOML).
        config: PathBuf,
        /// The dead-letter file a local run wrote (`[dead_letters] path`).
        #[arg(required_unless_present = "fail_topic")]
        dead_letters: Option<PathBuf>,
        /// Read the dead letters of this pipeline's Kafka fail topic
        /// (`<pipeline>_fail`, in `[kafka]`) instead of a file, as it is now;
        /// the topic is left as it is.
        #[arg(long, value_name = "PIPELINE", conflicts_with = "dead_letters")]
        fail_topic: Option<String>,
        /// Send every document through this pipeline instead of the one it
        /// failed in.
        #[arg(long)]
        pipeline: Option<String>,
        /// Do not draw a progress bar.
        #[arg(long)]
        no_progress: bool,
    },
    /// Kafka mode: process documents of a pipeline's source topic until stopped
    /// (SIGINT/SIGTERM), with `worker.threads` workers in the pipeline's consumer group.
    Worker {
        /// The run configuration (TOML), with a `[kafka]` section.
        config: PathBuf,
        /// The pipeline; may be left out when the config has only one.
        pipeline: Option<String>,
    },
    /// Kafka mode: index documents of a pipeline's destination topic until stopped.
    Indexer {
        /// The run configuration (TOML), with a `[kafka]` section.
        config: PathBuf,
        /// The pipeline; may be left out when the config has only one.
        pipeline: Option<String>,
    },
    /// Hybrid mode: `worker.threads` worker–indexer pairs for a pipeline, until stopped.
    ///
    /// Each pair's worker consumes the source topic (in the workers' group)
    /// and hands documents to its own indexer in memory; offsets are
    /// committed once the documents are indexed. Needs no `weir indexer`.
    WorkerIndexer {
        /// The run configuration (TOML), with a `[kafka]` section.
        config: PathBuf,
        /// The pipeline; may be left out when the config has only one.
        pipeline: Option<String>,
    },
    /// Run one plugin in the sandbox on documents and print what it did.
    ///
    /// A stage gets each document of --input and prints the documents it
    /// passes on (children first) and its CREATE, DROP and FAIL events; an
    /// indexer gets them in batches and prints FINISH or FAIL per document;
    /// a connector runs once and prints what it publishes. Output is JSON
    /// lines. With --expect, the output is compared with that file instead:
    /// exit 0 when they match, 1 with the differences when not; 2 when the
    /// plugin's config is invalid, 4 when the plugin cannot be loaded or
    /// fails fatally.
    Test {
        /// The plugin component (.wasm); its kind is read from its exports.
        plugin: PathBuf,
        /// Documents for a stage or an indexer: one JSON object with an `id` per line.
        #[arg(long)]
        input: Option<PathBuf>,
        /// The plugin's settings: JSON text, or a .json or .toml file.
        #[arg(long)]
        config: Option<String>,
        /// The expected output (JSON lines), compared line by line.
        #[arg(long)]
        expect: Option<PathBuf>,
        /// Let the plugin open a host directory: HOST:GUEST, or HOST:GUEST:rw
        /// to let it write there. Repeatable.
        #[arg(long = "dir", value_name = "HOST:GUEST[:rw]")]
        dirs: Vec<String>,
        /// Documents per indexer batch.
        #[arg(long, default_value_t = 100)]
        batch_size: usize,
    },
    /// Make a new plugin project that builds with one command (`./build.sh`)
    /// and passes `weir test` as generated (`./build.sh test`).
    New {
        /// The plugin kind.
        #[arg(value_enum)]
        kind: crate::scaffold::Kind,
        /// The plugin's name: lowercase letters, digits and `-`.
        name: String,
        /// The language.
        #[arg(long, value_enum, default_value_t = crate::scaffold::Lang::Rust)]
        lang: crate::scaffold::Lang,
        /// Where to create the project (default: ./<name>).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// The control plane: an HTTP API through which tenants submit runs,
    /// list them with live counts, pause, resume and stop them, and read
    /// their summaries and dead letters; a status page at `/`; `/metrics`,
    /// `/healthz` and `/readyz`. Runs until SIGINT/SIGTERM, which stops the
    /// runs going on (they end `interrupted`).
    Serve {
        /// The operator's config (TOML): `[server]` and `[[tenants]]`.
        config: PathBuf,
    },
    /// Check a config and every plugin's settings without running anything.
    Validate {
        /// The run configuration (TOML).
        config: PathBuf,
    },
}

/// Where a run's workers and indexers are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Mode {
    Local,
    Kafka,
}

fn execute(command: Command, metrics_addr: Option<&str>) -> anyhow::Result<u8> {
    match command {
        Command::Validate { config } => {
            let Some(runner) = prepare(&config)? else {
                return Ok(EXIT_INVALID_CONFIG);
            };
            match runner.validate() {
                Ok(_) => {
                    println!("{}: valid", config.display());
                    Ok(0)
                }
                Err(errors) => Ok(report_invalid(&config, &errors)),
            }
        }
        Command::Test {
            plugin,
            input,
            config,
            expect,
            dirs,
            batch_size,
        } => test_plugin(plugin, input, config, expect, &dirs, batch_size),
        Command::New {
            kind,
            name,
            lang,
            dir,
        } => {
            let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
            let files = crate::scaffold::create(kind, lang, &name, &dir)?;
            println!(
                "created {} ({} files): cd {} && ./build.sh test",
                dir.display(),
                files.len(),
                dir.display()
            );
            Ok(0)
        }
        Command::Serve { config } => control_plane(&config, metrics_addr),
        Command::Worker { config, pipeline } => {
            serve(&config, pipeline, Role::Worker, metrics_addr)
        }
        Command::Indexer { config, pipeline } => {
            serve(&config, pipeline, Role::Indexer, metrics_addr)
        }
        Command::WorkerIndexer { config, pipeline } => {
            serve(&config, pipeline, Role::Pairs, metrics_addr)
        }
        Command::Run {
            config,
            mode,
            no_progress,
        } => {
            let runner = match mode {
                Mode::Local => prepare(&config)?,
                Mode::Kafka => prepare_kafka(&config)?.map(|(runner, _)| runner),
            };
            let Some(runner) = runner else {
                return Ok(EXIT_INVALID_CONFIG);
            };
            let plugins = match runner.validate() {
                Ok(plugins) => plugins,
                Err(errors) => return Ok(report_invalid(&config, &errors)),
            };
            let health = crate::telemetry::export::Health::default();
            let _ops = ops_server(metrics_addr, runner.config(), &health)?;
            health.ready();
            control_by_signals(&runner)?;
            let progress = Progress::start(&runner, no_progress);
            let result = runner.run_validated(&plugins, &new_run_id());
            progress.finish();
            print_summary(&result);
            Ok(result.status().exit_code())
        }
        Command::Replay {
            config,
            dead_letters,
            fail_topic,
            pipeline,
            no_progress,
        } => {
            let Some(runner) = prepare(&config)? else {
                return Ok(EXIT_INVALID_CONFIG);
            };
            let (letters, source) = match (&dead_letters, &fail_topic) {
                (Some(file), _) => (
                    crate::run::read_dead_letters(file).map_err(anyhow::Error::msg)?,
                    file.display().to_string(),
                ),
                (None, Some(failed_in)) => {
                    let Some(kafka) = runner.config().kafka.clone() else {
                        eprintln!("error: --fail-topic needs a [kafka] section in the config");
                        return Ok(EXIT_INVALID_CONFIG);
                    };
                    let topics = KafkaTopics::new(kafka, failed_in);
                    let (letters, skipped) =
                        crate::messenger::kafka::read_fail_topic(&topics, failed_in)?;
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
                Err(errors) => return Ok(report_invalid(&config, &errors)),
            };
            eprintln!(
                "replaying {} dead letter{} from {source}",
                letters.len(),
                if letters.len() == 1 { "" } else { "s" },
            );
            let health = crate::telemetry::export::Health::default();
            let _ops = ops_server(metrics_addr, runner.config(), &health)?;
            health.ready();
            control_by_signals(&runner)?;
            let progress = Progress::start(&runner, no_progress);
            let result = runner.replay(&plugins, &new_run_id(), letters, pipeline.as_deref());
            progress.finish();
            let result = match result {
                Ok(result) => result,
                Err(e) => {
                    eprintln!("error: {e}");
                    return Ok(EXIT_INVALID_CONFIG);
                }
            };
            print_summary(&result);
            Ok(result.status().exit_code())
        }
    }
}

/// `weir test`: run one plugin on documents; print or compare the transcript.
fn test_plugin(
    plugin: PathBuf,
    input: Option<PathBuf>,
    config: Option<String>,
    expect: Option<PathBuf>,
    dirs: &[String],
    batch_size: usize,
) -> anyhow::Result<u8> {
    use crate::testing::{PluginTest, TestError, read_documents, read_jsonl};
    let mut test = PluginTest::new(&plugin)?.batch_size(batch_size);
    if let Some(config) = config {
        test = test.config(plugin_settings(&config)?);
    }
    for dir in dirs {
        let (host, rest) = dir
            .split_once(':')
            .with_context(|| format!("--dir {dir}: expected HOST:GUEST or HOST:GUEST:rw"))?;
        let (guest, writable) = match rest.strip_suffix(":rw") {
            Some(guest) => (guest, true),
            None => (rest, false),
        };
        test = test.grant_dir(host, guest, writable);
    }
    let kind = test.kind()?;
    let docs = match (&input, kind) {
        (Some(path), "stage" | "indexer") => read_documents(path)?,
        (None, "stage" | "indexer") => {
            anyhow::bail!("a {kind} needs documents: pass --input docs.jsonl")
        }
        (Some(_), _) => anyhow::bail!("a connector reads its own source: leave out --input"),
        (None, _) => Vec::new(),
    };
    let transcript = match test.run(docs) {
        Ok(transcript) => transcript,
        Err(e @ TestError::Config { .. }) => {
            eprintln!("{}: {e}", plugin.display());
            return Ok(EXIT_INVALID_CONFIG);
        }
        Err(e) => {
            eprintln!("{}: the plugin could not run: {e}", plugin.display());
            return Ok(EXIT_PLUGIN_FAILED);
        }
    };
    let Some(expect) = expect else {
        print!("{}", transcript.to_jsonl());
        return Ok(0);
    };
    match transcript.expect(&read_jsonl(&expect)?) {
        Ok(()) => {
            eprintln!("{}: output matches {}", plugin.display(), expect.display());
            Ok(0)
        }
        Err(mismatch) => {
            eprintln!(
                "{}: output differs from {}:\n{mismatch}",
                plugin.display(),
                expect.display()
            );
            Ok(RunStatus::Failure.exit_code())
        }
    }
}

/// A plugin's settings from `--config`: JSON text, or a JSON or TOML file.
fn plugin_settings(config: &str) -> anyhow::Result<serde_json::Value> {
    let trimmed = config.trim_start();
    if trimmed.starts_with('{') {
        return serde_json::from_str(config).context("--config is not valid JSON");
    }
    let path = Path::new(config);
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read --config {config}"))?;
    if path.extension().is_some_and(|e| e == "toml") {
        let table: toml::Table =
            toml::from_str(&text).with_context(|| format!("{config} is not valid TOML"))?;
        return serde_json::to_value(table).context("TOML settings as JSON");
    }
    serde_json::from_str(&text).with_context(|| format!("{config} is not valid JSON"))
}

/// What SIGINT and SIGTERM do from now on in this process. The handler is
/// installed once; each command (a process may run several, e.g. in tests)
/// sets what it stops.
fn on_signal(action: impl Fn() + Send + 'static) -> anyhow::Result<()> {
    type Action = Box<dyn Fn() + Send>;
    static ACTION: std::sync::Mutex<Option<Action>> = std::sync::Mutex::new(None);
    static INSTALLED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    let lock = || {
        ACTION
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    };
    *lock() = Some(Box::new(action));
    INSTALLED
        .get_or_init(|| {
            ctrlc::set_handler(move || {
                if let Some(action) = &*lock() {
                    action();
                }
            })
            .map_err(|e| e.to_string())
        })
        .clone()
        .map_err(|e| anyhow::anyhow!("cannot install the signal handler: {e}"))
}

/// What signals do to a run of `runner`: SIGINT/SIGTERM interrupt it (a
/// second one exits at once), SIGUSR1 pauses it and SIGUSR2 resumes it.
fn control_by_signals(runner: &Runner) -> anyhow::Result<()> {
    let interrupt = runner.interrupter();
    on_signal(move || {
        if !interrupt.trigger() {
            eprintln!("interrupted again: stopping at once");
            std::process::exit(i32::from(RunStatus::Interrupted.exit_code()));
        }
    })?;
    on_pause_signals(runner.pauser())
}

/// SIGUSR1 pauses `pause`, SIGUSR2 resumes it, from now on in this process.
fn on_pause_signals(pause: crate::run::Pause) -> anyhow::Result<()> {
    use signal_hook::consts::{SIGUSR1, SIGUSR2};
    let mut signals = signal_hook::iterator::Signals::new([SIGUSR1, SIGUSR2])
        .map_err(|e| anyhow::anyhow!("cannot install the pause signal handler: {e}"))?;
    std::thread::Builder::new()
        .name("weir-pause-signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                if signal == SIGUSR1 {
                    pause.pause();
                } else {
                    pause.resume();
                }
            }
        })?;
    Ok(())
}

/// Load the config and build a runner; `None` when the config file itself is invalid.
fn prepare(path: &Path) -> anyhow::Result<Option<Runner>> {
    let config = match Config::load(path) {
        Ok(config) => config,
        Err(errors) => {
            report_invalid(path, &errors);
            return Ok(None);
        }
    };
    let runtime = crate::run::runtime_for(&config)?;
    let messengers = Arc::new(LocalMessengers {
        capacity: config.publisher.queue_capacity,
        max_bytes: config.publisher.queue_max_bytes(),
    });
    Ok(Some(Runner::new(config, runtime, messengers)))
}

/// A runner whose connectors publish to Kafka, and the `[kafka]` settings.
fn prepare_kafka(path: &Path) -> anyhow::Result<Option<(Runner, KafkaConfig)>> {
    let config = match Config::load(path) {
        Ok(config) => config,
        Err(errors) => {
            report_invalid(path, &errors);
            return Ok(None);
        }
    };
    let Some(kafka) = config.kafka.clone() else {
        let missing = ConfigErrors::one(ConfigError::new(
            "kafka",
            "Kafka mode needs a [kafka] section (bootstrap_servers, ...)",
        ));
        report_invalid(path, &missing);
        return Ok(None);
    };
    let runtime = crate::run::runtime_for(&config)?;
    let messengers = Arc::new(KafkaMessengers::new(kafka.clone()));
    Ok(Some((Runner::new(config, runtime, messengers), kafka)))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Worker,
    Indexer,
    Pairs,
}

/// `weir worker` / `weir indexer` / `weir worker-indexer`: serve one
/// pipeline until SIGINT or SIGTERM.
fn serve(
    path: &Path,
    pipeline: Option<String>,
    role: Role,
    metrics_addr: Option<&str>,
) -> anyhow::Result<u8> {
    let Some((runner, kafka)) = prepare_kafka(path)? else {
        return Ok(EXIT_INVALID_CONFIG);
    };
    let plugins = match runner.validate() {
        Ok(plugins) => plugins,
        Err(errors) => return Ok(report_invalid(path, &errors)),
    };
    let pipelines: Vec<&str> = runner
        .config()
        .pipelines
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    let pipeline = match (pipeline, pipelines.as_slice()) {
        (Some(p), _) if pipelines.contains(&p.as_str()) => p,
        (Some(p), _) => anyhow::bail!(
            "no pipeline is named `{p}` (the config has: {})",
            pipelines.join(", ")
        ),
        (None, [only]) => (*only).to_owned(),
        (None, _) => anyhow::bail!(
            "name the pipeline to serve: one of {}",
            pipelines.join(", ")
        ),
    };
    let health = crate::telemetry::export::Health::default();
    let _ops = ops_server(metrics_addr, runner.config(), &health)?;
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
    let mut topics = KafkaTopics::new(kafka, &pipeline);
    // A process may start before the cluster is reachable: it then waits
    // for it (consumers retry), and topics the broker has not got are made
    // by whoever comes later (or auto-created).
    if let Err(e) = topics.ensure_pipeline_topics() {
        tracing::warn!(error = %e, "cannot create the pipeline's topics now; going on");
    }
    topics.read_broker_limit(|| !shutdown.is_triggered());
    let server_role = match role {
        Role::Worker => ServerRole::Worker,
        Role::Indexer => ServerRole::Indexer,
        Role::Pairs => ServerRole::WorkerIndexer,
    };
    let stats = runner.stats();
    let _heartbeats = HeartbeatSender::start(&topics, server_role, move || {
        let s = stats.snapshot();
        (s.processed, s.indexed)
    })
    .context("cannot start heartbeats")?;
    let threads = runner.config().worker.threads;
    if role != Role::Indexer {
        warn_about_partitions(&topics.source(), &topics, threads, "worker threads");
    }
    health.ready();
    let result = match role {
        Role::Worker => {
            let messengers = KafkaWorkerMessenger::for_threads(&topics, threads)
                .context("cannot connect to Kafka")?
                .into_iter()
                .map(|m| Box::new(m) as Box<dyn WorkerMessenger>)
                .collect();
            tracing::info!(pipeline = %pipeline, threads, topic = %topics.source(), "worker serving");
            runner.serve_workers(&plugins, &pipeline, messengers, &shutdown)
        }
        Role::Pairs => {
            // Two batches of room per pair keep its indexer busy without
            // holding much processed-but-unindexed work.
            let capacity = 2 * runner
                .config()
                .indexer_for(&pipeline)
                .map_or(1, |(_, i)| i.batch_size);
            if let Some((location, indexer)) = runner.config().indexer_for(&pipeline)
                && indexer.instances > 1
            {
                tracing::warn!(
                    "{location}.instances = {} is not used by worker-indexer pairs: each of the {threads} pairs (worker.threads) has one indexer instance",
                    indexer.instances
                );
            }
            let pairs = KafkaWorkerMessenger::for_pairs(&topics, threads, capacity)
                .context("cannot connect to Kafka")?
                .into_iter()
                .map(|(w, i)| {
                    (
                        Box::new(w) as Box<dyn WorkerMessenger>,
                        Box::new(i) as Box<dyn IndexerMessenger>,
                    )
                })
                .collect();
            tracing::info!(pipeline = %pipeline, pairs = threads, topic = %topics.source(), "worker-indexer pairs serving");
            runner.serve_pairs(&plugins, &pipeline, pairs, &shutdown)
        }
        Role::Indexer => {
            // `indexer.instances` consumers of the destination topic, each
            // with an indexer instance of its own.
            let instances = runner
                .config()
                .indexer_for(&pipeline)
                .map_or(1, |(_, i)| i.instances);
            if instances > 1 {
                warn_about_partitions(&topics.dest(), &topics, instances, "indexer instances");
            }
            let messengers = (0..instances)
                .map(|_| {
                    KafkaIndexerMessenger::new(topics.clone())
                        .map(|m| Box::new(m) as Box<dyn IndexerMessenger>)
                })
                .collect::<Result<Vec<_>, _>>()
                .context("cannot connect to Kafka")?;
            tracing::info!(pipeline = %pipeline, instances, topic = %topics.dest(), "indexer serving");
            runner.serve_indexers(&plugins, &pipeline, messengers, &shutdown)
        }
    };
    match result {
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

/// Warn when `topic` has too few partitions to keep `consumers` (`what`) busy.
fn warn_about_partitions(topic: &str, topics: &KafkaTopics, consumers: usize, what: &str) {
    match topics.partitions(topic) {
        Ok(Some(n)) if n < consumers => tracing::warn!(
            topic,
            partitions = n,
            consumers,
            "the topic has fewer partitions than {what}: {} will sit idle",
            consumers - n
        ),
        Ok(None) => tracing::warn!(
            topic,
            "the topic does not exist yet; if the broker creates it, it gets the broker's default partition count"
        ),
        Ok(Some(_)) => {}
        Err(e) => tracing::warn!(topic, error = %e, "cannot read the topic's partitions"),
    }
}

/// `weir serve`: the control plane until SIGINT or SIGTERM.
fn control_plane(path: &Path, metrics_addr: Option<&str>) -> anyhow::Result<u8> {
    let operator = crate::control::operator::OperatorConfig::load(path)?;
    let addr = metrics_addr.unwrap_or(&operator.server.addr).to_owned();
    let plane = crate::control::ControlPlane::new(operator)?;
    let health = crate::telemetry::export::Health::default();
    let routes = crate::control::routes(Arc::clone(&plane)).merge(
        crate::telemetry::export::routes(crate::telemetry::export::recorder()?, health.clone()),
    );
    let server = crate::http::HttpServer::start(&addr, routes)?;
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    on_signal(move || {
        let _ = stop.send(());
    })?;
    health.ready();
    tracing::info!(addr = %server.addr(), "weir serve: status page on http://{}/ and the API under /api", server.addr());
    let _ = stopped.recv();
    health.stopping();
    tracing::info!("stopping: the runs going on are stopped");
    plane.shut_down();
    drop(server);
    Ok(0)
}

fn report_invalid(path: &Path, errors: &ConfigErrors) -> u8 {
    eprint!("{}: {errors}", path.display());
    EXIT_INVALID_CONFIG
}

/// A progress bar fed from the runner's live counts.
struct Progress {
    bar: ProgressBar,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    fn start(runner: &Runner, hidden: bool) -> Self {
        let bar = ProgressBar::with_draw_target(
            None,
            if hidden {
                ProgressDrawTarget::hidden()
            } else {
                ProgressDrawTarget::stderr()
            },
        );
        bar.set_style(
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        let stop = Arc::new(AtomicBool::new(false));
        let stats = runner.stats();
        let (bar2, stop2) = (bar.clone(), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                let s = stats.snapshot();
                bar2.set_message(format!(
                    "published {} | processed {} | indexed {} | failed {} | dropped {}",
                    s.published, s.processed, s.indexed, s.failed, s.dropped
                ));
                bar2.tick();
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        Self {
            bar,
            stop,
            thread: Some(thread),
        }
    }

    fn finish(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.bar.finish_and_clear();
    }
}

fn print_summary(result: &RunResult) {
    println!();
    println!(
        "Run {}: {:?} in {:.2?}",
        result.run_id,
        result.status(),
        result.elapsed
    );
    println!(
        "{:<20} {:<16} {:>10} {:>9} {:>10} {:>8} {:>8} {:>10} {:>10}  outcome",
        "connector",
        "pipeline",
        "published",
        "children",
        "succeeded",
        "failed",
        "dropped",
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
            "{:<20} {:<16} {:>10} {:>9} {:>10} {:>8} {:>8} {:>10} {:>10.2?}  {}",
            c.name,
            c.pipeline,
            c.published,
            c.created,
            c.succeeded,
            c.failed,
            c.dropped,
            c.duplicates,
            c.elapsed,
            outcome
        );
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
            "{:<20} {:<16} {:>10} {:>9} {:>8} {:>8} {:>12} {:>10}",
            "stage", "pipeline", "documents", "children", "failed", "retries", "mean/doc", "time"
        );
        for s in &result.stages {
            println!(
                "{:<20} {:<16} {:>10} {:>9} {:>8} {:>8} {:>12.2?} {:>10.2?}",
                s.stage,
                s.pipeline,
                s.documents,
                s.children,
                s.failed,
                s.retries,
                mean(s.time, s.documents),
                s.time
            );
        }
    }
    if cpu.indexed > 0 {
        println!(
            "{:<20} {:<16} {:>10} {:>9} {:>8} {:>8} {:>12.2?} {:>10.2?}",
            "(indexer batches)",
            "",
            cpu.indexed,
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
