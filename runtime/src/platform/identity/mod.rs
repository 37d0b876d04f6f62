//! Who is calling: the one runtime service every face asks before it serves a request.
//!
//! Off by default: every request is [`Caller::Anyone`], as before authentication existed (the
//! pod, where the proxy reaches the runtime on localhost). On when the configuration names a
//! token issuer ([`tokens`], keys from [`token_keys`]), an API key file ([`api_keys`]), or
//! both. A caller then proves who it is with `Authorization: Bearer <JWT>`, or with an API
//! key in its header (or as the bearer); the answer is a [`Caller`] (principal, tenant,
//! scopes) or a [`Refusal`] each face writes in its own shape (`401` with a `Bearer`
//! challenge, `403` for a missing scope). Faces pass the caller on to the services, which
//! decide what it may see ([`Caller::may_see`]).

pub mod api_keys;
pub mod caller;
pub mod card;
pub mod plan;
pub mod token_keys;
pub mod tokens;

use std::collections::BTreeSet;
use std::sync::Arc;

use arc_swap::ArcSwap;
use http::{HeaderMap, StatusCode};

pub use caller::{Caller, Known, Principal, TenantMismatch, Via};
pub use tokens::TokenRefusal;

use api_keys::{ApiKeys, ApiKeysError};
use plan::{AuthPlan, MetricsAccess};
use token_keys::{KeysHealth, TokenKeys};
use tokens::TokenVerifier;

/// The realm named in every challenge.
const REALM: &str = "daedalus";

/// The identity service. Cheap to clone; a reload swaps what it checks against.
#[derive(Debug, Clone)]
pub struct Identity(Arc<ArcSwap<Active>>);

/// What callers are checked against now.
#[derive(Debug, Default)]
struct Active {
    plan: AuthPlan,
    tokens: Option<TokenVerifier>,
    api_keys: Option<ApiKeys>,
}

/// Why a request is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("this endpoint requires authentication")]
    NoCredentials,
    #[error("{0}")]
    Token(TokenRefusal),
    #[error("the API key is not valid")]
    UnknownApiKey,
    #[error("the credential lacks the scope {0}")]
    MissingScope(String),
    #[error("the credential is not valid for this tenant")]
    Tenant,
}

impl From<TenantMismatch> for Refusal {
    fn from(_: TenantMismatch) -> Self {
        Self::Tenant
    }
}

impl Refusal {
    /// `401` when the caller is unknown, `403` when it is known and may not.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::NoCredentials | Self::Token(_) | Self::UnknownApiKey => StatusCode::UNAUTHORIZED,
            Self::MissingScope(_) | Self::Tenant => StatusCode::FORBIDDEN,
        }
    }

    /// The `WWW-Authenticate` value (RFC 6750 §3), naming the protected resource's metadata
    /// when the face has one (the MCP authorization spec).
    pub fn challenge(&self, resource_metadata: Option<&str>) -> String {
        use std::fmt::Write;
        let mut value = format!("Bearer realm=\"{REALM}\"");
        if let Some(url) = resource_metadata {
            let _ = write!(value, ", resource_metadata=\"{url}\"");
        }
        let _ = match self {
            Self::NoCredentials => Ok(()),
            Self::Token(_) | Self::UnknownApiKey => write!(
                value,
                ", error=\"invalid_token\", error_description=\"{self}\""
            ),
            Self::MissingScope(scope) => write!(
                value,
                ", error=\"insufficient_scope\", scope=\"{scope}\", error_description=\"{self}\""
            ),
            Self::Tenant => write!(
                value,
                ", error=\"insufficient_scope\", error_description=\"{self}\""
            ),
        };
        value
    }
}

/// A new plan, checked and ready to apply.
#[derive(Debug)]
pub struct PreparedIdentity(Active);

/// Why the identity service could not start (or reload).
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error(transparent)]
    ApiKeys(#[from] ApiKeysError),
}

/// The identity service's state, for `/healthz`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct IdentityHealth {
    pub on: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_keys: Option<KeysHealth>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_keys: Option<usize>,
}

impl Default for Identity {
    fn default() -> Self {
        Self::off()
    }
}

impl Identity {
    /// Authentication off: everyone is [`Caller::Anyone`].
    pub fn off() -> Self {
        Self(Arc::new(ArcSwap::from_pointee(Active::default())))
    }

    /// The service for `plan`: the API keys are read (a file that does not read is an
    /// error), the token keys fetched once (a provider that does not answer is not: its
    /// tokens are refused until it does).
    pub async fn start(plan: &AuthPlan) -> Result<Self, IdentityError> {
        let identity = Self::off();
        identity.reload(plan).await?;
        Ok(identity)
    }

    /// What checking callers against `plan` takes, ready to [`Identity::apply`]: the API key
    /// file read again, the token keys kept when their source did not change (else fetched).
    /// On error nothing changes.
    pub async fn prepare(&self, plan: &AuthPlan) -> Result<PreparedIdentity, IdentityError> {
        let before = self.0.load_full();
        let same_keys = before.tokens.as_ref().and_then(|t| {
            let next = plan.tokens.as_ref()?;
            (t.plan().keys == next.keys && t.plan().issuer == next.issuer)
                .then(|| Arc::clone(t.keys()))
        });
        let kept = same_keys.is_some();
        let active = Active::build(plan, same_keys)?;
        if !kept
            && let Some(tokens) = &active.tokens
            && let Err(e) = tokens.keys().fetch().await
        {
            tracing::warn!(error = %e, "the token issuer did not answer; its tokens are refused until it does");
        }
        Ok(PreparedIdentity(active))
    }

    /// From the next request on, checks callers as `prepared` says.
    pub fn apply(&self, prepared: PreparedIdentity) {
        self.0.store(Arc::new(prepared.0));
    }

    /// [`Identity::prepare`] and [`Identity::apply`] at once.
    pub async fn reload(&self, plan: &AuthPlan) -> Result<(), IdentityError> {
        let prepared = self.prepare(plan).await?;
        self.apply(prepared);
        Ok(())
    }

    /// Whether callers must authenticate.
    pub fn is_on(&self) -> bool {
        self.0.load().plan.is_on()
    }

    /// The plan checked against now.
    pub fn plan(&self) -> AuthPlan {
        self.0.load().plan.clone()
    }

    /// Who sent a request with `headers`, or why it is refused.
    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<Caller, Refusal> {
        let active = self.0.load_full();
        if !active.plan.is_on() {
            return Ok(Caller::Anyone);
        }
        let known = active.identify(headers).await?;
        if let Some(missing) = active
            .plan
            .required_scopes
            .iter()
            .find(|s| !known.scopes.contains(*s))
        {
            return Err(Refusal::MissingScope(missing.clone()));
        }
        Ok(Caller::known(known))
    }

    /// Whether a request with `headers` may read `/metrics`.
    pub async fn may_read_metrics(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let active = self.0.load_full();
        match active.plan.metrics.clone() {
            MetricsAccess::Open => Ok(()),
            MetricsAccess::Caller => active.identify(headers).await.map(drop),
            MetricsAccess::Scope(scope) => {
                let known = active.identify(headers).await?;
                if known.scopes.contains(&scope) {
                    Ok(())
                } else {
                    Err(Refusal::MissingScope(scope))
                }
            }
        }
    }

    pub fn health(&self) -> IdentityHealth {
        let active = self.0.load();
        IdentityHealth {
            on: active.plan.is_on(),
            token_keys: active.tokens.as_ref().map(|t| t.keys().health()),
            api_keys: active.api_keys.as_ref().map(ApiKeys::len),
        }
    }
}

impl Active {
    fn build(plan: &AuthPlan, keys: Option<Arc<TokenKeys>>) -> Result<Self, IdentityError> {
        let tokens = plan.tokens.as_ref().map(|tokens| {
            let keys = keys
                .unwrap_or_else(|| Arc::new(TokenKeys::new(tokens.keys.clone(), &tokens.issuer)));
            TokenVerifier::new(tokens.clone(), keys, plan.tenant_claim.clone())
        });
        let api_keys = plan
            .api_keys
            .as_ref()
            .map(|k| ApiKeys::load(&k.file))
            .transpose()?;
        Ok(Self {
            plan: plan.clone(),
            tokens,
            api_keys,
        })
    }

    /// Who the credential of `headers` names (scopes not checked yet).
    async fn identify(&self, headers: &HeaderMap) -> Result<Known, Refusal> {
        let admin = |scopes: &BTreeSet<String>| {
            self.plan
                .admin_scope
                .as_ref()
                .is_some_and(|s| scopes.contains(s))
        };
        match credential(
            headers,
            self.plan.api_keys.as_ref().map(|k| k.header.as_str()),
        ) {
            Credential::None => Err(Refusal::NoCredentials),
            Credential::Bearer(token) if looks_like_jwt(token) || self.api_keys.is_none() => {
                let Some(verifier) = &self.tokens else {
                    return Err(Refusal::UnknownApiKey);
                };
                let claims = verifier.verify(token).await.map_err(Refusal::Token)?;
                let admin = admin(&claims.scopes);
                Ok(Known {
                    principal: Principal {
                        issuer: Some(claims.issuer),
                        subject: claims.subject,
                        tenant: claims.tenant,
                    },
                    scopes: claims.scopes,
                    admin,
                    via: Via::Token,
                })
            }
            Credential::Bearer(key) | Credential::ApiKey(key) => {
                let holder = self
                    .api_keys
                    .as_ref()
                    .and_then(|keys| keys.holder(key))
                    .ok_or(Refusal::UnknownApiKey)?;
                Ok(Known {
                    principal: Principal {
                        issuer: None,
                        subject: holder.principal.clone(),
                        tenant: holder.tenant.clone(),
                    },
                    admin: admin(&holder.scopes),
                    scopes: holder.scopes.clone(),
                    via: Via::ApiKey,
                })
            }
        }
    }
}

/// What a request presents.
enum Credential<'h> {
    None,
    Bearer(&'h str),
    ApiKey(&'h str),
}

fn credential<'h>(headers: &'h HeaderMap, api_key_header: Option<&str>) -> Credential<'h> {
    let bearer = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
        .filter(|token| !token.is_empty());
    if let Some(token) = bearer {
        return Credential::Bearer(token);
    }
    // Another scheme (Basic, ...) proves nothing here; an API key may still come beside it.
    match api_key_header
        .and_then(|h| headers.get(h))
        .map(|v| v.to_str().unwrap_or("").trim())
    {
        Some(key) if !key.is_empty() => Credential::ApiKey(key),
        _ => Credential::None,
    }
}

/// A JWS compact serialization has three dot-separated parts.
fn looks_like_jwt(token: &str) -> bool {
    token.bytes().filter(|b| *b == b'.').count() == 2
}

#[cfg(test)]
mod tests;
