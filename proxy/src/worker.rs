//! The consume loop: each worker holds one slot, pulls one task only when idle and the runtime
//! is healthy, works it to the end (result + ack, failed result + term, delayed nak, or
//! dead letter), and pulls again.
//!
//! No path hands a task back on its last delivery: there it gets a failed result that says
//! why ("gave up after N deliveries: ...") and is termed, so the server never drops a task
//! without an answer.

use std::sync::Arc;
use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::consumer::{Consumer, pull};
use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::{AckKind, Context, Message};
use bytes::Bytes;
use daedalus_contract::write::contract;
use daedalus_contract::{Task, TaskState};
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
use daedalus_contract::telemetry::{self, TraceHeaders};

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
/// The longest a `Deadletter-Reason` header gets.
const REASON_HEADER_MAX: usize = 256;

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
        // some seconds later. Bound the wait either way, and do not wait it out at shutdown: a
        // message that lands after the pull is dropped is redelivered after the ack wait.
        let next = tokio::select! {
            () = shared.stop_pulling.cancelled() => return,
            next = tokio::time::timeout(expires + Duration::from_secs(10), batch.next()) => next,
        };
        match next {
            Ok(Some(Ok(message))) => {
                if shared.stop_pulling.is_cancelled() {
                    // Pulled as shutdown began: hand it straight to another replica.
                    hand_back(&shared, message, "the proxy was shutting down").await;
                    return;
                }
                if !*health.borrow() {
                    // The runtime went unhealthy while the pull was waiting: hand the task
                    // to a replica whose runtime can take it.
                    hand_back(&shared, message, "the runtime was unhealthy").await;
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

pub(crate) fn header<'a>(headers: Option<&'a HeaderMap>, name: &str) -> Option<&'a str> {
    let headers = headers?;
    headers
        .iter()
        .find(|(k, _)| AsRef::<str>::as_ref(k).eq_ignore_ascii_case(name))
        .and_then(|(_, values)| values.first())
        .map(async_nats::HeaderValue::as_str)
}

/// `text` as a header value: control characters become spaces, at most `max` bytes.
pub(crate) fn header_text(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max));
    for c in text.chars() {
        let c = if c.is_control() { ' ' } else { c };
        if out.len() + c.len_utf8() > max {
            break;
        }
        out.push(c);
    }
    out
}

/// Works one task message to its end.
async fn process(shared: &Arc<Shared>, message: Message) {
    if let Some((job, span)) = Job::new(shared, message) {
        job.run().instrument(span).await;
    }
}

/// Hands a pulled task back untouched for another replica, or gives it up with a failed
/// result if this was its last delivery.
async fn hand_back(shared: &Arc<Shared>, message: Message, why: &str) {
    if let Some((job, span)) = Job::new(shared, message) {
        job.hand_back(None, why).instrument(span).await;
    }
}

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

/// One delivery of one task message.
struct Job {
    shared: Arc<Shared>,
    message: Arc<Message>,
    trace: TraceContext,
    delivered: u32,
    stream_sequence: u64,
}

impl Job {
    fn new(shared: &Arc<Shared>, message: Message) -> Option<(Job, tracing::Span)> {
        let (delivered, stream_sequence) = match message.info() {
            Ok(info) => (
                u32::try_from(info.delivered).unwrap_or(u32::MAX),
                info.stream_sequence,
            ),
            Err(e) => {
                tracing::error!(error = %e, "pulled a message without JetStream metadata; ignoring it");
                return None;
            }
        };
        shared.metrics.received.inc();
        if delivered > 1 {
            shared.metrics.redeliveries.inc();
        }
        let headers = message.headers.as_ref();
        let incoming = TraceHeaders {
            traceparent: header(headers, "traceparent").map(str::to_owned),
            tracestate: header(headers, "tracestate").map(str::to_owned),
        };
        let span = tracing::info_span!(
            "task",
            otel.name = %format_args!("process {}", message.subject),
            otel.kind = "consumer",
            messaging.system = "nats",
            messaging.destination.name = %message.subject,
            task_id = tracing::field::Empty,
            stream_sequence,
            delivered,
            trace_id = tracing::field::Empty,
            span_id = tracing::field::Empty,
        );
        // The task's span: a child of the publisher's, exported when telemetry is on; without
        // it (a library user's own subscriber), the same ids are made here.
        telemetry::continue_trace(&span, &incoming);
        let trace = TraceContext::of_span(&span, &incoming).unwrap_or_else(|| {
            let trace = TraceContext::child_of(
                incoming.traceparent.as_deref(),
                incoming.tracestate.as_deref(),
            );
            span.record("trace_id", trace.span.trace_id_hex());
            span.record("span_id", trace.span.span_id_hex());
            trace
        });
        let job = Job {
            shared: Arc::clone(shared),
            message: Arc::new(message),
            trace,
            delivered,
            stream_sequence,
        };
        Some((job, span))
    }

    fn is_last_delivery(&self) -> bool {
        self.delivered >= self.shared.config.max_deliver
    }

    async fn run(self) {
        let started = Instant::now();
        let config = &self.shared.config;
        let lease = Lease::start(Arc::clone(&self.message), config.ack_wait);
        self.shared.metrics.in_flight.inc();
        match intake::read_task(&self.message.payload) {
            Intake::Unaddressable { reason } => self.dead_letter(Some(&lease), &reason).await,
            Intake::Refused { ids, reason } => {
                tracing::Span::current().record("task_id", ids.task_id.as_str());
                tracing::warn!(%reason, "poison task body");
                let task =
                    disposition::failed_task(&ids.task_id, ids.context_id.as_deref(), &reason);
                self.finish(Some(&lease), &ids, task, AckKind::Term, started)
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
        tracing::debug!(message_id = %ids.message_id, "task started");
        let body = self.message.payload.clone();
        let call = tracing::info_span!(
            "runtime_call",
            otel.name = "POST /",
            otel.kind = "client",
            http.request.method = "POST",
        );
        let send = self
            .shared
            .forwarder
            .send(body, &self.trace, config.task_timeout);
        let reply = tokio::select! {
            reply = send.instrument(call) => reply,
            () = lease.lost() => {
                self.shared.metrics.leases_lost.inc();
                if self.is_last_delivery() {
                    // Nobody else will get it: answer it here, lease or not.
                    self.give_up(None, "the lease was lost (progress acks went unconfirmed)").await;
                }
                return;
            }
            () = self.shared.abandon.cancelled() => {
                tracing::warn!("grace period over; handing the task back to another replica");
                self.hand_back(Some(lease), "the grace period ran out at shutdown").await;
                return;
            }
        };
        match disposition::classify(&ids.task_id, reply) {
            Disposition::Result(task) => {
                self.finish(Some(lease), ids, *task, AckKind::Ack, started)
                    .await;
            }
            Disposition::Poison(reason) => {
                tracing::warn!(%reason, "the task cannot succeed");
                let task =
                    disposition::failed_task(&ids.task_id, ids.context_id.as_deref(), &reason);
                self.finish(Some(lease), ids, task, AckKind::Term, started)
                    .await;
            }
            Disposition::Unavailable(reason) => {
                // The runtime says it is not ready: stop pulling until /health says otherwise.
                self.shared.runtime_healthy.send_replace(false);
                self.retry(lease, &reason).await;
            }
            Disposition::Transient(reason) => self.retry(lease, &reason).await,
        }
    }

    /// A transient failure: nak with a growing delay, or give up on the last delivery.
    async fn retry(&self, lease: &Lease, reason: &str) {
        let config = &self.shared.config;
        if self.is_last_delivery() {
            self.give_up(Some(lease), reason).await;
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

    /// Hands the task back for another replica at once, unless this was its last delivery.
    async fn hand_back(&self, lease: Option<&Lease>, why: &str) {
        if self.is_last_delivery() {
            self.give_up(lease, why).await;
            return;
        }
        tracing::info!(reason = why, "handing the task back");
        self.shared.metrics.handed_back.inc();
        confirm(&self.message, AckKind::Nak(None), "hand back").await;
    }

    /// The last delivery failed: publish a failed Task saying why and term the message. With
    /// no lease (lost, or never taken) the publish does not wait on one: no replica will get
    /// this message again.
    async fn give_up(&self, lease: Option<&Lease>, why: &str) {
        let why = format!("gave up after {} deliveries: {why}", self.delivered);
        tracing::warn!(reason = %why, "last delivery failed");
        match intake::read_task(&self.message.payload) {
            Intake::Unaddressable { reason } => {
                self.dead_letter(lease, &format!("{why}; {reason}")).await;
            }
            Intake::Refused { ids, .. } | Intake::Task { ids, .. } => {
                let task = disposition::failed_task(&ids.task_id, ids.context_id.as_deref(), &why);
                self.finish(lease, &ids, task, AckKind::Term, Instant::now())
                    .await;
            }
        }
    }

    /// Publishes `task` as the result (and to an allowed `reply-to`), then acks with `ack`.
    /// A result too large for the server becomes a small failed Task that says so.
    async fn finish(
        &self,
        lease: Option<&Lease>,
        ids: &Ids,
        task: Task,
        ack: AckKind,
        started: Instant,
    ) {
        let mut task = task;
        let mut ack = ack;
        let mut payload = Bytes::from(contract::to_vec(&task));
        let mut headers = self.result_headers(ids, &task);
        let subject = subjects::result(&self.shared.config.agent, &ids.task_id);
        let publishing = tracing::info_span!(
            "publish_result",
            otel.name = %format_args!("publish {subject}"),
            otel.kind = "producer",
            messaging.system = "nats",
            messaging.destination.name = %subject,
        );
        let mut outcome = self
            .publish_durably(lease, &subject, &headers, &payload)
            .instrument(publishing)
            .await;
        if let Published::TooLarge { size, max } = outcome {
            let why = format!(
                "the result ({size} bytes with headers) is larger than the NATS server's max_payload ({max} bytes)"
            );
            tracing::warn!(reason = %why, "result too large; publishing a failed result instead");
            task = disposition::failed_task(&ids.task_id, ids.context_id.as_deref(), &why);
            ack = AckKind::Term;
            payload = Bytes::from(contract::to_vec(&task));
            headers = self.result_headers(ids, &task);
            outcome = self
                .publish_durably(lease, &subject, &headers, &payload)
                .await;
            if let Published::TooLarge { .. } = outcome {
                // Even the failure does not fit (the ids alone are too large): keep the body.
                self.dead_letter(lease, &why).await;
                return;
            }
        }
        match outcome {
            Published::Yes => {}
            Published::LeaseLost => return,
            Published::TooLarge { .. } | Published::GaveUp(_) => {
                // The result cannot be stored now: let the server redeliver the task later.
                if lease.is_none_or(|l| !l.is_lost()) {
                    let delay = self.shared.config.retry_max_delay;
                    confirm(&self.message, AckKind::Nak(Some(delay)), "nak").await;
                }
                return;
            }
        }
        self.send_reply_to(&headers, &payload).await;
        if lease.is_some_and(Lease::is_lost) {
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

    fn result_headers(&self, ids: &Ids, task: &Task) -> HeaderMap {
        result_headers(&self.shared.config.agent, ids, task, &self.trace)
    }

    /// Also sends the result to the publisher's `reply-to`, if it names an allowed subject.
    async fn send_reply_to(&self, headers: &HeaderMap, payload: &Bytes) {
        let Some(reply_to) = header(self.message.headers.as_ref(), subjects::REPLY_TO_HEADER)
        else {
            return;
        };
        if let Err(why) = subjects::check_reply_to(reply_to, &self.shared.config.reply_to_prefixes)
        {
            self.shared.metrics.reply_to_refused.inc();
            tracing::warn!(
                reply_to = %header_text(reply_to, 80),
                length = reply_to.len(),
                reason = %why,
                "reply-to refused; the result is published on its own subject only"
            );
            return;
        }
        if let Err(e) = self
            .shared
            .client
            .publish_with_headers(reply_to.to_owned(), headers.clone(), payload.clone())
            .await
        {
            tracing::warn!(reply_to, error = %e, "could not send the result to reply-to");
        }
    }

    /// Publishes to a stream within an ack wait, watching the lease (see [`publish_acked`]).
    async fn publish_durably(
        &self,
        lease: Option<&Lease>,
        subject: &str,
        headers: &HeaderMap,
        payload: &Bytes,
    ) -> Published {
        let deadline = Instant::now() + self.shared.config.ack_wait;
        publish_acked(&self.shared, lease, subject, headers, payload, deadline).await
    }

    async fn dead_letter(&self, lease: Option<&Lease>, reason: &str) {
        let config = &self.shared.config;
        tracing::warn!(%reason, "no usable task id; dead-lettering the body");
        let headers = deadletter_headers(
            self.message.headers.clone().unwrap_or_default(),
            &config.streams.tasks,
            self.stream_sequence,
            reason,
        );
        let subject = subjects::deadletter(&config.agent);
        let published = self
            .publish_durably(lease, &subject, &headers, &self.message.payload)
            .await;
        if published == Published::Yes
            && lease.is_none_or(|l| !l.is_lost())
            && confirm(&self.message, AckKind::Term, "term").await
        {
            self.shared.metrics.deadlettered.inc();
        }
    }
}

/// Publishes to a stream and waits for its ack, retrying with a growing delay until
/// `deadline`, or until `lease` (when there is one) is lost. A message over the server's
/// `max_payload` is never retried.
pub(crate) async fn publish_acked(
    shared: &Shared,
    lease: Option<&Lease>,
    subject: &str,
    headers: &HeaderMap,
    payload: &Bytes,
    deadline: Instant,
) -> Published {
    let mut delay = Duration::from_millis(100);
    loop {
        if lease.is_some_and(Lease::is_lost) {
            return Published::LeaseLost;
        }
        let attempt = async {
            shared
                .js
                .publish_with_headers(subject.to_owned(), headers.clone(), payload.clone())
                .await?
                .await
        };
        let problem = match attempt.await {
            Ok(ack) => {
                if ack.duplicate {
                    tracing::debug!(subject, "already published (duplicate suppressed)");
                }
                return Published::Yes;
            }
            Err(e) if e.kind() == PublishErrorKind::MaxPayloadExceeded => {
                return Published::TooLarge {
                    size: message_size(headers, payload),
                    max: shared.client.server_info().max_payload,
                };
            }
            Err(e) => e.to_string(),
        };
        if Instant::now() + delay > deadline {
            tracing::warn!(subject, error = %problem, "publish not acknowledged; giving up for now");
            return Published::GaveUp(problem);
        }
        tracing::warn!(subject, error = %problem, retry_in = ?delay, "publish not acknowledged");
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
        delay = (delay * 2).min(Duration::from_secs(2));
    }
}

/// The headers of a dead letter: the task message's own, a dedupe id naming its place in the
/// task stream, and why (one bounded line).
pub(crate) fn deadletter_headers(
    mut headers: HeaderMap,
    tasks_stream: &str,
    sequence: u64,
    reason: &str,
) -> HeaderMap {
    headers.insert(
        subjects::MSG_ID_HEADER,
        format!("deadletter:{tasks_stream}:{sequence}").as_str(),
    );
    headers.insert(
        subjects::DEADLETTER_REASON_HEADER,
        header_text(reason, REASON_HEADER_MAX).as_str(),
    );
    headers
}

/// The headers of a result: tokens and visible ASCII only, whatever the ids hold.
pub(crate) fn result_headers(
    agent: &str,
    ids: &Ids,
    task: &Task,
    trace: &TraceContext,
) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        subjects::MSG_ID_HEADER,
        subjects::result_msg_id(agent, &ids.task_id, &ids.message_id).as_str(),
    );
    headers.insert(subjects::TASK_ID_HEADER, subjects::token(&task.id).as_ref());
    headers.insert(
        subjects::TASK_STATE_HEADER,
        task.status.state.to_string().as_str(),
    );
    headers.insert("traceparent", trace.traceparent().as_str());
    if let Some(state) = &trace.tracestate {
        headers.insert("tracestate", header_text(state, 512).as_str());
    }
    headers
}

/// The bytes a message takes against `max_payload`: its payload and its headers.
fn message_size(headers: &HeaderMap, payload: &Bytes) -> usize {
    let header_bytes: usize = headers
        .iter()
        .map(|(k, values)| {
            values
                .iter()
                .map(|v| AsRef::<str>::as_ref(k).len() + v.as_str().len() + 4)
                .sum::<usize>()
        })
        .sum();
    payload.len() + header_bytes + 12
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{Ids, Intake, TraceContext, header_text, intake, result_headers, subjects};

    /// Header values a publisher can send (the NATS wire keeps CR and LF out of them).
    fn header_value() -> impl Strategy<Value = String> {
        prop_oneof![
            "[ -~]{0,80}",
            "00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]",
            "_INBOX\\.[A-Za-z0-9.*>]{0,40}",
            "(agent|\\$JS|_INBOX)\\.[a-z.>*]{0,20}",
            "[^\\r\\n]{0,300}",
        ]
    }

    /// Bodies: anything, or a request whose ids are anything.
    fn body() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            prop::collection::vec(any::<u8>(), 0..256),
            (
                ".{0,200}",
                proptest::option::of(".{0,6000}"),
                proptest::option::of(".{0,200}")
            )
                .prop_map(|(message_id, task_id, context_id)| {
                    let mut message = serde_json::json!({
                        "messageId": message_id, "role": "user", "parts": [{"text": "x"}]
                    });
                    if let Some(t) = task_id {
                        message["taskId"] = t.into();
                    }
                    if let Some(c) = context_id {
                        message["contextId"] = c.into();
                    }
                    serde_json::to_vec(&serde_json::json!({"message": message})).unwrap_or_default()
                }),
        ]
    }

    proptest! {

        /// A raw task message, headers included, always comes to a disposition, and whatever it
        /// carries, the result's headers are one bounded line each.
        #[test]
        fn any_task_message_comes_to_a_disposition_with_safe_headers(
            body in body(),
            traceparent in proptest::option::of(header_value()),
            tracestate in proptest::option::of(header_value()),
            reply_to in header_value(),
        ) {
            let trace = TraceContext::child_of(traceparent.as_deref(), tracestate.as_deref());
            let prefixes = vec![subjects::REPLY_TO_PREFIXES_DEFAULT.to_owned()];
            if subjects::check_reply_to(&reply_to, &prefixes).is_ok() {
                prop_assert!(reply_to.starts_with("_INBOX.") && !reply_to.contains(['*', '>']));
            }
            let ids: Option<Ids> = match intake::read_task(&body) {
                Intake::Task { ids, .. } | Intake::Refused { ids, .. } => Some(ids),
                Intake::Unaddressable { reason } => {
                    prop_assert!(!header_text(&reason, 256).contains(['\r', '\n']));
                    None
                }
            };
            if let Some(ids) = ids {
                let task = crate::disposition::failed_task(&ids.task_id, ids.context_id.as_deref(), "x");
                let headers = result_headers("agent-1", &ids, &task, &trace);
                for (name, values) in headers.iter() {
                    for value in values {
                        let value = value.as_str();
                        prop_assert!(
                            value.bytes().all(|b| (0x20..0x7f).contains(&b)),
                            "{}: {value:?}", AsRef::<str>::as_ref(name)
                        );
                        prop_assert!(value.len() <= 512, "{}", value.len());
                    }
                }
                let subject = subjects::result("agent-1", &ids.task_id);
                prop_assert!(subject.len() <= "agent.results.agent-1.".len() + 128);
            }
        }
    }

    #[test]
    fn header_text_is_one_bounded_line() {
        assert_eq!(header_text("a\r\nb\tc", 100), "a  b c");
        assert_eq!(header_text(&"x".repeat(1_000), 10).len(), 10);
        assert_eq!(header_text("ééé", 5), "éé");
    }
}
