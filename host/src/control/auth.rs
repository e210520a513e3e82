//! Who a request comes from: each token's owner, kept as a SHA-256 digest,
//! and the [`Principal`] extractor, so a handler that takes a `Principal`
//! cannot run for a request without a known token (401 instead).

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::header;
use axum::http::request::Parts;
use sha2::{Digest, Sha256};

use super::operator::OperatorConfig;
use super::{ApiError, ControlPlane};

/// Who a request comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    Tenant(String),
    /// The operator: sees and controls every tenant's runs.
    Admin,
}

impl Principal {
    /// Whether it may see the runs of `tenant`.
    pub(super) fn sees(&self, tenant: &str) -> bool {
        match self {
            Self::Admin => true,
            Self::Tenant(own) => own == tenant,
        }
    }
}

/// The tokens that sign in: SHA-256 of each, and whose it is.
#[derive(Debug, Default)]
pub(super) struct Tokens(Vec<([u8; 32], Principal)>);

impl Tokens {
    /// The operator's and each tenant's token, from the variables the
    /// operator's config names, read with `var` (a principal whose variable
    /// is unset or empty cannot sign in, and is warned about).
    pub(super) fn read(operator: &OperatorConfig, var: impl Fn(&str) -> Option<String>) -> Self {
        let mut tokens = Vec::new();
        let mut add = |name: &str, who: Principal| match var(name) {
            Some(token) if !token.is_empty() => tokens.push((digest(&token), who)),
            _ => tracing::warn!(
                variable = name,
                "no token in the environment: {who:?} cannot sign in"
            ),
        };
        if let Some(name) = &operator.server.admin_token_env {
            add(name, Principal::Admin);
        }
        for t in &operator.tenants {
            add(&t.token_env, Principal::Tenant(t.name.clone()));
        }
        Self(tokens)
    }

    /// Whose `token` is, if anyone's.
    pub(super) fn owner(&self, token: &str) -> Option<Principal> {
        let digest = digest(token);
        self.0
            .iter()
            .find(|(d, _)| *d == digest)
            .map(|(_, who)| who.clone())
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// The sender of `Authorization: Bearer <token>`, or 401.
impl FromRequestParts<Arc<ControlPlane>> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        plane: &Arc<ControlPlane>,
    ) -> Result<Self, Self::Rejection> {
        let token = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .ok_or(ApiError::NoToken)?;
        plane.authenticate(token).ok_or(ApiError::UnknownToken)
    }
}
