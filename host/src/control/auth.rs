//! Who a request comes from: each token's owner, kept as a SHA-256 digest,
//! and the [`Principal`] extractor, so a handler that takes a `Principal`
//! cannot run for a request without a known token (401 instead), nor more
//! often than its rate allows (429, [`rate`](super::rate)).
//!
//! The extractor reads only the request's head: a handler takes its body
//! after its `Principal`, so a request without a known token is answered
//! before a byte of its body is read.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::header;
use axum::http::request::Parts;
use sha2::{Digest, Sha256};

use super::{ApiError, ControlPlane};
use crate::tenancy::operator::OperatorConfig;

/// Who a request comes from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
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

impl ControlPlane {
    /// Whose `token` is, if anyone's.
    pub fn authenticate(&self, token: &str) -> Option<Principal> {
        self.tokens.owner(token)
    }

    /// Whose `token`, sent from `from`, is, if it may be asked now: an
    /// address over its allowance of wrong guesses is refused before the
    /// token is looked up, a principal over its rate after.
    pub(super) fn sign_in(&self, token: &str, from: Option<IpAddr>) -> Result<Principal, ApiError> {
        let now = Instant::now();
        let limited = |sender: &str| crate::telemetry::meters::api_request_limited(sender);
        if let Err(retry_after) = self.limiter.may_try(from, now) {
            limited("unknown");
            return Err(ApiError::TooManyGuesses { retry_after });
        }
        let Some(who) = self.authenticate(token) else {
            self.limiter.guessed_wrong(from, now);
            return Err(ApiError::UnknownToken);
        };
        if let Err(retry_after) = self.limiter.admit(&who, now) {
            limited(match &who {
                Principal::Tenant(name) => name,
                Principal::Admin => "operator",
            });
            return Err(ApiError::RateLimited { retry_after });
        }
        Ok(who)
    }
}

/// The sender of `Authorization: Bearer <token>`, or 401 (429 over a
/// rate limit).
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
        let from = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(addr)| addr.ip());
        plane.sign_in(token, from)
    }
}
