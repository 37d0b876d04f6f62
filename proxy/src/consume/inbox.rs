//! One worker's reply inbox: a single long-lived subscription (`_INBOX.<id>.*`) that takes the
//! answers to the worker's pull requests and to its confirmed acks. async-nats's own
//! `batch()` and `double_ack_with()` subscribe and unsubscribe for every call, which costs the
//! proxy and the server two SUB and two UNSUB per task.
//!
//! A worker asks one thing at a time, so no demultiplexer is needed: each request goes out
//! with the next token in its reply subject, and the worker reads the inbox until the answer
//! comes. Ack confirmations and pull statuses (408 expired, 409 ...) come on the reply subject
//! and are matched by token; a task comes on its stream subject, so while a pull waits any
//! task answers it. An answer that comes too late:
//! - an ack confirmed after its wait ran out changes nothing (the worker already let the server
//!   redeliver if it must) and is dropped, like a status for a pull given up;
//! - a task for a pull given up answers the next pull, or, if it comes while the worker waits
//!   for an ack confirmation, is kept and returned by the next [`Inbox::pull`] as
//!   [`Pulled::Late`] for the worker to hand back. Nothing is lost, and a worker never holds
//!   more than the one task it works on.
//!
//! Progress acks come from the lease's heartbeat, concurrently with the worker, and only for
//! tasks that outlive a third of the ack wait; they keep async-nats's own confirmed acks.

use std::collections::VecDeque;
use std::time::Duration;

use async_nats::client::PublishErrorKind;
use async_nats::jetstream::{self, AckKind, Context};
use async_nats::{HeaderMap, StatusCode, Subscriber};
use bytes::Bytes;
use futures::StreamExt;
use serde::Deserialize;
use tokio::time::Instant;

use crate::consume::durable::{Attempt, StreamPublisher};

/// How long an ack confirmation or a stream's publish ack is waited for (async-nats's default
/// for both).
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);
/// How long after its `expires` a pull is given up: the server answers by `expires`, but after
/// a crash of the server nothing comes.
pub const PULL_GRACE: Duration = Duration::from_secs(10);
/// The most late tasks kept for handing back; each pull yields one task at most, so more than
/// a few means the server answers pulls long given up, and the rest are left to redelivery.
const LATE_MAX: usize = 16;

/// What the worker waits for on its inbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Awaited {
    Pull,
    Confirmation,
}

/// A JetStream delivery (as opposed to a status or an ack confirmation).
fn is_task(message: &async_nats::Message) -> bool {
    message.status.is_none()
        && message
            .reply
            .as_ref()
            .is_some_and(|r| r.starts_with("$JS.ACK."))
}

/// How a pull ended.
#[derive(Debug)]
pub enum Pulled {
    /// A task for this pull.
    Task(jetstream::Message),
    /// A task for an earlier pull the worker had given up on: hand it back.
    Late(jetstream::Message),
    /// The pull expired with no task.
    Nothing,
}

/// Why a request through the inbox got no usable answer.
#[derive(Debug, thiserror::Error)]
pub enum InboxError {
    #[error("cannot send the request: {0}")]
    Send(#[from] async_nats::PublishError),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("the server answered {status}: {description}")]
    Status { status: u16, description: String },
    #[error("the inbox subscription ended")]
    Closed,
    #[error("the message has no reply subject: not a JetStream delivery")]
    NotJetStream,
}

/// One worker's reply inbox.
#[derive(Debug)]
pub struct Inbox {
    client: async_nats::Client,
    js: Context,
    /// `$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>`.
    pull_subject: async_nats::Subject,
    /// `_INBOX.<id>.`: a token appended makes a reply subject.
    prefix: String,
    subscription: Subscriber,
    /// How long after its `expires` a pull is given up.
    pull_grace: Duration,
    /// The token of the last request sent.
    token: u64,
    /// The body of a pull request for the `expires` it was made for (the same every time).
    pull_body: (Duration, Bytes),
    /// Tasks that arrived for pulls already given up.
    late: VecDeque<async_nats::Message>,
}

impl Inbox {
    /// Subscribes a new inbox for a worker pulling from `consumer` of `stream`; a pull with no
    /// answer `pull_grace` after its `expires` is given up ([`PULL_GRACE`] in the proxy).
    pub async fn open(
        js: &Context,
        client: &async_nats::Client,
        stream: &str,
        consumer: &str,
        pull_grace: Duration,
    ) -> Result<Self, async_nats::SubscribeError> {
        let prefix = format!("{}.", client.new_inbox());
        let subscription = client.subscribe(format!("{prefix}*")).await?;
        Ok(Self {
            client: client.clone(),
            js: js.clone(),
            pull_subject: format!("$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}").into(),
            prefix,
            subscription,
            pull_grace,
            token: 0,
            pull_body: (Duration::ZERO, Bytes::new()),
            late: VecDeque::new(),
        })
    }

    /// Asks for one task, waiting up to `expires` on the server (and the pull grace more for
    /// its answer). A task kept from an earlier pull comes first, without asking.
    pub async fn pull(&mut self, expires: Duration) -> Result<Pulled, InboxError> {
        if let Some(late) = self.late.pop_front() {
            return Ok(Pulled::Late(self.delivery(late)));
        }
        if self.pull_body.0 != expires || self.pull_body.1.is_empty() {
            let body = format!(r#"{{"batch":1,"expires":{}}}"#, expires.as_nanos());
            self.pull_body = (expires, body.into());
        }
        let reply = self.next_reply();
        self.client
            .publish_with_reply(self.pull_subject.clone(), reply, self.pull_body.1.clone())
            .await?;
        let answer = self
            .answer(Awaited::Pull, expires + self.pull_grace)
            .await?;
        match answer.status {
            None => Ok(Pulled::Task(self.delivery(answer))),
            Some(StatusCode::TIMEOUT | StatusCode::NOT_FOUND) => Ok(Pulled::Nothing),
            Some(status) => Err(InboxError::Status {
                status: status.as_u16(),
                description: answer.description.unwrap_or_default(),
            }),
        }
    }

    /// Sends `kind` for `message` and waits for the server to confirm it.
    pub async fn confirm(
        &mut self,
        message: &jetstream::Message,
        kind: AckKind,
    ) -> Result<(), InboxError> {
        let ack_subject = message.reply.clone().ok_or(InboxError::NotJetStream)?;
        let reply = self.next_reply();
        self.client
            .publish_with_reply(ack_subject, reply, kind.into())
            .await?;
        let answer = self.answer(Awaited::Confirmation, ANSWER_TIMEOUT).await?;
        match answer.status {
            // "No responders": nobody took the ack (the consumer's leader is being elected).
            Some(status) if status == StatusCode::NO_RESPONDERS || status.is_server_error() => {
                Err(InboxError::Status {
                    status: status.as_u16(),
                    description: answer.description.unwrap_or_default(),
                })
            }
            _ => Ok(()),
        }
    }

    /// The subject a request with `token` is answered on (the first request's token is 1):
    /// a test can send a request "from the past".
    pub fn reply_subject(&self, token: u64) -> String {
        format!("{}{token}", self.prefix)
    }

    fn next_reply(&mut self) -> String {
        self.token += 1;
        [self.prefix.as_str(), itoa::Buffer::new().format(self.token)].concat()
    }

    /// Reads the inbox until the answer to the last request comes. A task is delivered on its
    /// stream subject, not on the reply subject, so it cannot be told apart by token: while a
    /// pull waits, a task is its answer (if it was an earlier, given-up pull's, this pull may
    /// still deliver one, which then answers the next pull or is set aside); while an ack
    /// waits, a task is late and set aside. Anything else answers by token, or is dropped.
    async fn answer(
        &mut self,
        awaited: Awaited,
        wait: Duration,
    ) -> Result<async_nats::Message, InboxError> {
        let deadline = Instant::now() + wait;
        loop {
            let next = tokio::time::timeout_at(deadline, self.subscription.next())
                .await
                .map_err(|_| InboxError::Timeout(wait))?;
            let message = next.ok_or(InboxError::Closed)?;
            if is_task(&message) {
                if awaited == Awaited::Pull {
                    return Ok(message);
                }
                self.set_aside(message);
                continue;
            }
            let token = message
                .subject
                .strip_prefix(self.prefix.as_str())
                .and_then(|t| t.parse::<u64>().ok());
            if token == Some(self.token) {
                return Ok(message);
            }
            tracing::debug!(subject = %message.subject, "late answer dropped");
        }
    }

    /// A task that came while an ack confirmation was awaited: kept to be handed back.
    fn set_aside(&mut self, message: async_nats::Message) {
        if self.late.len() < LATE_MAX {
            tracing::warn!("a task arrived for a pull already given up; handing it back");
            self.late.push_back(message);
        } else {
            tracing::warn!("too many late tasks; this one is redelivered after the ack wait");
        }
    }

    fn delivery(&self, message: async_nats::Message) -> jetstream::Message {
        jetstream::Message {
            message,
            context: self.js.clone(),
        }
    }
}

impl StreamPublisher for Inbox {
    /// Publishes to a stream with this inbox as the reply subject; the stream's publish ack is
    /// answered like an ack confirmation.
    async fn store(&mut self, subject: &str, headers: HeaderMap, payload: Bytes) -> Attempt {
        let reply = self.next_reply();
        let sent = self
            .client
            .publish_with_reply_and_headers(subject.to_owned(), reply, headers, payload)
            .await;
        match sent {
            Ok(()) => {}
            Err(e) if e.kind() == PublishErrorKind::MaxPayloadExceeded => return Attempt::TooLarge,
            Err(e) => return Attempt::Failed(e.to_string()),
        }
        match self.answer(Awaited::Confirmation, ANSWER_TIMEOUT).await {
            Ok(answer) => read_publish_ack(&answer),
            Err(e) => Attempt::Failed(format!("publish ack: {e}")),
        }
    }

    fn max_payload(&self) -> usize {
        self.client.server_info().max_payload
    }
}

/// A stream's answer to a publish: `{"stream":…,"seq":…,"duplicate":true}` or
/// `{"error":{"code":…,"err_code":…,"description":…}}`; only what decides is read.
#[derive(Debug, Deserialize)]
struct PublishAck {
    #[serde(default)]
    duplicate: bool,
    error: Option<ApiError>,
}

#[derive(Debug, Deserialize)]
struct ApiError {
    #[serde(default)]
    code: u16,
    #[serde(default)]
    description: String,
}

fn read_publish_ack(answer: &async_nats::Message) -> Attempt {
    match answer.status {
        None => {}
        Some(StatusCode::NO_RESPONDERS) => {
            return Attempt::Failed("no stream answered (no responders)".to_owned());
        }
        Some(status) => return Attempt::Failed(format!("the server answered {status}")),
    }
    match serde_json::from_slice::<PublishAck>(&answer.payload) {
        Ok(PublishAck {
            error: Some(error), ..
        }) => Attempt::Failed(format!(
            "the stream refused it ({}): {}",
            error.code, error.description
        )),
        Ok(PublishAck { duplicate, .. }) => Attempt::Stored { duplicate },
        Err(e) => Attempt::Failed(format!("unreadable publish ack: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::{Attempt, read_publish_ack};

    fn answer(payload: &str) -> async_nats::Message {
        async_nats::Message {
            subject: "_INBOX.x.1".into(),
            reply: None,
            payload: payload.to_owned().into(),
            headers: None,
            status: None,
            description: None,
            length: payload.len(),
        }
    }

    #[test]
    fn publish_acks_are_read_for_what_decides() {
        assert_eq!(
            read_publish_ack(&answer(r#"{"stream":"S","seq":7}"#)),
            Attempt::Stored { duplicate: false }
        );
        assert_eq!(
            read_publish_ack(&answer(r#"{"stream":"S","seq":7,"duplicate":true}"#)),
            Attempt::Stored { duplicate: true }
        );
        assert!(matches!(
            read_publish_ack(&answer(
                r#"{"error":{"code":503,"err_code":10077,"description":"maximum messages exceeded"}}"#
            )),
            Attempt::Failed(why) if why.contains("maximum messages exceeded")
        ));
        assert!(matches!(
            read_publish_ack(&answer("not json")),
            Attempt::Failed(_)
        ));
        let mut silent = answer("");
        silent.status = Some(async_nats::StatusCode::NO_RESPONDERS);
        assert!(matches!(read_publish_ack(&silent), Attempt::Failed(_)));
    }
}
