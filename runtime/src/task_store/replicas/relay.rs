//! What replicas sharing a NATS KV task store tell each other, as core NATS messages on the
//! store's connection (every subject under the bucket's name, so two deployments sharing one
//! NATS server never hear each other):
//!
//! | subject | what |
//! |---|---|
//! | `daedalus.<bucket>.tasks.<task token>.events` | each event of a turn, with its sequence number in the running replica's log |
//! | `daedalus.<bucket>.replicas.<replica token>.now` | request to one replica: the task (id in the payload) as it stands and its sequence number, if a turn of it runs there |
//! | `daedalus.<bucket>.replicas.<replica token>.cancel` | request to one replica: stop the task's turn and answer how it ended (the end stored, whichever won) |
//!
//! Requests go to the replica the store names as the task's writer, and every replica
//! answers each request it gets (`notRunning` when no turn of the task runs there). A replica
//! that is gone has no subscription, so NATS answers "no responders" at once: nobody waits on
//! a dead replica. A subscriber on another replica subscribes to the events first, then asks
//! `now`: events at or below the sequence number it is answered are in the task already,
//! later ones follow, and none falls in between.

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use daedalus_contract::{StreamEvent, Task};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

/// How long a `now` request waits for its replica.
pub const ASK_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a `cancel` request waits: its replica stops the turn and stores its end first.
pub const CANCEL_TIMEOUT: Duration = Duration::from_secs(9);

/// One event on the events subject.
#[derive(Debug, Serialize, Deserialize)]
pub struct RelayedEvent {
    pub seq: u64,
    pub event: StreamEvent,
}

/// A replica's answer to `now`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "camelCase")]
#[expect(
    clippy::large_enum_variant,
    reason = "made once per request and taken apart at once; a box would only add an allocation"
)]
pub enum Now {
    /// A turn of the task runs here: the task as it stands, at this sequence number.
    Running { seq: u64, task: Task },
    /// No turn of the task runs here.
    NotRunning,
}

/// A replica's answer to `cancel` (and what stopping a turn here found).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "camelCase")]
#[expect(
    clippy::large_enum_variant,
    reason = "made once per request and taken apart at once; a box would only add an allocation"
)]
pub enum Stopped {
    /// The turn stopped, and its task stands stored as this: canceled if the cancel won, else
    /// the end the turn stored first.
    Ended { task: Task },
    /// The turn did not stop in time.
    TooSlow,
    /// No turn of the task runs here.
    NotRunning,
}

/// Why a request got no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AskError {
    /// Nobody listens for that replica: it is gone.
    #[error("the replica is not connected")]
    NoResponders,
    /// It did not answer in time, or answered something unreadable.
    #[error("the replica did not answer")]
    NoAnswer,
}

/// What this replica answers other replicas.
#[async_trait]
pub trait Answers: Send + Sync + 'static {
    /// Where the turn of `task_id` running here stands.
    fn now(&self, task_id: &str) -> Now;
    /// Stops the turn of `task_id` running here; how it ended.
    async fn cancel(&self, task_id: &str) -> Stopped;
}

/// The NATS side of a shared task store.
#[derive(Debug, Clone)]
pub struct Relay {
    client: async_nats::Client,
    /// `daedalus.<bucket>`.
    prefix: String,
    outbox: mpsc::UnboundedSender<(String, Bytes)>,
}

impl Relay {
    /// A relay over `client` for the store in `bucket`; its publisher runs until the relay
    /// and its clones are gone.
    pub fn new(client: async_nats::Client, bucket: &str) -> Self {
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
        Self {
            client,
            prefix: format!("daedalus.{bucket}"),
            outbox,
        }
    }

    fn events_subject(&self, task_id: &str) -> String {
        format!(
            "{}.tasks.{}.events",
            self.prefix,
            daedalus_contract::token::token(task_id)
        )
    }

    fn request_subject(&self, replica: &str, what: &str) -> String {
        format!(
            "{}.replicas.{}.{what}",
            self.prefix,
            daedalus_contract::token::token(replica)
        )
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
                .send((self.events_subject(task_id), payload.into()));
        }
    }

    /// Subscribes to task `task_id`'s events.
    pub async fn events(&self, task_id: &str) -> Option<async_nats::Subscriber> {
        self.client
            .subscribe(self.events_subject(task_id))
            .await
            .ok()
    }

    /// Asks `replica` where the turn of `task_id` running there stands.
    pub async fn ask_now(&self, replica: &str, task_id: &str) -> Result<Now, AskError> {
        let answer = self.ask(replica, "now", task_id, ASK_TIMEOUT).await?;
        daedalus_contract::read::from_slice(&answer).map_err(|_| AskError::NoAnswer)
    }

    /// Asks `replica` to stop the turn of `task_id` running there.
    pub async fn ask_cancel(&self, replica: &str, task_id: &str) -> Result<Stopped, AskError> {
        let answer = self.ask(replica, "cancel", task_id, CANCEL_TIMEOUT).await?;
        daedalus_contract::read::from_slice(&answer).map_err(|_| AskError::NoAnswer)
    }

    async fn ask(
        &self,
        replica: &str,
        what: &str,
        task_id: &str,
        within: Duration,
    ) -> Result<Bytes, AskError> {
        // The id itself rides in the payload: the subject holds only tokens.
        let request = self.client.request(
            self.request_subject(replica, what),
            Bytes::from(task_id.to_owned()),
        );
        match tokio::time::timeout(within, request).await {
            Ok(Ok(message)) => Ok(message.payload),
            Ok(Err(e)) if e.kind() == async_nats::RequestErrorKind::NoResponders => {
                Err(AskError::NoResponders)
            }
            Ok(Err(_)) | Err(_) => Err(AskError::NoAnswer),
        }
    }

    /// Answers the requests made to replica `me`, until the connection closes.
    pub async fn serve(
        &self,
        me: &str,
        answers: std::sync::Arc<dyn Answers>,
    ) -> Result<(), async_nats::Error> {
        let mut nows = self
            .client
            .subscribe(self.request_subject(me, "now"))
            .await?;
        let mut cancels = self
            .client
            .subscribe(self.request_subject(me, "cancel"))
            .await?;
        loop {
            let (message, cancel) = tokio::select! {
                Some(m) = nows.next() => (m, false),
                Some(m) = cancels.next() => (m, true),
                else => return Ok(()),
            };
            let Some(reply) = message.reply.clone() else {
                continue;
            };
            let Ok(task_id) = std::str::from_utf8(&message.payload) else {
                continue;
            };
            let task_id = task_id.to_owned();
            let answers = std::sync::Arc::clone(&answers);
            let client = self.client.clone();
            tokio::spawn(async move {
                let answer = if cancel {
                    serde_json::to_vec(&answers.cancel(&task_id).await)
                } else {
                    serde_json::to_vec(&answers.now(&task_id))
                };
                if let Ok(answer) = answer {
                    let _ = client.publish(reply, answer.into()).await;
                }
            });
        }
    }
}
