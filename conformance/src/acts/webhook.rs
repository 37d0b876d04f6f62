//! The runner's own webhook receiver, for the push-delivery tests (`runner-special`: the
//! corpus only sets a push config at `{{webhookUrl}}`; the runner must receive what the
//! server then delivers and judge it).
//!
//! Each test on each binding gets a URL of its own (`/hooks/<binding>/<test id>`), so one
//! test's deliveries are never another's. What arrives is kept in memory, bounded in bytes;
//! every request is answered `200` (a receiver that refused would make the server retry, and
//! the tests ask what it sends, not how it retries).
//!
//! What each delivery test then asks of the deliveries ([`expectation`]):
//!
//! | test | the deliveries |
//! |---|---|
//! | `PUSH-DELIV-001`, `SEC-PUSH-001` | at least one; every one carries the config's credentials (`Authorization: Bearer test-token`) |
//! | `SEC-PUSH-002` | the same with `expected-token`: what lets a webhook tell the server's deliveries from forged ones |
//! | `PUSH-DELIV-002` | the task's terminal state arrives (at least once) |
//! | `PUSH-DELIV-003` | each body is an A2A v1 `StreamResponse` about the test's task |

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use bytes::Bytes;
use serde_json::Value;
use tokio::sync::Notify;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::corpus::Binding;

/// Bytes of deliveries kept, in all; past it, later ones are counted but not kept.
const KEPT_BYTES: usize = 8 << 20;
/// The largest delivery body read.
const BODY_LIMIT: usize = 1 << 20;

/// One request the server under test sent to a test's webhook.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// Its `Authorization` header, if it had one (as text).
    pub authorization: Option<String>,
    /// Its body, as JSON (`Value::Null` when it was not JSON).
    pub body: Value,
}

/// Deliveries by webhook key, and the bytes they hold.
#[derive(Debug, Default)]
struct Received {
    by_key: HashMap<String, Vec<Delivery>>,
    bytes: usize,
}

#[derive(Debug, Default)]
struct Shared {
    received: Mutex<Received>,
    arrived: Notify,
}

/// A running receiver; it stops when dropped.
#[derive(Debug)]
pub struct WebhookReceiver {
    shared: Arc<Shared>,
    /// The base URL the server under test posts to.
    public: String,
    _stop: DropGuard,
}

/// Why the receiver could not start.
#[derive(Debug, thiserror::Error)]
#[error("the webhook receiver cannot listen on {listen}: {source}")]
pub struct ReceiverError {
    listen: SocketAddr,
    source: std::io::Error,
}

impl WebhookReceiver {
    /// Listens on `listen`; the server under test reaches it at `public` (a base URL), or,
    /// without one, at the address bound.
    pub async fn start(listen: SocketAddr, public: Option<&str>) -> Result<Self, ReceiverError> {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|source| ReceiverError { listen, source })?;
        let bound = listener
            .local_addr()
            .map_err(|source| ReceiverError { listen, source })?;
        let shared = Arc::new(Shared::default());
        let app = axum::Router::new()
            .route("/hooks/{binding}/{test}", axum::routing::post(receive))
            .layer(axum::extract::DefaultBodyLimit::max(BODY_LIMIT))
            .with_state(Arc::clone(&shared));
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        tokio::spawn(async move {
            // A receiver that stops early leaves the tests waiting on it to fail by their
            // deadline, saying nothing arrived.
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(stopped.cancelled_owned())
                .await;
        });
        let public = public.map_or_else(
            || format!("http://{bound}"),
            |p| p.trim_end_matches('/').to_owned(),
        );
        Ok(Self {
            shared,
            public,
            _stop: stop.drop_guard(),
        })
    }

    /// The webhook URL of `test` on `binding`.
    pub fn url_for(&self, binding: Binding, test: &str) -> String {
        format!("{}/hooks/{}/{}", self.public, binding.as_str(), test)
    }

    /// Waits until the deliveries of `test` on `binding` satisfy `done`, or `deadline`
    /// passes; the deliveries as they then stand.
    pub async fn wait(
        &self,
        binding: Binding,
        test: &str,
        deadline: Duration,
        done: impl Fn(&[Delivery]) -> bool,
    ) -> Vec<Delivery> {
        let key = key(binding.as_str(), test);
        let until = tokio::time::Instant::now() + deadline;
        loop {
            let arrived = self.shared.arrived.notified();
            let now = self.deliveries(&key);
            if done(&now) || tokio::time::Instant::now() >= until {
                return now;
            }
            let _ = tokio::time::timeout_at(until, arrived).await;
        }
    }

    fn deliveries(&self, key: &str) -> Vec<Delivery> {
        let received = self
            .shared
            .received
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        received.by_key.get(key).cloned().unwrap_or_default()
    }
}

fn key(binding: &str, test: &str) -> String {
    format!("{binding}/{test}")
}

async fn receive(
    State(shared): State<Arc<Shared>>,
    Path((binding, test)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let delivery = Delivery {
        authorization: headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    {
        let mut received = shared
            .received
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if received.bytes + body.len() <= KEPT_BYTES {
            received.bytes += body.len();
            received
                .by_key
                .entry(key(&binding, &test))
                .or_default()
                .push(delivery);
        }
    }
    shared.arrived.notify_waiters();
    StatusCode::OK
}

/// What a delivery test asks of the deliveries it caused, by its id; `None` for a test that
/// only sets push configs up.
pub fn expectation(test: &str) -> Option<Expectation> {
    Some(match test {
        "PUSH-DELIV-001" | "SEC-PUSH-001" => Expectation::Credentials("Bearer test-token"),
        "SEC-PUSH-002" => Expectation::Credentials("Bearer expected-token"),
        "PUSH-DELIV-002" => Expectation::TerminalState,
        "PUSH-DELIV-003" => Expectation::StreamResponses,
        _ => return None,
    })
}

/// What a delivery test asks of its deliveries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expectation {
    /// At least one, each with exactly these credentials.
    Credentials(&'static str),
    /// The task's terminal state, at least once.
    TerminalState,
    /// Each an A2A v1 `StreamResponse` about the test's task.
    StreamResponses,
}

const TERMINAL: [&str; 4] = [
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_REJECTED",
];

/// The state a delivered `StreamResponse` carries, if it carries one.
fn state_of(body: &Value) -> Option<&str> {
    body.get("task")
        .or_else(|| body.get("statusUpdate"))
        .and_then(|o| o.get("status"))
        .and_then(|s| s.get("state"))
        .and_then(Value::as_str)
}

/// The task a delivered `StreamResponse` is about.
fn task_of(body: &Value) -> Option<&str> {
    body.get("task")
        .and_then(|t| t.get("id"))
        .or_else(|| {
            ["statusUpdate", "artifactUpdate"]
                .iter()
                .find_map(|k| body.get(*k)?.get("taskId"))
        })
        .and_then(Value::as_str)
}

impl Expectation {
    /// Whether the deliveries so far settle it (the runner stops waiting): the task's
    /// terminal state arrived, so everything before it has too.
    pub fn settled(self, deliveries: &[Delivery]) -> bool {
        deliveries
            .iter()
            .any(|d| state_of(&d.body).is_some_and(|s| TERMINAL.contains(&s)))
    }

    /// Why the deliveries do not meet it, if they do not; `task` is the test's task id.
    pub fn judge(self, deliveries: &[Delivery], task: Option<&str>) -> Result<(), String> {
        if deliveries.is_empty() {
            return Err("no push notification arrived at the test's webhook".into());
        }
        match self {
            Self::Credentials(wanted) => {
                match deliveries
                    .iter()
                    .find(|d| d.authorization.as_deref() != Some(wanted))
                {
                    Some(d) => Err(format!(
                        "a push notification came with Authorization {}; the config asked for {wanted:?}",
                        d.authorization
                            .as_deref()
                            .map_or_else(|| "absent".to_owned(), |_| "of other credentials".into())
                    )),
                    None => Ok(()),
                }
            }
            Self::TerminalState => {
                if self.settled(deliveries) {
                    Ok(())
                } else {
                    let states: Vec<&str> = deliveries
                        .iter()
                        .filter_map(|d| state_of(&d.body))
                        .collect();
                    Err(format!(
                        "the task's terminal state never arrived; the states delivered: {states:?}"
                    ))
                }
            }
            Self::StreamResponses => {
                for delivery in deliveries {
                    if let Err(e) =
                        daedalus_contract::Schema::A2aV1StreamResponse.validate(&delivery.body)
                    {
                        return Err(format!(
                            "a push notification is not an A2A v1 StreamResponse ({e}): {}",
                            delivery.body
                        ));
                    }
                    if task.is_some() && task_of(&delivery.body) != task {
                        return Err(format!(
                            "a push notification is about task {:?}, not the test's {:?}",
                            task_of(&delivery.body),
                            task
                        ));
                    }
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn delivery(authorization: Option<&str>, body: Value) -> Delivery {
        Delivery {
            authorization: authorization.map(str::to_owned),
            body,
        }
    }

    #[test]
    fn credentials_must_be_on_every_delivery_and_never_shown() {
        let end = json!({"statusUpdate": {"taskId": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_COMPLETED"}}});
        let wanted = Expectation::Credentials("Bearer test-token");
        assert_eq!(
            wanted.judge(
                &[delivery(Some("Bearer test-token"), end.clone())],
                Some("t")
            ),
            Ok(())
        );
        let wrong = wanted
            .judge(
                &[
                    delivery(Some("Bearer test-token"), end.clone()),
                    delivery(Some("Bearer s3cret"), end.clone()),
                ],
                Some("t"),
            )
            .expect_err("other credentials");
        assert!(!wrong.contains("s3cret"), "{wrong}");
        assert!(wanted.judge(&[delivery(None, end)], Some("t")).is_err());
        assert!(wanted.judge(&[], Some("t")).is_err());
    }

    #[test]
    fn a_terminal_state_settles_and_payloads_must_be_stream_responses_of_the_task() {
        let working = json!({"statusUpdate": {"taskId": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_WORKING"}}});
        let done = json!({"task": {"id": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_COMPLETED"}}});
        assert!(!Expectation::TerminalState.settled(&[delivery(None, working.clone())]));
        assert!(
            Expectation::TerminalState
                .judge(&[delivery(None, working.clone())], None)
                .is_err()
        );
        let both = [delivery(None, working), delivery(None, done)];
        assert_eq!(Expectation::TerminalState.judge(&both, None), Ok(()));
        assert_eq!(Expectation::StreamResponses.judge(&both, Some("t")), Ok(()));
        assert!(
            Expectation::StreamResponses
                .judge(&both, Some("another"))
                .is_err()
        );
        let contract_dialect = json!({"statusUpdate": {"taskId": "t", "contextId": "c",
            "status": {"state": "completed"}, "final": true}});
        assert!(
            Expectation::StreamResponses
                .judge(&[delivery(None, contract_dialect)], Some("t"))
                .is_err()
        );
    }

    #[tokio::test]
    async fn deliveries_are_kept_per_test_and_binding() {
        let receiver = WebhookReceiver::start("127.0.0.1:0".parse().unwrap(), None)
            .await
            .unwrap();
        let url = receiver.url_for(Binding::Rest, "PUSH-DELIV-001");
        let client = reqwest::Client::new();
        client
            .post(&url)
            .bearer_auth("test-token")
            .json(&json!({"task": {"id": "t"}}))
            .send()
            .await
            .unwrap();
        let got = receiver
            .wait(
                Binding::Rest,
                "PUSH-DELIV-001",
                Duration::from_secs(5),
                |d| !d.is_empty(),
            )
            .await;
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].authorization.as_deref(), Some("Bearer test-token"));
        let other = receiver
            .wait(Binding::Grpc, "PUSH-DELIV-001", Duration::ZERO, |_| false)
            .await;
        assert!(other.is_empty());
    }
}
