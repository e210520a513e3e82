//! The `weir` command line: `weir run`, `validate`, `test`, `new`, `replay`,
//! the Kafka-mode serving processes and `weir serve`. This is the binary's
//! own code: it parses arguments, sets up logging and signals, prints, and
//! picks exit codes; what runs is wired by `weir::topology`.

mod backends;
mod commands;
mod every;
mod log_fields;
mod plugin_test;
mod prepare;
mod progress;
mod reload;
mod scaffold;
mod signals;
mod state;
mod summary;
mod tap;
mod trace;

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Parser, Subcommand};
use weir::run::RunStatus;

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
    if cli.command.prints_and_ends() {
        signals::end_quietly_on_a_closed_pipe();
    }
    init_logging(cli.log_format);
    match execute(cli.command, cli.metrics_addr.as_deref(), cli.log_format) {
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
    after_help = "Exit codes: 0 success, 1 run failed (or stalled), 2 invalid config or usage, 3 partial success (some documents failed), 130 interrupted.\nSIGINT/SIGTERM: `weir run` stops its connector and waits up to runner.grace_period for documents in flight, then prints its summary; a second signal stops at once. Serving processes finish the document at hand and commit what is complete.\nSIGUSR1 pauses `weir run` (connectors wait to publish, workers stop taking documents, what is in flight finishes, the stall clock stops) and a serving worker; SIGUSR2 resumes.\nSIGHUP reloads the config of `weir run`, `weir worker` and `weir hybrid` (pipelines' stages: new documents run on the new stages, those in flight finish on the old; an invalid change is refused with every problem, and the old config goes on).\nLogs go to stderr; set RUST_LOG (e.g. RUST_LOG=weir=debug) to change what is logged."
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

impl LogFormat {
    /// The `--log-format` value that names it, for the processes a server starts.
    fn name(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Json => "json",
        }
    }
}

/// Send log lines to stderr as `format` says, filtered by `RUST_LOG`. Does
/// nothing when the process already has a subscriber.
fn init_logging(format: LogFormat) {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,wasmtime=warn,cranelift=warn"));
    // A line that cannot be written (stderr a closed pipe: a run process
    // whose server is gone) is dropped: the default reports it with
    // `eprintln!`, which panics the thread that logged.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .log_internal_errors(false);
    let _ = match format {
        LogFormat::Text => builder
            .fmt_fields(log_fields::escaped())
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
        /// A full sync: connectors that keep state (incremental sync) send
        /// every item again, and still delete what is gone since the last run.
        #[arg(long)]
        full: bool,
        /// Let syncing connectors delete more than `[state] max_delete_share`
        /// of what their state knew (the mass-delete guard refuses such a
        /// run otherwise): for a source that really lost that much.
        #[arg(long)]
        allow_deletes: bool,
        /// With `--full`: write a new index and swap it in (an alias) only
        /// when the full sync is complete, so searches answer from the old
        /// index until then; an interrupted rebuild leaves it untouched.
        /// Indexers that support it: opensearch-indexer (docs/sync.md).
        #[arg(long, requires = "full")]
        rebuild: bool,
        /// Do not draw a progress bar.
        #[arg(long)]
        no_progress: bool,
        /// Kafka mode: resume the run with this id, whose runner stopped
        /// before the run ended (killed, or its machine lost). What it
        /// published is not sent again; the run's events are counted from
        /// its start, so the summary is the whole run's.
        #[arg(long, value_name = "RUN_ID")]
        resume: Option<String>,
        /// Reload the config when it or a stage plugin changes on disk (as
        /// SIGHUP does): new documents run on the new stages, those in
        /// flight finish on the old; a change that is invalid, or that
        /// touches more than pipelines' stages, is refused and logged.
        #[arg(long)]
        watch: bool,
        /// Run again on a schedule until SIGINT/SIGTERM: an interval (`30s`,
        /// `15m`, `1h`) or a cron expression (`"0 3 * * *"`, 5 fields, or 6
        /// with seconds first). The first run starts at once; runs never
        /// overlap (starts missed while a run goes on are skipped, and
        /// logged). A signal during a run lets it drain and commit, then
        /// ends; one while waiting ends at once, with the last run's exit code.
        #[arg(long, value_name = "SCHEDULE", conflicts_with_all = ["resume", "rebuild"])]
        every: Option<String>,
        /// With a cron `--every`: the IANA time zone it runs in (default UTC).
        #[arg(long, value_name = "ZONE", requires = "every")]
        time_zone: Option<String>,
        /// With `--every`: delay each start by a random time up to this
        /// (`30s`, `5m`; shorter than the interval).
        #[arg(long, value_name = "DURATION", requires = "every")]
        jitter: Option<String>,
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
        /// Reload the config when it or a stage plugin changes (as SIGHUP does).
        #[arg(long)]
        watch: bool,
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
    /// `weir worker-indexer`, its older name, still works.
    #[command(visible_alias = "worker-indexer")]
    Hybrid {
        /// The run configuration (TOML), with a `[kafka]` section.
        config: PathBuf,
        /// The pipeline; may be left out when the config has only one.
        pipeline: Option<String>,
        /// Reload the config when it or a stage plugin changes (as SIGHUP does).
        #[arg(long)]
        watch: bool,
    },
    /// Run one plugin in the sandbox on documents and print what it did;
    /// or, given a run config (.toml), run its pipeline tests.
    ///
    /// `weir test run.toml [--cases run.cases.toml]` runs each case of the
    /// cases file through its pipeline's stages (nothing is indexed) and
    /// compares what came out with what the case expects: exit 0 when every
    /// case passes, 1 with each difference when one does not, 2 when the
    /// config or the cases file is invalid.
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
        /// The plugin component (.wasm), its kind read from its exports; or
        /// a run config (.toml) whose pipeline tests to run.
        plugin: PathBuf,
        /// Pipeline tests: the cases file (default: beside the config,
        /// `<name>.cases.toml`).
        #[arg(long)]
        cases: Option<PathBuf>,
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
        /// Documents per call of a batch stage, and per indexer batch (a
        /// document stage is called once per document).
        #[arg(long, default_value_t = 100)]
        batch_size: usize,
    },
    /// Make a new plugin project that builds with one command (`./build.sh`)
    /// and passes `weir test` as generated (`./build.sh test`).
    New {
        /// The plugin kind.
        #[arg(value_enum)]
        kind: scaffold::Kind,
        /// The plugin's name: lowercase letters, digits and `-`.
        name: String,
        /// The language.
        #[arg(long, value_enum, default_value_t = scaffold::Lang::Rust)]
        lang: scaffold::Lang,
        /// Where to create the project (default: ./<name>).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// The control plane: an HTTP API through which tenants submit runs,
    /// list them with live counts, pause, resume and stop them, and read
    /// their summaries and dead letters; a status page at `/`; `/metrics`,
    /// `/healthz` and `/readyz`. Runs until SIGINT/SIGTERM, which stops the
    /// runs going on (they end `interrupted`). SIGHUP reloads every live
    /// run with its own config, so that plugins changed in `plugin_dir` are
    /// taken up (a tenant reloads its run with a new config through the API).
    Serve {
        /// The operator's config (TOML): `[server]` and `[[tenants]]`.
        config: PathBuf,
        /// Also reload the live runs when a file in `plugin_dir` changes.
        #[arg(long)]
        watch: bool,
    },
    /// One run of `weir serve`, in a process of its own: started by
    /// `weir serve`, which sends it the run on stdin.
    #[command(hide = true)]
    ServeRun,
    /// A fleet worker: serves every pipeline the control plane of the
    /// operator's `[fleet]` has active (learned from Kafka), each in a
    /// process of its own under its tenant's policy; `/metrics`, `/healthz`
    /// and `/readyz` on `--metrics-addr`. Runs until SIGINT/SIGTERM, which
    /// stops its pipelines after they commit what they finished.
    Fleet {
        /// The operator's config (TOML), with `[fleet]`: the same file as
        /// the control plane's.
        config: PathBuf,
    },
    /// One pipeline of a fleet worker, in a process of its own: started by
    /// `weir fleet`, which sends it the pipeline on stdin.
    #[command(hide = true)]
    FleetPipeline,
    /// Print live documents of a running process as they leave a stage
    /// (JSON lines), from its ops server (`--metrics-addr`, where its
    /// config's `[metrics]` has `tap = true`), or with --run from a run of
    /// `weir serve` (a tenant taps only its own runs; the token is read
    /// from WEIR_TOKEN).
    ///
    /// A tap is sampled and bounded: at most --limit documents, a
    /// --percent of them by id, for at most --seconds; a reader that falls
    /// behind misses documents and never slows the pipeline. Documents
    /// over 64 KiB come as their id and size.
    Tap(tap::TapArgs),
    /// What became of one document: in every run of the config that kept a
    /// trace (`[trace] enabled = true`), the stages it went through (their
    /// components' SHA-256 and the config generation), the children it made
    /// or the document it was made from, and its end: indexed, deleted,
    /// dropped by a stage, or failed (where, why, and its dead letter).
    /// Exit 0 when a trace names it, 1 when none does.
    Trace(trace::TraceArgs),
    /// See and clear what a config's syncing connectors keep between runs.
    #[command(subcommand)]
    State(state::StateCommand),
    /// Check a config and every plugin's settings without running anything.
    Validate {
        /// The run configuration (TOML).
        config: PathBuf,
        /// Also reach each indexer's server (each granted URL in its
        /// settings, else each granted host) and say what answered; one that
        /// cannot be reached is a problem. Nothing is written to it.
        #[arg(long)]
        check_backends: bool,
    },
}

impl Command {
    /// A command that prints its result and ends (not a serving process):
    /// a closed standard output ends it quietly, as it does `cat`.
    fn prints_and_ends(&self) -> bool {
        matches!(
            self,
            Self::Run { .. }
                | Self::Replay { .. }
                | Self::Test { .. }
                | Self::New { .. }
                | Self::Validate { .. }
                | Self::State(_)
                | Self::Tap(_)
                | Self::Trace(_)
        )
    }
}

/// Where a run's workers and indexers are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Mode {
    Local,
    Kafka,
}

impl From<Mode> for weir::topology::Mode {
    fn from(mode: Mode) -> Self {
        match mode {
            Mode::Local => Self::Local,
            Mode::Kafka => Self::Kafka,
        }
    }
}

fn execute(
    command: Command,
    metrics_addr: Option<&str>,
    log_format: LogFormat,
) -> anyhow::Result<u8> {
    use weir::topology::serving::Role;
    match command {
        Command::Validate {
            config,
            check_backends,
        } => commands::validate(&config, check_backends),
        Command::Tap(args) => tap::tap(args),
        Command::Trace(args) => trace::trace(args),
        Command::State(command) => state::state(command),
        Command::Test { plugin, cases, .. }
            if cases.is_some() || plugin.extension().is_some_and(|e| e == "toml") =>
        {
            plugin_test::test_pipeline(&plugin, cases)
        }
        Command::Test {
            plugin,
            cases: _,
            input,
            config,
            expect,
            dirs,
            batch_size,
        } => plugin_test::test_plugin(plugin, input, config, expect, &dirs, batch_size),
        Command::New {
            kind,
            name,
            lang,
            dir,
        } => {
            let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
            if let Some(why) = scaffold::refused(&name, &dir) {
                eprintln!("error: {why}");
                return Ok(EXIT_INVALID_CONFIG);
            }
            let files = scaffold::create(kind, lang, &name, &dir)?;
            println!(
                "created {} ({} files): cd {} && ./build.sh test",
                dir.display(),
                files.len(),
                dir.display()
            );
            Ok(0)
        }
        Command::Serve { config, watch } => {
            commands::control_plane(&config, metrics_addr, log_format.name(), watch)
        }
        Command::ServeRun => Ok(weir::control::serve_run()),
        Command::FleetPipeline => Ok(weir::fleet::pipeline::serve_pipeline()),
        Command::Fleet { config } => commands::fleet(&config, metrics_addr, log_format.name()),
        Command::Worker {
            config,
            pipeline,
            watch,
        } => commands::serve(&config, pipeline, Role::Worker, metrics_addr, watch),
        Command::Indexer { config, pipeline } => {
            commands::serve(&config, pipeline, Role::Indexer, metrics_addr, false)
        }
        Command::Hybrid {
            config,
            pipeline,
            watch,
        } => commands::serve(&config, pipeline, Role::Hybrid, metrics_addr, watch),
        Command::Run {
            config,
            mode,
            full,
            allow_deletes,
            rebuild,
            no_progress,
            resume,
            watch,
            every,
            time_zone,
            jitter,
        } => {
            let every =
                match every::schedule_of(every.as_deref(), time_zone.as_deref(), jitter.as_deref())
                {
                    Ok(every) => every,
                    Err(code) => return Ok(code),
                };
            commands::run(
                &config,
                commands::RunOptions {
                    mode: mode.into(),
                    full,
                    allow_deletes,
                    rebuild,
                    no_progress,
                    resume: resume.as_deref(),
                    watch,
                    every: every.as_ref(),
                },
                metrics_addr,
            )
        }
        Command::Replay {
            config,
            dead_letters,
            fail_topic,
            pipeline,
            no_progress,
        } => commands::replay(
            &config,
            commands::Letters {
                file: dead_letters,
                fail_topic,
            },
            pipeline.as_deref(),
            no_progress,
            metrics_addr,
        ),
    }
}
