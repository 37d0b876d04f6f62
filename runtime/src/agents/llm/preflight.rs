//! Provider preflight: does the configured key work, and does the provider offer the model?
//! OpenAI: `GET {base_url}/models` lists the configured model. Anthropic:
//! `GET /v1/models/{model}` answers 200. Warn-only (never blocks startup), 5 s per call, and
//! re-probed when older than the TTL, for `/healthz` and the health surfaces.

use std::time::{Duration, Instant};

use chrono::{SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;

use super::{anthropic, openai};
use crate::config::deployment::{Deployment, ModelRef, ProviderSettings};

const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// The model checked for a provider that has a key but is not the active one.
const ANTHROPIC_PROBE_MODEL: &str = "claude-sonnet-4-5";

/// The result of checking one provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderCheck {
    pub provider: &'static str,
    /// The model checked, if any.
    pub model: Option<String>,
    /// Whether `default_model` points at this provider (only the active one affects health).
    pub active: bool,
    pub ok: bool,
    /// What is wrong, or "ok".
    pub message: String,
    pub checked_at: String,
}

/// The providers to check and the latest results.
#[derive(Debug)]
pub struct Preflight {
    targets: Vec<Target>,
    ttl: Duration,
    last: Mutex<Option<(Instant, Vec<ProviderCheck>)>>,
    http: reqwest::Client,
}

#[derive(Debug, Clone)]
struct Target {
    provider: &'static str,
    settings: ProviderSettings,
    model: Option<String>,
    active: bool,
}

impl Preflight {
    /// The checks for `deployment`: every provider with a key, and the active one in any case.
    pub fn new(deployment: &Deployment, ttl: Duration) -> Self {
        let mut targets = Vec::new();
        let active_openai = match &deployment.default_model {
            ModelRef::OpenAi(m) => Some(m.clone()),
            _ => None,
        };
        let active_anthropic = match &deployment.default_model {
            ModelRef::Anthropic(m) => Some(m.clone()),
            _ => None,
        };
        let empty = ProviderSettings {
            api_key: None,
            base_url: None,
            headers: std::collections::BTreeMap::default(),
            timeout_secs: None,
            forward_inbound_auth: false,
            dialect: None,
            origins: crate::config::deployment::ProviderOrigins::default(),
        };
        for (provider, settings, active_model) in [
            ("openai", &deployment.openai, active_openai),
            ("anthropic", &deployment.anthropic, active_anthropic),
        ] {
            let has_key = settings.as_ref().is_some_and(|s| s.api_key.is_some());
            if active_model.is_some() || has_key {
                targets.push(Target {
                    provider,
                    settings: settings.clone().unwrap_or_else(|| empty.clone()),
                    active: active_model.is_some(),
                    model: active_model,
                });
            }
        }
        let http = super::http_client()
            .timeout(CALL_TIMEOUT)
            .build()
            .expect("the HTTP client builds");
        Self {
            targets,
            ttl,
            last: Mutex::new(None),
            http,
        }
    }

    /// Whether there is anything to check (a passthrough-only deployment has nothing).
    pub fn is_empty(&self) -> bool {
        self.targets.is_empty()
    }

    /// The latest results, probing again if they are older than the TTL.
    pub async fn current(&self) -> Vec<ProviderCheck> {
        let mut last = self.last.lock().await;
        if let Some((at, results)) = last.as_ref()
            && at.elapsed() < self.ttl
        {
            return results.clone();
        }
        let results = futures::future::join_all(self.targets.iter().map(|t| self.check(t))).await;
        for r in &results {
            if r.ok {
                tracing::info!(provider = r.provider, model = ?r.model, "LLM provider preflight passed");
            } else {
                tracing::warn!(provider = r.provider, model = ?r.model, problem = %r.message, "LLM provider preflight failed");
            }
        }
        *last = Some((Instant::now(), results.clone()));
        results
    }

    async fn check(&self, target: &Target) -> ProviderCheck {
        let verdict: Result<(), PreflightError> = match target.provider {
            "openai" => self.check_openai(target).await,
            _ => self.check_anthropic(target).await,
        };
        ProviderCheck {
            provider: target.provider,
            model: target.model.clone(),
            active: target.active,
            ok: verdict.is_ok(),
            message: verdict.map_or_else(|e| e.to_string(), |()| "ok".to_owned()),
            checked_at: Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true),
        }
    }

    async fn check_openai(&self, target: &Target) -> Result<(), PreflightError> {
        let base = target
            .settings
            .base_url
            .clone()
            .unwrap_or_else(|| openai::DEFAULT_BASE_URL.to_owned());
        let key = target
            .settings
            .api_key
            .as_deref()
            .ok_or(PreflightError::NoApiKey)?;
        let response = self
            .http
            .get(format!("{base}/models"))
            .bearer_auth(key)
            .headers(extra_headers(&target.settings))
            .send()
            .await
            .map_err(|e| unreachable(&base, &e))?;
        status_problem(response.status().as_u16())?;
        let models: ModelsWire = response
            .json()
            .await
            .map_err(|_| PreflightError::UnexpectedModels)?;
        match &target.model {
            Some(m) if !models.data.iter().any(|x| &x.id == m) => {
                Err(PreflightError::ModelNotFound(m.clone()))
            }
            _ => Ok(()),
        }
    }

    async fn check_anthropic(&self, target: &Target) -> Result<(), PreflightError> {
        let base = target
            .settings
            .base_url
            .clone()
            .unwrap_or_else(|| anthropic::DEFAULT_BASE_URL.to_owned());
        let base = base.trim_end_matches("/v1");
        let key = target
            .settings
            .api_key
            .as_deref()
            .ok_or(PreflightError::NoApiKey)?;
        let model = target.model.as_deref().unwrap_or(ANTHROPIC_PROBE_MODEL);
        let response = self
            .http
            .get(format!("{base}/v1/models/{model}"))
            .header("x-api-key", key)
            .header("anthropic-version", anthropic::API_VERSION)
            .headers(extra_headers(&target.settings))
            .send()
            .await
            .map_err(|e| unreachable(base, &e))?;
        match response.status().as_u16() {
            404 => Err(PreflightError::ModelNotFound(model.to_owned())),
            status => status_problem(status),
        }
    }
}

/// `GET /models` of an OpenAI-compatible server.
#[derive(Deserialize)]
struct ModelsWire {
    data: Vec<ModelWire>,
}

#[derive(Deserialize)]
struct ModelWire {
    id: String,
}

fn extra_headers(settings: &ProviderSettings) -> reqwest::header::HeaderMap {
    settings
        .headers
        .iter()
        .filter_map(|(k, v)| {
            Some((
                reqwest::header::HeaderName::from_bytes(k.as_bytes()).ok()?,
                v.parse().ok()?,
            ))
        })
        .collect()
}

/// Why a provider check failed; its text is what `/healthz` and the logs show.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PreflightError {
    #[error("no API key configured")]
    NoApiKey,
    #[error("{base} did not answer within {}s", CALL_TIMEOUT.as_secs())]
    Timeout { base: String },
    #[error("{base} unreachable")]
    Unreachable { base: String },
    #[error("API key rejected")]
    KeyRejected,
    #[error("answered {0}")]
    Status(u16),
    #[error("unexpected /models answer")]
    UnexpectedModels,
    #[error("model '{0}' not found")]
    ModelNotFound(String),
}

fn unreachable(base: &str, e: &reqwest::Error) -> PreflightError {
    let base = base.to_owned();
    if e.is_timeout() {
        PreflightError::Timeout { base }
    } else {
        PreflightError::Unreachable { base }
    }
}

fn status_problem(status: u16) -> Result<(), PreflightError> {
    match status {
        200..=299 => Ok(()),
        401 | 403 => Err(PreflightError::KeyRejected),
        other => Err(PreflightError::Status(other)),
    }
}
