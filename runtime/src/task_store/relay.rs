//! What replicas sharing a NATS KV task store tell each other, as NATS messages on the same
//! connection: the live events of a running task, and requests to the replica running it.
//!
//! | subject | what |
//! |---|---|
//! | `daedalus.tasks.<token>.events` | each event of a running turn, with its sequence number |
//! | `daedalus.tasks.<token>.now` | request: the replica running the task answers it as it stands and the sequence number it is at |
//! | `daedalus.tasks.<token>.cancel` | request: the replica running the task cancels it and answers the task as it ended |
//!
//! `<token>` is the task id's bounded, encoded token; a request carries the id itself as its
//! payload. Every replica listens on the two request
//! subjects of every task; only the one running a task answers, so a request nobody answers
//! within [`ASK_TIMEOUT`] means no replica runs the task. A subscriber on another replica
//! subscribes to the events first, then asks `now`: events at or below the sequence number it
//! is answered are already in the task, later ones follow, and none falls in between.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use daedalus_contract::{StreamEvent, Task};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

/// How long a request waits for the replica running the task.
pub const ASK_TIMEOUT: Duration = Duration::from_secs(2);

const PREFIX: &str = "daedalus.tasks";

/// One event on the events subject.
#[derive(Debug, Serialize, Deserialize)]
pub struct RelayedEvent {
    pub seq: u64,
    pub event: StreamEvent,
}

/// The answer to `now`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Standing {
    pub seq: u64,
    pub task: Task,
}

/// What the replica running a task answers for it.
#[async_trait]
pub trait RelayHandler: Send + Sync + 'static {
    /// The task as it stands and its sequence number, if this replica runs it.
    fn now(&self, task_id: &str) -> Option<Standing>;
    /// Cancels the task if this replica runs it; the task as it ended.
    async fn cancel(&self, task_id: &str) -> Option<Task>;
}

fn subject(task_id: &str, what: &str) -> String {
    format!(
        "{PREFIX}.{}.{what}",
        daedalus_contract::token::token(task_id)
    )
}

/// The task's token in a request subject, and which request it is.
fn parse_request(subject: &str) -> Option<(&str, &str)> {
    let rest = subject.strip_prefix(PREFIX)?.strip_prefix('.')?;
    rest.rsplit_once('.')
}

/// The NATS side of a shared task store.
#[derive(Debug, Clone)]
pub struct Relay {
    client: async_nats::Client,
    outbox: mpsc::UnboundedSender<(String, Bytes)>,
}

impl Relay {
    /// A relay over `client`; its publisher runs until the relay and its clones are gone.
    pub fn new(client: async_nats::Client) -> Self {
        let (outbox, mut queue) = mpsc::unbounded_channel::<(String, Bytes)>();
        let publisher = client.clone();
        // One publisher, so a task's events leave in the order they happened.
        tokio::spawn(async move {
            while let Some((subject, payload)) = queue.recv().await {
                if let Err(e) = publisher.publish(subject, payload).await {
                    tracing::warn!(error = %e, "a task event could not be relayed to other replicas");
                }
            }
        });
        Self { client, outbox }
    }

    /// Tells other replicas event number `seq` of task `task_id`.
    pub fn publish(&self, task_id: &str, seq: u64, event: &StreamEvent) {
        let relayed = RelayedEvent {
            seq,
            event: event.clone(),
        };
        if let Ok(payload) = serde_json::to_vec(&relayed) {
            let _ = self
                .outbox
                .send((subject(task_id, "events"), payload.into()));
        }
    }

    /// Subscribes to task `task_id`'s events.
    pub async fn events(&self, task_id: &str) -> Option<async_nats::Subscriber> {
        self.client.subscribe(subject(task_id, "events")).await.ok()
    }

    /// Asks the replica running `task_id` for it as it stands; `None` when none answers.
    pub async fn ask_now(&self, task_id: &str) -> Option<Standing> {
        let answer = self.ask(task_id, "now").await?;
        daedalus_contract::read::from_slice(&answer).ok()
    }

    /// Asks the replica running `task_id` to cancel it; `None` when none answers.
    pub async fn ask_cancel(&self, task_id: &str) -> Option<Task> {
        let answer = self.ask(task_id, "cancel").await?;
        daedalus_contract::read::from_slice(&answer).ok()
    }

    async fn ask(&self, task_id: &str, what: &str) -> Option<Bytes> {
        // The id itself rides in the payload: the subject holds only its token.
        let request = self
            .client
            .request(subject(task_id, what), Bytes::from(task_id.to_owned()));
        match tokio::time::timeout(ASK_TIMEOUT, request).await {
            Ok(Ok(message)) if !message.payload.is_empty() => Some(message.payload),
            _ => None,
        }
    }

    /// Answers the requests about the tasks `handler` runs, until the connection closes.
    pub async fn serve(&self, handler: Arc<dyn RelayHandler>) -> Result<(), async_nats::Error> {
        let mut requests = self.client.subscribe(format!("{PREFIX}.*.now")).await?;
        let mut cancels = self.client.subscribe(format!("{PREFIX}.*.cancel")).await?;
        loop {
            let message = tokio::select! {
                Some(m) = requests.next() => m,
                Some(m) = cancels.next() => m,
                else => return Ok(()),
            };
            let Some(reply) = message.reply.clone() else {
                continue;
            };
            let Some((token, what)) = parse_request(&message.subject) else {
                continue;
            };
            let Ok(task_id) = std::str::from_utf8(&message.payload) else {
                continue;
            };
            if daedalus_contract::token::token(task_id) != token {
                continue;
            }
            let task_id = task_id.to_owned();
            let handler = Arc::clone(&handler);
            let client = self.client.clone();
            let what = what.to_owned();
            tokio::spawn(async move {
                let answer = match what.as_str() {
                    "now" => handler
                        .now(&task_id)
                        .and_then(|s| serde_json::to_vec(&s).ok()),
                    "cancel" => handler
                        .cancel(&task_id)
                        .await
                        .and_then(|t| serde_json::to_vec(&t).ok()),
                    _ => None,
                };
                // Only the replica running the task answers.
                if let Some(answer) = answer {
                    let _ = client.publish(reply, answer.into()).await;
                }
            });
        }
    }
}
