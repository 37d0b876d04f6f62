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

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use daedalus_contract::{StreamEvent, Task};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, mpsc};

/// How long a `now` request waits for its replica.
pub const ASK_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a `cancel` request waits: its replica stops the turn and stores its end first.
pub const CANCEL_TIMEOUT: Duration = Duration::from_secs(9);
/// Bytes of relayed events a follower that reads slowly may have waiting; past it events are
/// dropped, and the follower, finding a gap in their sequence numbers, takes the task as it
/// stands again.
pub const FEED_BYTES: usize = 1 << 20;

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
    pub async fn events(&self, task_id: &str) -> Option<Feed> {
        let subscriber = self
            .client
            .subscribe(self.events_subject(task_id))
            .await
            .ok()?;
        Some(Feed::new(subscriber))
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

/// One task's relayed events, read off NATS as they arrive into a queue of at most
/// [`FEED_BYTES`], so a follower that reads slowly (or not at all) holds a bounded number of
/// bytes whatever the turn says.
#[derive(Debug)]
pub struct Feed {
    queue: Arc<Mutex<Queue>>,
    ready: Arc<Notify>,
    pump: tokio::task::JoinHandle<()>,
}

#[derive(Debug, Default)]
struct Queue {
    events: VecDeque<(RelayedEvent, usize)>,
    bytes: usize,
    /// The subscription ended.
    closed: bool,
}

impl Feed {
    fn new(mut subscriber: async_nats::Subscriber) -> Self {
        let queue: Arc<Mutex<Queue>> = Arc::default();
        let ready = Arc::new(Notify::new());
        let pump = tokio::spawn({
            let (queue, ready) = (Arc::clone(&queue), Arc::clone(&ready));
            async move {
                while let Some(message) = subscriber.next().await {
                    let Ok(relayed) =
                        daedalus_contract::read::from_slice::<RelayedEvent>(&message.payload)
                    else {
                        continue;
                    };
                    let size = message.payload.len();
                    let mut queue = queue.lock().unwrap_or_else(PoisonError::into_inner);
                    if queue.bytes + size > FEED_BYTES {
                        continue;
                    }
                    queue.bytes += size;
                    queue.events.push_back((relayed, size));
                    drop(queue);
                    ready.notify_one();
                }
                queue.lock().unwrap_or_else(PoisonError::into_inner).closed = true;
                ready.notify_one();
            }
        });
        Self { queue, ready, pump }
    }

    /// The next event relayed; `None` once the subscription has ended.
    pub async fn next(&mut self) -> Option<RelayedEvent> {
        loop {
            {
                let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
                if let Some((event, size)) = queue.events.pop_front() {
                    queue.bytes -= size;
                    return Some(event);
                }
                if queue.closed {
                    return None;
                }
            }
            self.ready.notified().await;
        }
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.pump.abort();
    }
}
