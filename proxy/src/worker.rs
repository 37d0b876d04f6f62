//! The consume loop: each worker holds one slot, pulls one task only when idle and the runtime
//! is healthy, works it to the end (result + ack, failed result + term, delayed nak, or
//! dead letter), and pulls again.

use std::sync::Arc;
use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::consumer::{Consumer, pull};
use async_nats::jetstream::{AckKind, Context, Message};
use bytes::Bytes;
use daedalus_schemas::write::contract;
use daedalus_schemas::{Task, TaskState};
use futures::StreamExt;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::config::ProxyConfig;
use crate::disposition::{self, Disposition};
use crate::intake::{self, Ids, Intake};
use crate::lease::Lease;
use crate::metrics::Metrics;
use crate::runtime::Forwarder;
use crate::subjects;
use crate::trace::TraceContext;

/// What every worker shares.
#[derive(Debug)]
pub struct Shared {
    pub config: ProxyConfig,
    pub client: async_nats::Client,
    pub js: Context,
    pub forwarder: Arc<dyn Forwarder>,
    pub metrics: Arc<Metrics>,
    /// The runtime's health, as last seen.
    pub runtime_healthy: watch::Sender<bool>,
    /// Fired at the first shutdown signal: no new pulls.
    pub stop_pulling: CancellationToken,
    /// Fired when the grace period is over: hand in-flight tasks back.
    pub abandon: CancellationToken,
}

/// How long to back off after a failed pull request.
const PULL_ERROR_BACKOFF: Duration = Duration::from_millis(500);

/// Runs one slot until shutdown.
pub async fn work(shared: Arc<Shared>, consumer: Consumer<pull::Config>) {
    let mut health = shared.runtime_healthy.subscribe();
    loop {
        // Pull nothing while the runtime is unhealthy.
        tokio::select! {
            () = shared.stop_pulling.cancelled() => return,
            healthy = health.wait_for(|h| *h) => if healthy.is_err() { return },
        }
        let expires = shared.config.pull_expires;
        let batch = consumer
            .batch()
            .max_messages(1)
            .expires(expires)
            .messages()
            .await;
        let mut batch = match batch {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(error = %e, "pull request failed");
                pause(&shared.stop_pulling, PULL_ERROR_BACKOFF).await;
                continue;
            }
        };
        // The server answers by `expires`; after a crash of the server the client gives up
        // some seconds later. Bound the wait either way.
        let next = tokio::time::timeout(expires + Duration::from_secs(10), batch.next()).await;
        match next {
            Ok(Some(Ok(message))) => {
                if shared.stop_pulling.is_cancelled() {
                    // Pulled as shutdown began: hand it straight to another replica.
                    confirm(&message, AckKind::Nak(None), "hand back").await;
                    return;
                }
                if !*health.borrow() {
                    // The runtime went unhealthy while the pull was waiting: hand the task
                    // to a replica whose runtime can take it.
                    confirm(&message, AckKind::Nak(None), "hand back").await;
                    continue;
                }
                process(&shared, message).await;
            }
            Ok(Some(Err(e))) => {
                tracing::debug!(error = %e, "pull ended with an error");
                pause(&shared.stop_pulling, PULL_ERROR_BACKOFF).await;
            }
            Ok(None) | Err(_) => {}
        }
    }
}

async fn pause(stop: &CancellationToken, d: Duration) {
    tokio::select! {
        () = stop.cancelled() => {}
        () = tokio::time::sleep(d) => {}
    }
}

/// Sends an ack of `kind` and waits for the server to confirm it.
async fn confirm(message: &Message, kind: AckKind, what: &str) -> bool {
    match message.double_ack_with(kind).await {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(error = %e, "{what} not confirmed; the server will redeliver");
            false
        }
    }
}

fn header<'a>(headers: Option<&'a HeaderMap>, name: &str) -> Option<&'a str> {
    let headers = headers?;
    headers
        .iter()
        .find(|(k, _)| AsRef::<str>::as_ref(k).eq_ignore_ascii_case(name))
        .and_then(|(_, values)| values.first())
        .map(async_nats::HeaderValue::as_str)
}

/// Works one task message to its end.
async fn process(shared: &Arc<Shared>, message: Message) {
    let (delivered, stream_sequence) = match message.info() {
        Ok(info) => (
            u32::try_from(info.delivered).unwrap_or(u32::MAX),
            info.stream_sequence,
        ),
        Err(e) => {
            tracing::error!(error = %e, "pulled a message without JetStream metadata; ignoring it");
            return;
        }
    };
    shared.metrics.received.inc();
    if delivered > 1 {
        shared.metrics.redeliveries.inc();
    }
    let headers = message.headers.as_ref();
    let trace = TraceContext::child_of(
        header(headers, "traceparent"),
        header(headers, "tracestate"),
    );
    let span = tracing::info_span!(
        "task",
        task_id = tracing::field::Empty,
        stream_sequence,
        delivered,
        trace_id = %trace.span.trace_id_hex(),
        span_id = %trace.span.span_id_hex(),
    );
    let job = Job {
        shared: Arc::clone(shared),
        message: Arc::new(message),
        trace,
        delivered,
        stream_sequence,
    };
    job.run().instrument(span).await;
}

/// One delivery of one task message.
struct Job {
    shared: Arc<Shared>,
    message: Arc<Message>,
    trace: TraceContext,
    delivered: u32,
    stream_sequence: u64,
}

impl Job {
    async fn run(self) {
        let started = Instant::now();
        let config = &self.shared.config;
        let lease = Lease::start(Arc::clone(&self.message), config.ack_wait);
        self.shared.metrics.in_flight.inc();
        match intake::read_task(&self.message.payload) {
            Intake::Unaddressable { reason } => self.dead_letter(&lease, &reason).await,
            Intake::Refused { ids, reason } => {
                tracing::Span::current().record("task_id", ids.task_id.as_str());
                tracing::warn!(%reason, "poison task body");
                let task =
                    disposition::failed_task(&ids.task_id, ids.context_id.as_deref(), &reason);
                self.finish(&lease, &ids, &task, AckKind::Term, started)
                    .await;
            }
            Intake::Task { ids, .. } => {
                tracing::Span::current().record("task_id", ids.task_id.as_str());
                self.forward(&lease, &ids, started).await;
            }
        }
        self.shared.metrics.in_flight.dec();
        lease.release().await;
    }

    async fn forward(&self, lease: &Lease, ids: &Ids, started: Instant) {
        let config = &self.shared.config;
        tracing::info!(message_id = %ids.message_id, "task started");
        let body = self.message.payload.clone();
        let reply = tokio::select! {
            reply = self.shared.forwarder.send(body, &self.trace, config.task_timeout) => reply,
            () = lease.lost() => {
                self.shared.metrics.leases_lost.inc();
                return;
            }
            () = self.shared.abandon.cancelled() => {
                tracing::warn!("grace period over; handing the task back to another replica");
                self.shared.metrics.handed_back.inc();
                confirm(&self.message, AckKind::Nak(None), "hand back").await;
                return;
            }
        };
        match disposition::classify(&ids.task_id, reply) {
            Disposition::Result(task) => {
                self.finish(lease, ids, &task, AckKind::Ack, started).await;
            }
            Disposition::Poison(reason) => {
                tracing::warn!(%reason, "the task cannot succeed");
                let task =
                    disposition::failed_task(&ids.task_id, ids.context_id.as_deref(), &reason);
                self.finish(lease, ids, &task, AckKind::Term, started).await;
            }
            Disposition::Transient(reason) => self.retry(lease, ids, &reason, started).await,
        }
    }

    async fn retry(&self, lease: &Lease, ids: &Ids, reason: &str, started: Instant) {
        let config = &self.shared.config;
        if reason.contains("answered 503") {
            // The runtime says it is not ready: stop pulling until /health says otherwise.
            self.shared.runtime_healthy.send_replace(false);
        }
        if self.delivered >= config.max_deliver {
            let why = format!("gave up after {} attempts: {reason}", self.delivered);
            tracing::warn!(reason = %why, "last delivery failed");
            let task = disposition::failed_task(&ids.task_id, ids.context_id.as_deref(), &why);
            self.finish(lease, ids, &task, AckKind::Term, started).await;
            return;
        }
        let delay = disposition::retry_delay(
            self.delivered,
            config.retry_base_delay,
            config.retry_max_delay,
        );
        tracing::warn!(%reason, retry_in = ?delay, attempt = self.delivered, "transient failure; retrying later");
        if !lease.is_lost() && confirm(&self.message, AckKind::Nak(Some(delay)), "nak").await {
            self.shared.metrics.retried.inc();
        }
    }

    /// Publishes `task` as the result (and to `reply-to`), then acks with `ack`.
    async fn finish(&self, lease: &Lease, ids: &Ids, task: &Task, ack: AckKind, started: Instant) {
        let config = &self.shared.config;
        let payload = Bytes::from(contract::to_vec(task));
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Msg-Id", format!("result:{}", ids.message_id).as_str());
        headers.insert(subjects::TASK_ID_HEADER, task.id.as_str());
        headers.insert(
            subjects::TASK_STATE_HEADER,
            task.status.state.to_string().as_str(),
        );
        headers.insert("traceparent", self.trace.traceparent().as_str());
        if let Some(state) = &self.trace.tracestate {
            headers.insert("tracestate", state.as_str());
        }
        let subject = subjects::result(&config.agent, &ids.task_id);
        if !self
            .publish_durably(lease, &subject, &headers, &payload)
            .await
        {
            return;
        }
        if let Some(reply_to) = header(self.message.headers.as_ref(), subjects::REPLY_TO_HEADER)
            && let Err(e) = self
                .shared
                .client
                .publish_with_headers(reply_to.to_owned(), headers.clone(), payload.clone())
                .await
        {
            tracing::warn!(reply_to, error = %e, "could not send the result to reply-to");
        }
        if lease.is_lost() {
            return;
        }
        if confirm(&self.message, ack, "ack").await {
            let metrics = &self.shared.metrics;
            if task.status.state == TaskState::Failed {
                metrics.failed.inc();
            } else {
                metrics.completed.inc();
            }
            metrics
                .task_duration
                .observe(started.elapsed().as_secs_f64());
            tracing::info!(state = %task.status.state, elapsed = ?started.elapsed(), "task finished");
        }
    }

    /// Publishes to a stream and waits for its ack, retrying while the lease holds. False when
    /// the lease was lost or the task abandoned first.
    async fn publish_durably(
        &self,
        lease: &Lease,
        subject: &str,
        headers: &HeaderMap,
        payload: &Bytes,
    ) -> bool {
        let mut delay = Duration::from_millis(100);
        loop {
            if lease.is_lost() {
                return false;
            }
            let attempt = async {
                self.shared
                    .js
                    .publish_with_headers(subject.to_owned(), headers.clone(), payload.clone())
                    .await?
                    .await
            };
            match attempt.await {
                Ok(ack) => {
                    if ack.duplicate {
                        tracing::info!(subject, "result already published (duplicate suppressed)");
                    }
                    return true;
                }
                Err(e) => {
                    tracing::warn!(subject, error = %e, retry_in = ?delay, "publish not acknowledged");
                }
            }
            tokio::select! {
                () = lease.lost() => return false,
                () = tokio::time::sleep(delay) => {}
            }
            delay = (delay * 2).min(Duration::from_secs(2));
        }
    }

    async fn dead_letter(&self, lease: &Lease, reason: &str) {
        let config = &self.shared.config;
        tracing::warn!(%reason, "no usable task id; dead-lettering the body");
        let mut headers = self.message.headers.clone().unwrap_or_default();
        headers.insert(
            "Nats-Msg-Id",
            format!(
                "deadletter:{}:{}",
                config.streams.tasks, self.stream_sequence
            )
            .as_str(),
        );
        headers.insert(subjects::DEADLETTER_REASON_HEADER, reason);
        let subject = subjects::deadletter(&config.agent);
        if self
            .publish_durably(lease, &subject, &headers, &self.message.payload)
            .await
            && !lease.is_lost()
            && confirm(&self.message, AckKind::Term, "term").await
        {
            self.shared.metrics.deadlettered.inc();
        }
    }
}
