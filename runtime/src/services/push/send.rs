//! One delivery to one webhook: a POST of the payload with the webhook's credentials, tried
//! again with backoff while the webhook cannot take it, until it does or [`Sender::retry_for`]
//! has passed since the first try.
//!
//! A `2xx` answer is delivered. A `408`, `425`, `429`, `5xx`, a timeout or a connection that
//! fails is tried again. Any other answer (a `4xx` saying the webhook will not take it, a
//! redirect, which is never followed) and a URL the SSRF guard refuses are given up at once:
//! asking again would get the same answer.

use std::time::{Duration, Instant};

use bytes::Bytes;
use daedalus_contract::AuthenticationInfo;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use tokio_util::sync::CancellationToken;

/// The header carrying a config's `token` (A2A §13.2).
pub const TOKEN_HEADER: &str = "X-A2A-Notification-Token";

/// Where a delivery goes and how it authenticates.
#[derive(Debug, Clone)]
pub struct Target {
    pub url: reqwest::Url,
    pub token: Option<String>,
    pub authentication: Option<AuthenticationInfo>,
}

impl Target {
    /// The URL as logs and health may show it: scheme, host and port (no path, no query,
    /// which may carry secrets).
    pub fn shown(&self) -> String {
        let port = self.url.port().map(|p| format!(":{p}")).unwrap_or_default();
        format!(
            "{}://{}{port}",
            self.url.scheme(),
            self.url.host_str().unwrap_or_default()
        )
    }
}

/// How a delivery ended (each retry was told as it was made).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// The webhook took it.
    Delivered,
    /// The webhook did not take it: why.
    GaveUp { why: String },
    /// Shutdown stopped it (the state is delivered after a restart, from the store).
    Stopped,
}

/// Sends payloads to webhooks.
#[derive(Debug, Clone)]
pub struct Sender {
    http: reqwest::Client,
    /// How long a webhook may keep failing before a delivery is given up.
    pub retry_for: Duration,
}

/// The first pause between two tries; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(250);
/// Short enough that a webhook back from an outage gets what waited within seconds.
const MAX_PAUSE: Duration = Duration::from_secs(5);

/// What one try found.
enum Tried {
    Delivered,
    Again(String),
    Never(String),
}

impl Sender {
    pub fn new(http: reqwest::Client, retry_for: Duration) -> Self {
        Self { http, retry_for }
    }

    /// Delivers `body` to `target` (see the module), unless `stop` fires first; `retrying` is
    /// told of each retry as it is made, so a webhook that is down shows in the counts while
    /// it is down, not when the delivery ends.
    pub async fn deliver(
        &self,
        target: &Target,
        body: &Bytes,
        stop: &CancellationToken,
        retrying: &(dyn Fn() + Sync),
    ) -> Delivery {
        let started = Instant::now();
        let mut pause = FIRST_PAUSE;
        let mut retries = 0;
        loop {
            let tried = tokio::select! {
                tried = self.try_once(target, body) => tried,
                () = stop.cancelled() => return Delivery::Stopped,
            };
            let why = match tried {
                Tried::Delivered => return Delivery::Delivered,
                Tried::Never(why) => return Delivery::GaveUp { why },
                Tried::Again(why) => why,
            };
            if started.elapsed() + pause > self.retry_for {
                return Delivery::GaveUp {
                    why: format!("{why} (still failing after {retries} retries)"),
                };
            }
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = stop.cancelled() => return Delivery::Stopped,
            }
            pause = (pause * 2).min(MAX_PAUSE);
            retries += 1;
            retrying();
        }
    }

    async fn try_once(&self, target: &Target, body: &Bytes) -> Tried {
        let mut request = self
            .http
            .post(target.url.clone())
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .body(body.clone());
        if let Some(auth) = &target.authentication {
            let value = if auth.credentials.is_empty() {
                auth.scheme.clone()
            } else {
                format!("{} {}", auth.scheme, auth.credentials)
            };
            match HeaderValue::from_str(&value) {
                Ok(mut value) => {
                    value.set_sensitive(true);
                    request = request.header(AUTHORIZATION, value);
                }
                Err(_) => return Tried::Never("the authentication is not a valid header".into()),
            }
        }
        if let Some(token) = &target.token {
            match HeaderValue::from_str(token) {
                Ok(mut value) => {
                    value.set_sensitive(true);
                    request = request.header(TOKEN_HEADER, value);
                }
                Err(_) => return Tried::Never("the token is not a valid header".into()),
            }
        }
        match request.send().await {
            Ok(answer) => {
                let status = answer.status();
                if status.is_success() {
                    Tried::Delivered
                } else if status.is_server_error() || matches!(status.as_u16(), 408 | 425 | 429) {
                    Tried::Again(format!("the webhook answered {status}"))
                } else {
                    Tried::Never(format!("the webhook answered {status}"))
                }
            }
            Err(e) => {
                // The guard's refusal is the resolver's error: asking again gets it again.
                let refused = std::error::Error::source(&e)
                    .into_iter()
                    .flat_map(|s| std::iter::successors(Some(s), |s| s.source()))
                    .find_map(|s| s.downcast_ref::<super::guard::GuardError>().cloned());
                match refused {
                    Some(refusal) => Tried::Never(refusal.to_string()),
                    None if e.is_timeout() => {
                        Tried::Again("the webhook did not answer in time".into())
                    }
                    None => Tried::Again(format!(
                        "the webhook could not be reached ({})",
                        daedalus_contract::redact::redact_text(&e.without_url().to_string())
                    )),
                }
            }
        }
    }
}
