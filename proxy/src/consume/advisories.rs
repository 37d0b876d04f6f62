//! Tasks the server gave up on. When a message of the agent's consumer reaches `max_deliver`
//! without a final ack or term (its worker crashed on the last delivery, or the process died),
//! the server stops delivering it, emits one `MAX_DELIVERIES` advisory and keeps the message.
//! This watcher answers such a task with a failed result ("gave up after N deliveries") and
//! removes it from the work queue, so no task ends without a result. Every replica watches;
//! the scoped result dedupe id makes the answers of several replicas one.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::stream::Stream;
use futures::StreamExt;
use serde::Deserialize;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::consume::durable::{JetStreamPublish, Published, publish_acked};
use crate::consume::give_up::{GivenUp, give_up};
use crate::consume::shared::Shared;
use crate::wire::headers::{deadletter_headers, header, result_headers};
use crate::wire::subjects;
use crate::wire::trace::TraceContext;

/// How long one answer may keep trying to publish.
const PUBLISH_DEADLINE: Duration = Duration::from_secs(10);

/// The fields of the advisory this watcher needs.
#[derive(Debug, Deserialize)]
struct MaxDeliveries {
    stream_seq: u64,
    deliveries: u64,
}

/// Why the watcher stopped before shutdown.
#[derive(Debug, thiserror::Error)]
pub enum AdvisoryError {
    #[error("cannot subscribe to {subject}: {reason}")]
    Subscribe { subject: String, reason: String },
    #[error("the advisory subscription ended")]
    Ended,
}

/// Watches the consumer's max-deliveries advisories until `stop` fires.
pub async fn watch_max_deliveries(
    shared: Arc<Shared>,
    stop: CancellationToken,
) -> Result<(), AdvisoryError> {
    let config = &shared.config;
    let subject = subjects::max_deliveries_advisory(
        &config.streams.tasks,
        &subjects::consumer(&config.agent),
    );
    let mut advisories = shared
        .client
        .subscribe(subject.clone())
        .await
        .map_err(|e| AdvisoryError::Subscribe {
            subject: subject.clone(),
            reason: e.to_string(),
        })?;
    loop {
        let message = tokio::select! {
            () = stop.cancelled() => return Ok(()),
            m = advisories.next() => m.ok_or(AdvisoryError::Ended)?,
        };
        let advisory = match serde_json::from_slice::<MaxDeliveries>(&message.payload) {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(error = %e, "unreadable max-deliveries advisory");
                continue;
            }
        };
        answer(&shared, &advisory).await;
    }
}

/// Publishes a failed result for the task at `advisory.stream_seq`, then deletes it.
async fn answer(shared: &Shared, advisory: &MaxDeliveries) {
    let config = &shared.config;
    let stream = match shared.js.get_stream(&config.streams.tasks).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the task stream for a max-deliveries advisory");
            return;
        }
    };
    let Ok(stored) = stream.get_raw_message(advisory.stream_seq).await else {
        // Already answered and removed (by us or another replica), or acked after all.
        return;
    };
    let why = "the server stopped delivering it (the proxy working on it stopped or failed on its last delivery)";
    tracing::warn!(
        stream_sequence = advisory.stream_seq,
        deliveries = advisory.deliveries,
        reason = why,
        "task given up by the server"
    );
    let (subject, headers, payload) = match give_up(&stored.payload, advisory.deliveries, why) {
        GivenUp::Failed { ids, answer } => {
            let trace = TraceContext::child_of(
                header(Some(&stored.headers), "traceparent"),
                header(Some(&stored.headers), "tracestate"),
            );
            (
                subjects::result(&config.agent, &ids.task_id),
                result_headers(&config.agent, &ids, answer.state, &trace),
                answer.body,
            )
        }
        GivenUp::DeadLetter { reason } => (
            subjects::deadletter(&config.agent),
            deadletter_headers(
                stored.headers.clone(),
                &config.streams.tasks,
                advisory.stream_seq,
                &reason,
            ),
            stored.payload.clone(),
        ),
    };
    let deadline = Instant::now() + PUBLISH_DEADLINE;
    let mut jetstream = JetStreamPublish(&shared.js);
    let published = publish_acked(
        &mut jetstream,
        &shared.metrics.publish_retries,
        None,
        &subject,
        &|| headers.clone(),
        &payload,
        deadline,
    )
    .await;
    if published == Published::Yes {
        shared.metrics.given_up_by_server.inc();
        remove(&stream, advisory.stream_seq).await;
    } else {
        tracing::error!(subject, outcome = ?published, "cannot publish the answer to a given-up task; it stays in the stream");
    }
}

async fn remove(stream: &Stream, sequence: u64) {
    if let Err(e) = stream.delete_message(sequence).await {
        tracing::debug!(error = %e, sequence, "given-up task already removed");
    }
}
