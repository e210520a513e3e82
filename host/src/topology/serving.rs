//! The serving roles of Kafka mode: `weir worker`, `weir indexer` and
//! `weir hybrid` each serve one pipeline of a config until told to
//! stop. This file makes the pipeline's topics, announces the process with
//! heartbeats and builds each role's messengers; the runner does the work.

use crate::config::Config;
use crate::messenger::kafka::{
    HeartbeatSender, KafkaIndexerMessenger, KafkaTopics, KafkaWorkerMessenger,
};
use crate::messenger::{IndexerMessenger, ServerRole, WorkerMessenger};
use crate::run::{LoadedPlugins, Runner, Shutdown};
use crate::telemetry::export::Health;

use super::SetupError;

/// What a serving process does with its pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `weir worker`: runs the stages.
    Worker,
    /// `weir indexer`: sends processed documents to the backend.
    Indexer,
    /// `weir hybrid` (Hybrid mode): worker–indexer pairs.
    Hybrid,
}

impl Role {
    fn server_role(self) -> ServerRole {
        match self {
            Self::Worker => ServerRole::Worker,
            Self::Indexer => ServerRole::Indexer,
            Self::Hybrid => ServerRole::Hybrid,
        }
    }
}

/// The pipeline a serving process serves: the one named, or the config's
/// only one.
pub fn pipeline_to_serve(config: &Config, named: Option<String>) -> Result<String, SetupError> {
    let pipelines: Vec<&str> = config.pipelines.iter().map(|p| p.name.as_str()).collect();
    match (named, pipelines.as_slice()) {
        (Some(p), _) if pipelines.contains(&p.as_str()) => Ok(p),
        (Some(p), _) => Err(SetupError::Failed(format!(
            "no pipeline is named `{p}` (the config has: {})",
            pipelines.join(", ")
        ))),
        (None, [only]) => Ok((*only).to_owned()),
        (None, _) => Err(SetupError::Failed(format!(
            "name the pipeline to serve: one of {}",
            pipelines.join(", ")
        ))),
    }
}

/// Serve `pipeline` in `role` until `shutdown` or a fatal error (`Err`,
/// the reason). `health` turns ready once the process is set up.
pub fn serve(
    runner: &Runner,
    plugins: &LoadedPlugins,
    pipeline: &str,
    role: Role,
    shutdown: &Shutdown,
    health: &Health,
) -> Result<Result<(), String>, SetupError> {
    let kafka = super::kafka_of(runner.config())?.clone();
    let mut topics = KafkaTopics::new(kafka, pipeline);
    // A process may start before the cluster is reachable: it then waits
    // for it (consumers retry), and topics the broker has not got are made
    // by whoever comes later (or auto-created).
    if let Err(e) = topics.ensure_pipeline_topics() {
        tracing::warn!(error = %e, "cannot create the pipeline's topics now; going on");
    }
    topics.read_broker_limit(|| !shutdown.is_triggered());
    let stats = runner.stats();
    let _heartbeats = HeartbeatSender::start(&topics, role.server_role(), move || {
        let s = stats.snapshot();
        (s.processed, s.indexed)
    })
    .map_err(|e| SetupError::Failed(format!("cannot start heartbeats: {e:#}")))?;
    let threads = runner.config().worker.threads;
    if role != Role::Indexer {
        warn_about_partitions(&topics.source(), &topics, threads, "worker threads");
    }
    health.ready();
    let cannot_connect =
        |e: &dyn std::fmt::Display| SetupError::Failed(format!("cannot connect to Kafka: {e}"));
    Ok(match role {
        Role::Worker => {
            let messengers = KafkaWorkerMessenger::for_threads(&topics, threads)
                .map_err(|e| cannot_connect(&e))?
                .into_iter()
                .map(|m| Box::new(m) as Box<dyn WorkerMessenger>)
                .collect();
            tracing::info!(pipeline = %pipeline, threads, topic = %topics.source(), "worker serving");
            runner.serve_workers(plugins, pipeline, messengers, shutdown)
        }
        Role::Hybrid => {
            // Two batches of room per pair keep its indexer busy without
            // holding much processed-but-unindexed work.
            let indexer = runner.config().indexer_for(pipeline);
            let capacity = 2 * indexer.as_ref().map_or(1, |(_, i)| i.batch_size);
            if let Some((location, indexer)) = &indexer
                && indexer.instances > 1
            {
                tracing::warn!(
                    "{location}.instances = {} is not used in Hybrid mode: each of the {threads} pairs (worker.threads) has one indexer instance",
                    indexer.instances
                );
            }
            let pairs = KafkaWorkerMessenger::hybrid_pairs(&topics, threads, capacity)
                .map_err(|e| cannot_connect(&e))?
                .into_iter()
                .map(|(w, i)| {
                    (
                        Box::new(w) as Box<dyn WorkerMessenger>,
                        Box::new(i) as Box<dyn IndexerMessenger>,
                    )
                })
                .collect();
            tracing::info!(pipeline = %pipeline, pairs = threads, topic = %topics.source(), "hybrid pairs serving");
            runner.serve_hybrid(plugins, pipeline, pairs, shutdown)
        }
        Role::Indexer => {
            // `indexer.instances` consumers of the destination topic, each
            // with an indexer instance of its own.
            let instances = runner
                .config()
                .indexer_for(pipeline)
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
                .map_err(|e| cannot_connect(&e))?;
            tracing::info!(pipeline = %pipeline, instances, topic = %topics.dest(), "indexer serving");
            runner.serve_indexers(plugins, pipeline, messengers, shutdown)
        }
    })
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
