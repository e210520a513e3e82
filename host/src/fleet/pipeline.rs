//! `weir fleet-pipeline`: one pipeline of one spec, served by a fleet
//! worker in a process of its own (bounded as a run's process is). It reads
//! its [`Job`] from stdin, admits the tenant's config again under the
//! tenant's policy (so its plugins get that tenant's grants and no one
//! else's), and serves the pipeline's worker–indexer pairs over Kafka until
//! its stdin closes (the fleet worker stops it, or died).

use std::io::BufRead;

use serde::{Deserialize, Serialize};

use crate::config::KafkaConfig;
use crate::run::Shutdown;
use crate::tenancy::admit;
use crate::tenancy::operator::OperatorConfig;
use crate::topology::serving::{self, Role};
use crate::topology::{self, Health, Mode};

/// What a fleet worker sends its pipeline's process: one JSON line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    /// With `server.plugin_dir` where the worker put the spec's plugins,
    /// each verified against its SHA-256.
    pub operator: OperatorConfig,
    pub tenant: String,
    pub config: String,
    pub pipeline: String,
    /// The spec's topics.
    pub kafka: KafkaConfig,
    /// Worker–indexer pairs to run.
    pub pairs: usize,
}

/// Exit codes: served and stopped; the job could not be served.
const EXIT_REFUSED: u8 = 2;
const EXIT_FAILED: u8 = 1;

/// Serve the job sent on stdin; the exit code.
pub fn serve_pipeline() -> u8 {
    let mut input = std::io::BufReader::new(std::io::stdin());
    let mut first = String::new();
    let job: Job = match input
        .read_line(&mut first)
        .map_err(|e| e.to_string())
        .and_then(|_| serde_json::from_str(&first).map_err(|e| e.to_string()))
    {
        Ok(job) => job,
        Err(e) => {
            eprintln!("error: `weir fleet-pipeline` is started by `weir fleet`: {e}");
            return EXIT_REFUSED;
        }
    };
    let span = tracing::info_span!("fleet", tenant = %job.tenant, pipeline = %job.pipeline);
    let _entered = span.enter();
    let Some(policy) = job.operator.tenant(&job.tenant) else {
        tracing::error!("no such tenant in the operator's file: not served");
        return EXIT_REFUSED;
    };
    let letters = std::env::temp_dir().join("weir-fleet-unused-dead-letters.jsonl");
    let mut config = match admit::admit(&job.config, policy, &job.operator, &letters) {
        Ok(config) => config,
        Err(refusal) => {
            tracing::error!(refusal = ?refusal, "the tenant's config is refused here: not served");
            return EXIT_REFUSED;
        }
    };
    config.kafka = Some(job.kafka);
    config.worker.threads = job.pairs;
    config.runner.cache_dir = job.operator.server.cache_dir.clone();
    let runner = match topology::runner(config, Mode::Kafka) {
        Ok(runner) => runner,
        Err(e) => {
            tracing::error!(error = %e, "cannot set the pipeline up");
            return EXIT_FAILED;
        }
    };
    let plugins = match runner.validate() {
        Ok(plugins) => plugins,
        Err(errors) => {
            tracing::error!(errors = %errors, "the tenant's plugins are not valid here");
            return EXIT_REFUSED;
        }
    };
    let shutdown = Shutdown::default();
    let stop = shutdown.clone();
    let spawned = std::thread::Builder::new()
        .name("weir-fleet-pipeline-stdin".into())
        .spawn(move || {
            // Nothing more is sent: stdin closes when the worker stops us.
            for _ in input.lines().map_while(Result::ok) {}
            stop.trigger();
        });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "cannot listen to the fleet worker");
        return EXIT_FAILED;
    }
    let health = Health::default();
    match serving::serve(
        &runner,
        &plugins,
        &job.pipeline,
        Role::Hybrid,
        &shutdown,
        &health,
    ) {
        Ok(Ok(())) => {
            tracing::info!("stopped");
            0
        }
        Ok(Err(reason)) | Err(topology::SetupError::Failed(reason)) => {
            tracing::error!(reason, "the pipeline stopped");
            EXIT_FAILED
        }
        Err(e) => {
            tracing::error!(error = %e, "the pipeline could not be served");
            EXIT_FAILED
        }
    }
}
