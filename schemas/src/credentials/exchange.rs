//! RFC 8693 token exchange: a caller's token is exchanged, at the token endpoint, for one whose
//! audience is the server about to be called, so that server sees the end user (the
//! exchanged token's `sub`) and not the client in between. Each exchanged token is kept,
//! keyed by the SHA-256 of the caller's token, until shortly before it expires; concurrent
//! calls with one caller token share one exchange. The cache is bounded in entries and bytes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use base64::Engine;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::{
    CredentialError, DEFAULT_LIFETIME, FETCH_TIMEOUT, Held, MAX_TOKEN_BYTES, OAuthClient, Secret,
    held_for,
};
use crate::redact::redact_url;

/// The grant type of a token exchange.
pub const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// The type of the token exchanged, and of the one asked for.
pub const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";
/// Exchanged tokens kept at most (whichever bound comes first).
const MAX_KEPT: usize = 10_000;
const MAX_KEPT_BYTES: usize = 16 << 20;

/// The token endpoint's answer.
#[derive(Debug, Deserialize)]
struct Issued {
    access_token: String,
    #[serde(default)]
    expires_in: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct Refused {
    error: String,
    #[serde(default)]
    error_description: Option<String>,
}

/// Exchanges callers' tokens for one audience.
#[derive(Debug)]
pub struct TokenExchange {
    client: OAuthClient,
    http: reqwest::Client,
    kept: Mutex<Kept>,
    /// One exchange at a time per caller token.
    gates: Mutex<HashMap<[u8; 32], Weak<tokio::sync::Mutex<()>>>>,
    exchanges: AtomicU64,
}

#[derive(Debug, Default)]
struct Kept {
    tokens: HashMap<[u8; 32], Held>,
    bytes: usize,
}

impl TokenExchange {
    /// Exchanges at `client.token_url`, as `client`, for `client.audience`.
    pub fn new(client: OAuthClient) -> Self {
        Self {
            client,
            http: super::client(),
            kept: Mutex::default(),
            gates: Mutex::default(),
            exchanges: AtomicU64::new(0),
        }
    }

    /// How many exchanges were made.
    pub fn exchanges(&self) -> u64 {
        self.exchanges.load(Ordering::Relaxed)
    }

    /// A token for the audience on behalf of whoever holds `subject_token`.
    pub async fn exchange(&self, subject_token: &str) -> Result<Secret, CredentialError> {
        let key: [u8; 32] = Sha256::digest(subject_token.as_bytes()).into();
        if let Some(token) = self.fresh(&key) {
            return Ok(token);
        }
        let gate = self.gate(key);
        let _exchanging = gate.lock().await;
        if let Some(token) = self.fresh(&key) {
            return Ok(token);
        }
        let url = redact_url(&self.client.token_url);
        let held = tokio::time::timeout(FETCH_TIMEOUT, self.request(subject_token))
            .await
            .unwrap_or(Err(CredentialError::Timeout {
                url,
                after: FETCH_TIMEOUT,
            }))?;
        let token = held.token.clone();
        self.keep(key, held);
        Ok(token)
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn fresh(&self, key: &[u8; 32]) -> Option<Secret> {
        let kept = self.kept();
        let held = kept.tokens.get(key)?;
        (Instant::now() < held.refresh_at).then(|| held.token.clone())
    }

    fn gate(&self, key: [u8; 32]) -> Arc<tokio::sync::Mutex<()>> {
        let mut gates = self.gates.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(gate) = gates.get(&key).and_then(Weak::upgrade) {
            return gate;
        }
        gates.retain(|_, g| g.strong_count() > 0);
        let gate = Arc::new(tokio::sync::Mutex::new(()));
        gates.insert(key, Arc::downgrade(&gate));
        gate
    }

    /// Keeps `held`, dropping what expired, then the tokens due first, until the bounds hold.
    fn keep(&self, key: [u8; 32], held: Held) {
        let mut kept = self.kept();
        let now = Instant::now();
        let Kept { tokens, bytes } = &mut *kept;
        tokens.retain(|_, h| {
            let live = h.expires_at > now;
            if !live {
                *bytes -= h.token.expose().len();
            }
            live
        });
        *bytes += held.token.expose().len();
        if let Some(before) = tokens.insert(key, held) {
            *bytes -= before.token.expose().len();
        }
        while tokens.len() > MAX_KEPT || *bytes > MAX_KEPT_BYTES {
            let Some(first) = tokens
                .iter()
                .min_by_key(|(_, h)| h.refresh_at)
                .map(|(k, _)| *k)
            else {
                break;
            };
            if let Some(gone) = tokens.remove(&first) {
                *bytes -= gone.token.expose().len();
            }
        }
    }

    async fn request(&self, subject_token: &str) -> Result<Held, CredentialError> {
        self.exchanges.fetch_add(1, Ordering::Relaxed);
        let url = redact_url(&self.client.token_url);
        let mut form: Vec<(&str, &str)> = vec![
            ("grant_type", GRANT_TYPE),
            ("subject_token", subject_token),
            ("subject_token_type", ACCESS_TOKEN_TYPE),
            ("requested_token_type", ACCESS_TOKEN_TYPE),
        ];
        if let Some(audience) = &self.client.audience {
            form.push(("audience", audience));
        }
        if let Some(scope) = &self.client.scope {
            form.push(("scope", scope));
        }
        let body = form
            .iter()
            .map(|(k, v)| format!("{k}={}", form_encode(v)))
            .collect::<Vec<_>>()
            .join("&");
        let credentials = base64::engine::general_purpose::STANDARD.encode(format!(
            "{}:{}",
            form_encode(&self.client.client_id),
            form_encode(self.client.client_secret.expose())
        ));
        let response = self
            .http
            .post(&self.client.token_url)
            .header(http::header::AUTHORIZATION, format!("Basic {credentials}"))
            .header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .header(http::header::ACCEPT, "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| CredentialError::Unreachable {
                url: url.clone(),
                why: crate::error_chain::error_chain(&e.without_url()),
            })?;
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| CredentialError::Unreachable {
                url: url.clone(),
                why: crate::error_chain::error_chain(&e.without_url()),
            })?;
        if !status.is_success() {
            return Err(match serde_json::from_slice::<Refused>(&bytes) {
                Ok(refused) => CredentialError::Refused {
                    url,
                    error: refused.error,
                    description: refused.error_description,
                },
                Err(_) => CredentialError::Status {
                    url,
                    status: status.as_u16(),
                },
            });
        }
        let issued: Issued = serde_json::from_slice(&bytes)
            .map_err(|_| CredentialError::Malformed { url: url.clone() })?;
        if issued.access_token.is_empty() || issued.access_token.len() > MAX_TOKEN_BYTES {
            return Err(CredentialError::Malformed { url });
        }
        Ok(held_for(
            Secret::new(issued.access_token),
            issued
                .expires_in
                .map_or(DEFAULT_LIFETIME, Duration::from_secs),
        ))
    }
}

/// `application/x-www-form-urlencoded` of one value (RFC 6749 §2.3.1 for the client's id
/// and secret too).
fn form_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => {
                out.push(char::from(byte));
            }
            b' ' => out.push('+'),
            other => {
                use std::fmt::Write;
                let _ = write!(out, "%{other:02X}");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_values_are_encoded() {
        assert_eq!(form_encode("a b&c=d/é"), "a+b%26c%3Dd%2F%C3%A9");
        assert_eq!(form_encode("Az09-._*"), "Az09-._*");
    }
}
