//! Publishing to a stream until the server acknowledges it: retried with a growing delay (at
//! most a second) up to a deadline (`RESULT_STORE_TIMEOUT` for a worker), given up at once when
//! the task's lease is lost, never retried when the message is over the server's
//! `max_payload`. A stream whose leader is being elected answers "no responders" or nothing
//! for a few seconds; the retries ride that out, and the `Nats-Msg-Id` makes a retry of a
//! publish that did land a duplicate, not a second message. Workers store through their inbox
//! ([`crate::consume::inbox::Inbox`]); the rest through async-nats's JetStream publish
//! ([`JetStreamPublish`]).

use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::Context;
use async_nats::jetstream::context::PublishErrorKind;
use bytes::Bytes;
use prometheus_client::metrics::counter::Counter;
use tokio::time::Instant;

use crate::consume::lease::Lease;
use crate::wire::headers::message_size;

/// How a durable publish ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Published {
    Yes,
    /// The lease was lost first: publish nothing more.
    LeaseLost,
    /// The message can never fit the server's `max_payload`.
    TooLarge {
        size: usize,
        max: usize,
    },
    /// Not acknowledged before the deadline.
    GaveUp(String),
}

/// One attempt to store a message in a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// The stream acknowledged it (`duplicate`: it already held a message with this
    /// `Nats-Msg-Id`).
    Stored { duplicate: bool },
    /// The message is over the server's `max_payload`.
    TooLarge,
    /// Not stored, for a reason that may pass.
    Failed(String),
}

/// A way to publish to a stream and wait for its acknowledgement.
pub(crate) trait StreamPublisher {
    async fn store(&mut self, subject: &str, headers: HeaderMap, payload: Bytes) -> Attempt;
    /// The largest message the server takes, headers included.
    fn max_payload(&self) -> usize;
}

/// async-nats's JetStream publish (a reply subscription shared by the connection).
#[derive(Debug)]
pub(crate) struct JetStreamPublish<'a>(pub &'a Context);

impl StreamPublisher for JetStreamPublish<'_> {
    async fn store(&mut self, subject: &str, headers: HeaderMap, payload: Bytes) -> Attempt {
        let attempt = async {
            self.0
                .publish_with_headers(subject.to_owned(), headers, payload)
                .await?
                .await
        };
        match attempt.await {
            Ok(ack) => Attempt::Stored {
                duplicate: ack.duplicate,
            },
            Err(e) if e.kind() == PublishErrorKind::MaxPayloadExceeded => Attempt::TooLarge,
            Err(e) => Attempt::Failed(e.to_string()),
        }
    }

    fn max_payload(&self) -> usize {
        self.0.client().server_info().max_payload
    }
}

/// Publishes to a stream and waits for its ack, retrying with a growing delay until
/// `deadline`, or until `lease` (when there is one) is lost. A message over the server's
/// `max_payload` is never retried. `headers` builds the message's headers, once per attempt (a
/// publish takes them by value; building them again on a rare retry is cheaper than cloning
/// them for every first attempt). Each retry counts in `retries`.
pub(crate) async fn publish_acked(
    publisher: &mut impl StreamPublisher,
    retries: &Counter,
    lease: Option<&Lease>,
    subject: &str,
    headers: &(dyn Fn() -> HeaderMap + Sync),
    payload: &Bytes,
    deadline: Instant,
) -> Published {
    let mut delay = FIRST_RETRY;
    loop {
        if lease.is_some_and(Lease::is_lost) {
            return Published::LeaseLost;
        }
        let problem = match publisher.store(subject, headers(), payload.clone()).await {
            Attempt::Stored { duplicate } => {
                if duplicate {
                    tracing::debug!(subject, "already published (duplicate suppressed)");
                }
                return Published::Yes;
            }
            Attempt::TooLarge => {
                return Published::TooLarge {
                    size: message_size(&headers(), payload),
                    max: publisher.max_payload(),
                };
            }
            Attempt::Failed(problem) => problem,
        };
        if Instant::now() + delay > deadline {
            tracing::warn!(subject, error = %problem, "publish not acknowledged; giving up for now");
            return Published::GaveUp(problem);
        }
        retries.inc();
        if delay == FIRST_RETRY {
            tracing::warn!(subject, error = %problem, "publish not acknowledged; retrying");
        } else {
            tracing::debug!(subject, error = %problem, retry_in = ?delay, "publish not acknowledged");
        }
        let lost = async {
            match lease {
                Some(l) => l.lost().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = lost => return Published::LeaseLost,
            () = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(MAX_RETRY);
    }
}

/// The first delay before a publish is tried again; it doubles up to [`MAX_RETRY`], short
/// enough that a result is stored within a second of a stream's new leader being elected.
const FIRST_RETRY: Duration = Duration::from_millis(100);
const MAX_RETRY: Duration = Duration::from_secs(1);
