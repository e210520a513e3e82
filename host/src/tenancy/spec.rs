//! What the control plane and the fleet's workers share: the operator's
//! `[fleet]`, the specs published for the fleet to serve, and what each
//! worker says it serves.

use serde::{Deserialize, Serialize};

use crate::config::KafkaConfig;

/// `[fleet]` of the operator's file.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FleetConfig {
    /// The cluster (and its client settings) the fleet works over.
    pub kafka: KafkaConfig,
    /// What the fleet's own topics and groups start with. Default `weir`.
    #[serde(default = "FleetConfig::default_name")]
    pub name: String,
    /// The environment variable holding the token fleet workers fetch
    /// plugins with.
    pub token_env: String,
    /// Where fleet workers fetch plugins: the control planes' base URLs.
    pub control: Vec<String>,
    /// Partitions of each pipeline's topics: the most fleet workers' pairs
    /// that can share one pipeline. Default 12.
    #[serde(default = "FleetConfig::default_partitions")]
    pub partitions: u32,
    /// Worker–indexer pairs each fleet worker runs per pipeline. Default 2.
    #[serde(default = "FleetConfig::default_pairs")]
    pub pairs: usize,
    /// A fleet worker's plugin cache and its pipelines' files. Default
    /// `fleet-data`, beside the operator's file.
    #[serde(default = "FleetConfig::default_work_dir")]
    pub work_dir: std::path::PathBuf,
    /// How long a dead control plane's runs wait for a standby: its
    /// session in the control group. Default 6 s.
    #[serde(default = "FleetConfig::default_session", with = "humantime_serde")]
    pub session_timeout: std::time::Duration,
    /// How long a spec no run uses stays served: then fleet workers stop
    /// its pipelines and its topics are deleted. Default 10 minutes.
    #[serde(default = "FleetConfig::default_retire", with = "humantime_serde")]
    pub retire_after: std::time::Duration,
}

impl FleetConfig {
    fn default_name() -> String {
        "weir".into()
    }
    fn default_partitions() -> u32 {
        12
    }
    fn default_pairs() -> usize {
        2
    }
    fn default_work_dir() -> std::path::PathBuf {
        "fleet-data".into()
    }
    fn default_session() -> std::time::Duration {
        std::time::Duration::from_secs(6)
    }
    fn default_retire() -> std::time::Duration {
        std::time::Duration::from_secs(600)
    }

    /// What `tenant`'s connector-state topics start with: `s<16 hex>_`,
    /// from the fleet's name and the tenant's, the same for every spec.
    pub fn state_prefix(&self, tenant: &str) -> String {
        use sha2::Digest;
        let mut hash = sha2::Sha256::new();
        hash.update(self.name.as_bytes());
        hash.update([0]);
        hash.update(tenant.as_bytes());
        format!("s{}_", hex::encode(&hash.finalize()[..8]))
    }

    /// Where specs are published.
    pub fn pipelines_topic(&self) -> String {
        format!("{}_pipelines", self.name)
    }

    /// Where runs are kept for a standby.
    pub fn runs_topic(&self) -> String {
        format!("{}_runs", self.name)
    }

    /// Where tenants' schedules are kept for a standby (each written
    /// before each start it makes).
    pub fn schedules_topic(&self) -> String {
        format!("{}_schedules", self.name)
    }

    /// Where fleet workers say what they serve.
    pub fn workers_topic(&self) -> String {
        format!("{}_workers", self.name)
    }

    /// Whose one member leads.
    pub fn control_topic(&self) -> String {
        format!("{}_control", self.name)
    }

    pub fn problems(&self, problems: &mut Vec<String>) {
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 64
            && self
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !name_ok {
            problems.push("fleet.name: 1 to 64 letters, digits, `-` and `_`".into());
        }
        if !(1..=10_000).contains(&self.partitions) {
            problems.push("fleet.partitions: must be from 1 to 10000".into());
        }
        if !(1..=64).contains(&self.pairs) {
            problems.push("fleet.pairs: must be from 1 to 64".into());
        }
        if self.control.is_empty() {
            problems.push("fleet.control: name at least one control plane URL".into());
        }
        if self.session_timeout < std::time::Duration::from_secs(1)
            || self.session_timeout > std::time::Duration::from_secs(300)
        {
            problems.push("fleet.session_timeout: must be from 1 s to 5 minutes".into());
        }
        if self.retire_after < std::time::Duration::from_secs(1)
            || self.retire_after > std::time::Duration::from_secs(30 * 86_400)
        {
            problems.push("fleet.retire_after: must be from 1 s to 30 days".into());
        }
    }

    /// The Kafka settings of `spec`'s pipelines: topics behind its prefix,
    /// made by Weir with the fleet's partitions; connector state behind
    /// its tenant's, which outlives the spec.
    pub fn kafka_for(&self, spec: &Spec) -> KafkaConfig {
        KafkaConfig {
            topic_prefix: Some(spec.prefix.clone()),
            state_prefix: Some(self.state_prefix(&spec.tenant)),
            topic_partitions: Some(self.partitions),
            event_topic: None,
            source_topic: None,
            worker_group_id: None,
            indexer_group_id: None,
            events: true,
            ..self.kafka.clone()
        }
    }
}

/// A plugin a spec needs: its file name in `server.plugin_dir`, and the
/// SHA-256 of what was admitted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginRef {
    pub file: String,
    pub sha256: String,
}

/// A tenant config the fleet serves: published by the control plane on
/// `<name>_pipelines`, keyed by its id; removed when retired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spec {
    /// The SHA-256 (hex, 32 characters) of its tenant and config.
    pub id: String,
    pub tenant: String,
    /// The tenant's config, as submitted.
    pub config: String,
    /// Its pipelines' names.
    pub pipelines: Vec<String>,
    pub plugins: Vec<PluginRef>,
    /// What its topics' names start with: random, so that no name can be
    /// guessed or meet another spec's.
    pub prefix: String,
}

impl Spec {
    /// The id of `tenant`'s config `text`.
    pub fn id_of(tenant: &str, text: &str) -> String {
        use sha2::Digest;
        let mut hash = sha2::Sha256::new();
        hash.update(tenant.as_bytes());
        hash.update([0]);
        hash.update(text.as_bytes());
        hex::encode(&hash.finalize()[..16])
    }

    /// A fresh topic prefix.
    pub fn new_prefix() -> String {
        let mut bytes = [0_u8; 8];
        getrandom::fill(&mut bytes).unwrap_or_else(|_| bytes.fill_with(|| fastrand::u8(..)));
        format!("w{}_", hex::encode(bytes))
    }
}

/// What a fleet worker serves, as it says every 2 s.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerStatus {
    /// `<host>:<pid>`.
    pub worker: String,
    /// Milliseconds since the epoch.
    pub time_ms: u64,
    pub pipelines: Vec<Served>,
}

/// One pipeline a fleet worker serves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Served {
    pub spec: String,
    pub tenant: String,
    pub pipeline: String,
    pub pairs: usize,
    /// The pipeline's process, while it runs.
    pub pid: Option<u32>,
    /// Times its process ended and was started again.
    pub restarts: u32,
}
