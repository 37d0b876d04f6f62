//! Credentials a client presents to a server it calls, shared by the binaries: the proxy's
//! to its runtime, and the runtime's to its downstream MCP servers and A2A agents.
//!
//! - [`Credentials`]: one bearer token, from a file (read again when it changes, as a
//!   projected Kubernetes token is) or an OAuth2 client-credentials grant (the `oauth2` crate),
//!   kept until shortly before it expires and then fetched again, once, for every concurrent
//!   caller.
//! - [`exchange::TokenExchange`]: RFC 8693, a caller's token exchanged for one whose audience is
//!   the server called, cached per caller token.
//!
//! Every fetch has a deadline; a failed one is an error naming the endpoint (its URL masked)
//! and what it answered, never a token or a secret.

pub mod exchange;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use oauth2::basic::BasicClient;
use oauth2::{AuthType, ClientId, ClientSecret, Scope, TokenResponse, TokenUrl};

use crate::redact::redact_url;

/// How long one token request may take.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// A token's lifetime when its endpoint does not say.
const DEFAULT_LIFETIME: Duration = Duration::from_mins(5);
/// A token is fetched again this long before it expires (or at half its life, if shorter).
const REFRESH_AHEAD: Duration = Duration::from_mins(1);
/// A token file is looked at again at most this often.
const FILE_RECHECK: Duration = Duration::from_secs(1);
/// The largest token accepted from a file or an endpoint.
const MAX_TOKEN_BYTES: usize = 64 * 1024;

/// A secret (a client secret, a token): never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself, for the header or form that carries it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl serde::Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str("***")
    }
}

/// An OAuth2 client of a token endpoint.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct OAuthClient {
    #[serde(serialize_with = "masked_url")]
    pub token_url: String,
    pub client_id: String,
    pub client_secret: Secret,
    /// Space-separated scopes to ask for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// The `audience` to ask for (the server the token is for).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
}

fn masked_url<S: serde::Serializer>(url: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&redact_url(url))
}

/// Where a client's bearer token comes from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CredentialSource {
    /// A file holding the token (read again when it changes).
    TokenFile(PathBuf),
    /// An OAuth2 client-credentials grant.
    ClientCredentials(OAuthClient),
}

/// Why no token could be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialError {
    #[error("cannot read the token file {path}: {why}")]
    File { path: String, why: String },
    #[error("the token endpoint {url} could not be reached: {why}")]
    Unreachable { url: String, why: String },
    #[error("the token endpoint {url} did not answer within {after:?}")]
    Timeout { url: String, after: Duration },
    #[error("the token endpoint {url} refused: {error}{}", description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Refused {
        url: String,
        error: String,
        description: Option<String>,
    },
    #[error("the token endpoint {url} answered {status} and no token")]
    Status { url: String, status: u16 },
    #[error("the token endpoint {url} answered something that is not a token")]
    Malformed { url: String },
    #[error("the token endpoint URL {url} is not a URL")]
    BadUrl { url: String },
}

impl CredentialError {
    /// Whether asking again cannot help: the endpoint refused the client itself (a wrong
    /// secret or id, a grant or scope it will not give), or the configuration is wrong. A
    /// token endpoint that does not answer, answers `5xx`, `408`, `425` or `429`, or a token
    /// file that is not there yet (a projected token is written after the pod starts) may
    /// pass.
    pub fn is_lasting(&self) -> bool {
        match self {
            Self::Refused { error, .. } => matches!(
                error.as_str(),
                "invalid_client"
                    | "unauthorized_client"
                    | "invalid_grant"
                    | "invalid_scope"
                    | "invalid_target"
                    | "invalid_request"
                    | "unsupported_grant_type"
            ),
            Self::Status { status, .. } => {
                (400..500).contains(status) && !matches!(status, 408 | 425 | 429)
            }
            Self::BadUrl { .. } => true,
            Self::File { .. }
            | Self::Unreachable { .. }
            | Self::Timeout { .. }
            | Self::Malformed { .. } => false,
        }
    }
}

/// A token and when to fetch the next one.
#[derive(Debug, Clone)]
struct Held {
    token: Secret,
    refresh_at: Instant,
    expires_at: Instant,
    /// The file's modification time, for a token read from a file.
    modified: Option<SystemTime>,
    checked: Instant,
}

/// One client's bearer token, kept and refreshed.
#[derive(Debug)]
pub struct Credentials {
    source: CredentialSource,
    http: reqwest::Client,
    held: Mutex<Option<Held>>,
    /// One fetch at a time: callers that find the token due wait for it.
    fetching: tokio::sync::Mutex<()>,
    fetches: AtomicU64,
}

impl Credentials {
    pub fn new(source: CredentialSource) -> Self {
        Self {
            source,
            http: client(),
            held: Mutex::new(None),
            fetching: tokio::sync::Mutex::new(()),
            fetches: AtomicU64::new(0),
        }
    }

    pub fn source(&self) -> &CredentialSource {
        &self.source
    }

    /// How many times the token was fetched (or the file read).
    pub fn fetches(&self) -> u64 {
        self.fetches.load(Ordering::Relaxed)
    }

    /// The token to present now: the one held while it is fresh, else a new one (fetched once
    /// for every caller waiting). When a refresh fails, a token that has not expired yet is
    /// still presented.
    pub async fn bearer(&self) -> Result<Secret, CredentialError> {
        if let Some(token) = self.fresh() {
            return Ok(token);
        }
        let _fetching = self.fetching.lock().await;
        if let Some(token) = self.fresh() {
            return Ok(token);
        }
        match self.fetch().await {
            Ok(held) => {
                let token = held.token.clone();
                *self.lock() = Some(held);
                Ok(token)
            }
            Err(e) => match self.unexpired() {
                Some(token) => {
                    tracing::warn!(error = %e, "keeping the token held until it expires");
                    Ok(token)
                }
                None => Err(e),
            },
        }
    }

    /// The server refused the token: the next call fetches a new one.
    pub fn invalidate(&self) {
        *self.lock() = None;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Held>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn fresh(&self) -> Option<Secret> {
        let held = self.lock();
        let held = held.as_ref()?;
        let now = Instant::now();
        if now >= held.refresh_at {
            return None;
        }
        if let CredentialSource::TokenFile(path) = &self.source
            && now.duration_since(held.checked) >= FILE_RECHECK
            && modified(path) != held.modified
        {
            return None;
        }
        Some(held.token.clone())
    }

    fn unexpired(&self) -> Option<Secret> {
        let held = self.lock();
        let held = held.as_ref()?;
        (Instant::now() < held.expires_at).then(|| held.token.clone())
    }

    async fn fetch(&self) -> Result<Held, CredentialError> {
        self.fetches.fetch_add(1, Ordering::Relaxed);
        match &self.source {
            CredentialSource::TokenFile(path) => read_token_file(path),
            CredentialSource::ClientCredentials(client) => {
                let url = redact_url(&client.token_url);
                tokio::time::timeout(FETCH_TIMEOUT, client_credentials(&self.http, client))
                    .await
                    .unwrap_or(Err(CredentialError::Timeout {
                        url,
                        after: FETCH_TIMEOUT,
                    }))
            }
        }
    }
}

/// The HTTP client of token requests: no redirects (a token endpoint that redirects is
/// misconfigured, and a redirect must not carry a secret elsewhere).
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(FETCH_TIMEOUT)
        .build()
        .unwrap_or_default()
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

fn read_token_file(path: &Path) -> Result<Held, CredentialError> {
    let failed = |why: String| CredentialError::File {
        path: path.display().to_string(),
        why,
    };
    let text = std::fs::read_to_string(path).map_err(|e| failed(e.to_string()))?;
    let token = text.trim();
    if token.is_empty() || token.len() > MAX_TOKEN_BYTES || token.contains(char::is_whitespace) {
        return Err(failed("it does not hold one token".to_owned()));
    }
    let now = Instant::now();
    Ok(Held {
        token: Secret::new(token),
        // A file's token is used until the file changes.
        refresh_at: now + Duration::from_hours(24 * 365),
        expires_at: now + Duration::from_hours(24 * 365),
        modified: modified(path),
        checked: now,
    })
}

/// When to fetch again a token that lives `lifetime`.
fn held_for(token: Secret, lifetime: Duration) -> Held {
    let now = Instant::now();
    let ahead = REFRESH_AHEAD.min(lifetime / 2);
    Held {
        token,
        refresh_at: now + lifetime.saturating_sub(ahead),
        expires_at: now + lifetime,
        modified: None,
        checked: now,
    }
}

async fn client_credentials(
    http: &reqwest::Client,
    client: &OAuthClient,
) -> Result<Held, CredentialError> {
    let url = redact_url(&client.token_url);
    let token_url = TokenUrl::new(client.token_url.clone())
        .map_err(|_| CredentialError::BadUrl { url: url.clone() })?;
    let oauth = BasicClient::new(ClientId::new(client.client_id.clone()))
        .set_client_secret(ClientSecret::new(client.client_secret.expose().to_owned()))
        .set_auth_type(AuthType::BasicAuth)
        .set_token_uri(token_url);
    let mut request = oauth.exchange_client_credentials();
    if let Some(scope) = &client.scope {
        request = request.add_scopes(scope.split_whitespace().map(|s| Scope::new(s.to_owned())));
    }
    if let Some(audience) = &client.audience {
        request = request.add_extra_param("audience", audience.clone());
    }
    let token = request
        .request_async(&Http(http))
        .await
        .map_err(|e| match e {
            oauth2::RequestTokenError::ServerResponse(answer) => CredentialError::Refused {
                url: url.clone(),
                error: answer.error().as_ref().to_owned(),
                description: answer.error_description().cloned(),
            },
            oauth2::RequestTokenError::Request(failure) => failure.at(&url),
            oauth2::RequestTokenError::Parse(..) | oauth2::RequestTokenError::Other(_) => {
                CredentialError::Malformed { url: url.clone() }
            }
        })?;
    let secret = token.access_token().secret();
    if secret.is_empty() || secret.len() > MAX_TOKEN_BYTES {
        return Err(CredentialError::Malformed { url });
    }
    Ok(held_for(
        Secret::new(secret.clone()),
        token.expires_in().unwrap_or(DEFAULT_LIFETIME),
    ))
}

/// A token request that failed on the way.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SendFailure(String);

impl SendFailure {
    fn at(&self, url: &str) -> CredentialError {
        CredentialError::Unreachable {
            url: url.to_owned(),
            why: self.0.clone(),
        }
    }
}

/// `oauth2`'s HTTP client: reqwest, one request at a time, its answer bounded.
struct Http<'h>(&'h reqwest::Client);

impl<'c> oauth2::AsyncHttpClient<'c> for Http<'_> {
    type Error = SendFailure;
    type Future = std::pin::Pin<
        Box<
            dyn std::future::Future<Output = Result<oauth2::HttpResponse, SendFailure>> + Send + 'c,
        >,
    >;

    fn call(&'c self, request: oauth2::HttpRequest) -> Self::Future {
        Box::pin(send(self.0, request))
    }
}

/// One request through reqwest, its body bounded.
async fn send(
    http: &reqwest::Client,
    request: oauth2::HttpRequest,
) -> Result<oauth2::HttpResponse, SendFailure> {
    let (parts, body) = request.into_parts();
    let response = http
        .request(parts.method, parts.uri.to_string())
        .headers(parts.headers)
        .body(body)
        .send()
        .await
        .map_err(|e| SendFailure(crate::error_chain::error_chain(&e.without_url())))?;
    let status = response.status();
    let headers = response.headers().clone();
    let body = response
        .bytes()
        .await
        .map_err(|e| SendFailure(crate::error_chain::error_chain(&e.without_url())))?;
    if body.len() > MAX_TOKEN_BYTES * 2 {
        return Err(SendFailure("the answer is too large".to_owned()));
    }
    let mut answer = http::Response::new(body.to_vec());
    *answer.status_mut() = status;
    *answer.headers_mut() = headers;
    Ok(answer)
}

#[cfg(test)]
mod tests;
