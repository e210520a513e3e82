//! `[[tenants]]`: groups of pipelines with default limits for their plugins.

use serde::{Deserialize, Serialize};

/// `[[tenants]]`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    pub name: String,
    /// The tenant's pipelines; a pipeline belongs to at most one tenant.
    pub pipelines: Vec<String>,
    /// Defaults for the limits its plugins leave unset (a plugin's own
    /// `limits` win). A top-level `[indexer]` is shared, so not the tenant's.
    #[serde(default)]
    pub limits: crate::plugin::Limits,
}
