//! One delivery of one task message, worked to its end: the runtime's answer published and
//! acked, a failed result published and termed, a delayed nak, or a dead letter.
//!
//! No path hands a task back on its last delivery: there it gets a failed result that says
//! why ("gave up after N deliveries: ...") and is termed, so the server never drops a task
//! without an answer. A result is always published (and acknowledged by the stream) before
//! the task is acked, and every ack is confirmed by the server (docs/design.md §5).

use std::sync::Arc;

use async_nats::HeaderMap;
use async_nats::jetstream::{AckKind, Message};
use bytes::Bytes;
use daedalus_contract::TaskState;
use daedalus_contract::telemetry::{self, TraceHeaders};
use tokio::time::Instant;
use tracing::Instrument;

use crate::consume::disposition::{self, Answer, Disposition};
use crate::consume::durable::{Published, publish_acked};
use crate::consume::give_up::{GivenUp, give_up};
use crate::consume::inbox::Inbox;
use crate::consume::intake::{self, Intake};
use crate::consume::lease::{Lease, covered};
use crate::consume::shared::Shared;
use crate::forward::forwarder::{ForwardError, Reply};
use crate::wire::headers::{deadletter_headers, header, header_text, result_headers};
use crate::wire::ids::Ids;
use crate::wire::subjects;
use crate::wire::trace::TraceContext;

/// How holding a task while the runtime was down ended.
enum Held {
    Up,
    PastLimit,
}

/// One delivery of one task message, worked by one worker.
pub(crate) struct Job<'w> {
    pub(super) shared: &'w Shared,
    pub(super) inbox: &'w mut Inbox,
    pub(super) message: Arc<Message>,
    trace: TraceContext,
    delivered: u32,
    pub(super) stream_sequence: u64,
}

impl<'w> Job<'w> {
    /// Reads a delivery: its place in the stream, its body and its trace. `None` for a message
    /// without JetStream metadata (not a delivery; nothing to answer).
    pub(crate) fn new(
        shared: &'w Shared,
        inbox: &'w mut Inbox,
        message: Message,
    ) -> Option<(Self, Intake, tracing::Span)> {
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
        let intake = intake::read_task(&message.payload);
        let task_id = match &intake {
            Intake::Task { ids, .. } | Intake::Refused { ids, .. } => Some(ids.task_id.as_str()),
            Intake::Unaddressable { .. } => None,
        };
        let headers = message.headers.as_ref();
        let (traceparent, tracestate) = (
            header(headers, "traceparent"),
            header(headers, "tracestate"),
        );
        let (span, trace) = if shared.traced {
            // The task's span: a child of the publisher's, exported.
            let span = tracing::info_span!(
                "task",
                otel.name = %format_args!("process {}", message.subject),
                otel.kind = "consumer",
                messaging.system = "nats",
                messaging.destination.name = %message.subject,
                task_id,
                stream_sequence,
                delivered,
                trace_id = tracing::field::Empty,
                span_id = tracing::field::Empty,
            );
            let incoming = TraceHeaders {
                traceparent: traceparent.map(str::to_owned),
                tracestate: tracestate.map(str::to_owned),
            };
            telemetry::continue_trace(&span, &incoming);
            let trace = TraceContext::of_span(&span, &incoming)
                .unwrap_or_else(|| TraceContext::child_of(traceparent, tracestate));
            (span, trace)
        } else {
            // No spans are exported: the ids are made here, and the span (only log lines see
            // it) gets every field once, when it opens.
            let trace = TraceContext::child_of(traceparent, tracestate);
            let span = tracing::info_span!(
                "task",
                task_id,
                stream_sequence,
                delivered,
                trace_id = %trace.span.trace_id_hex(),
                span_id = %trace.span.span_id_hex(),
            );
            (span, trace)
        };
        let job = Job {
            shared,
            inbox,
            message: Arc::new(message),
            trace,
            delivered,
            stream_sequence,
        };
        Some((job, intake, span))
    }

    pub(super) fn is_last_delivery(&self) -> bool {
        self.delivered >= self.shared.config.max_deliver
    }

    /// A span for a step of the task, when spans are exported.
    fn step_span(&self, span: impl FnOnce() -> tracing::Span) -> tracing::Span {
        if self.shared.traced {
            span()
        } else {
            tracing::Span::none()
        }
    }

    /// Works the task to its end.
    pub(crate) async fn run(mut self, intake: Intake) {
        let started = Instant::now();
        let lease = Lease::new(Arc::clone(&self.message), self.shared.config.ack_wait);
        self.shared.metrics.in_flight.inc();
        match intake {
            Intake::Unaddressable { reason } => self.dead_letter(Some(&lease), &reason).await,
            Intake::Refused { ids, reason } => {
                tracing::warn!(%reason, "poison task body");
                let answer = Answer::failed(&ids, &reason);
                self.finish(Some(&lease), &ids, answer, AckKind::Term, started)
                    .await;
            }
            Intake::Task { ids, request } => {
                // A stream carries no `history`: a task that asks for it is not streamed.
                let stream = self.shared.runtime_streams && request.history_length().is_none();
                let its_time = match self.budget_wait_left() {
                    Some(left) => self.wait_for_its_time(&lease, left).await,
                    None => true,
                };
                if its_time {
                    self.forward(&lease, &ids, started, stream).await;
                }
            }
        }
        self.shared.metrics.in_flight.dec();
        lease.release().await;
    }

    async fn forward(&mut self, lease: &Lease, ids: &Ids, started: Instant, stream: bool) {
        tracing::debug!(message_id = %ids.message_id, "task started");
        let reply = loop {
            if !self.hold_while_down(lease).await {
                return;
            }
            let Some(reply) = self.send(lease, ids, stream).await else {
                return;
            };
            match reply {
                Err(ForwardError::Unreached(reason)) => {
                    // The runtime never saw the task: it is down. Stop every worker's pulls
                    // now, hold this task, and send it again once the runtime is back; its
                    // deliveries are not spent on the outage.
                    self.shared.metrics.runtime_unreached.inc();
                    self.shared
                        .runtime
                        .report_down(&format!("cannot reach the runtime: {reason}"));
                }
                reply => break reply,
            }
        };
        match disposition::classify(&ids.task_id, reply) {
            Disposition::Result(answer) => {
                self.finish(Some(lease), ids, answer, AckKind::Ack, started)
                    .await;
            }
            Disposition::Poison(reason) => {
                tracing::warn!(%reason, "the task cannot succeed");
                let answer = Answer::failed(ids, &reason);
                self.finish(Some(lease), ids, answer, AckKind::Term, started)
                    .await;
            }
            Disposition::Unavailable(reason) => {
                // The runtime says it is not ready: stop pulling until /health says otherwise.
                self.shared.runtime.report_down(&reason);
                self.retry(lease, &reason).await;
            }
            Disposition::Transient(reason) => self.retry(lease, &reason).await,
            Disposition::OverBudget {
                retry_after,
                reason,
            } => {
                self.wait_for_budget(lease, ids, retry_after, &reason).await;
            }
        }
    }

    /// One `POST /` of the task, under its lease (streamed and relayed when the runtime
    /// streams). `None` when the task was let go meanwhile (lease lost, or handed back at the
    /// end of the grace period).
    ///
    /// Its span is the A2A conventions' CLIENT span of the send (`SendMessage`, or
    /// `SendStreamingMessage`): the runtime's `POST /` is the contract's binding of it.
    async fn send(
        &mut self,
        lease: &Lease,
        ids: &Ids,
        stream: bool,
    ) -> Option<Result<Reply, ForwardError>> {
        let task_id = ids.task_id.as_str();
        let runtime = self.shared.runtime_address.as_ref();
        let call = self.step_span(|| {
            let method = if stream {
                "SendStreamingMessage"
            } else {
                "SendMessage"
            };
            tracing::info_span!(
                "runtime_call",
                otel.name = method,
                otel.kind = "client",
                http.request.method = "POST",
                a2a.method.name = method,
                a2a.task.id = task_id,
                a2a.message.id = ids.message_id.as_str(),
                gen_ai.conversation.id = ids.context_id.as_deref(),
                server.address = runtime.map(|(host, _)| host.as_str()),
                server.port = runtime.map(|(_, port)| i64::from(*port)),
            )
        });
        let send = relayed(
            self.shared,
            &self.message.payload,
            &self.trace,
            stream.then_some(task_id),
        );
        tokio::select! {
            reply = lease.covering(send.instrument(call)) => Some(reply),
            () = lease.lost() => {
                self.lease_lost().await;
                None
            }
            () = self.shared.abandon.cancelled() => {
                tracing::warn!("grace period over; handing the task back to another replica");
                self.hand_back(Some(lease), "the grace period ran out at shutdown").await;
                None
            }
        }
    }

    async fn lease_lost(&mut self) {
        self.shared.metrics.leases_lost.inc();
        if self.is_last_delivery() {
            // Nobody else will get it: answer it here, lease or not.
            self.give_up(None, "the lease was lost (progress acks went unconfirmed)")
                .await;
        }
    }

    /// Holds the task while the runtime is down: its lease kept by progress acks, its
    /// deliveries untouched. Returns whether to send it now. A task is let go instead when its
    /// lease is lost, at the end of the grace period, or, unless this is its last delivery,
    /// once the runtime has been down for `RUNTIME_DOWN_LIMIT`: it is then handed back for
    /// another pod (or for this one once its runtime is back). On its last delivery it is held
    /// on: an outage never fails a task the runtime did not see.
    async fn hold_while_down(&mut self, lease: &Lease) -> bool {
        let runtime = &self.shared.runtime;
        if runtime.is_up() {
            return true;
        }
        self.shared.metrics.tasks_held.inc();
        tracing::debug!("the runtime is down; holding the task until it is back");
        let limit = async {
            match runtime.limit_reached_at() {
                Some(at) if !self.is_last_delivery() => tokio::time::sleep_until(at).await,
                _ => std::future::pending().await,
            }
        };
        let waited = async {
            tokio::select! {
                () = runtime.up() => Held::Up,
                () = limit => Held::PastLimit,
            }
        };
        let outcome = tokio::select! {
            outcome = lease.covering(waited) => outcome,
            () = lease.lost() => {
                self.lease_lost().await;
                return false;
            }
            () = self.shared.abandon.cancelled() => {
                self.hand_back(Some(lease), "the grace period ran out at shutdown").await;
                return false;
            }
        };
        match outcome {
            Held::Up => true,
            Held::PastLimit => {
                self.hand_back(
                    Some(lease),
                    "the runtime was down for longer than RUNTIME_DOWN_LIMIT",
                )
                .await;
                false
            }
        }
    }

    /// Sends an ack of `kind` and waits for the server to confirm it, trying again (an ack is
    /// idempotent) for up to an ack wait while the lease holds: a consumer whose leader is
    /// being elected confirms nothing for a few seconds.
    pub(super) async fn confirm(
        &mut self,
        lease: Option<&Lease>,
        kind: AckKind,
        what: &str,
    ) -> bool {
        let deadline = Instant::now() + self.shared.config.ack_wait;
        let mut delay = std::time::Duration::from_millis(100);
        loop {
            let error = match covered(lease, self.inbox.confirm(&self.message, kind)).await {
                Ok(()) => return true,
                Err(e) => e,
            };
            if lease.is_some_and(Lease::is_lost) || Instant::now() + delay > deadline {
                tracing::warn!(error = %error, "{what} not confirmed; the server will redeliver");
                return false;
            }
            tracing::debug!(error = %error, "{what} not confirmed yet; trying again");
            covered(lease, tokio::time::sleep(delay)).await;
            delay = (delay * 2).min(std::time::Duration::from_secs(1));
        }
    }

    /// A transient failure: nak with a growing delay, or give up on the last delivery.
    async fn retry(&mut self, lease: &Lease, reason: &str) {
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
        if !lease.is_lost()
            && self
                .confirm(Some(lease), AckKind::Nak(Some(delay)), "nak")
                .await
        {
            self.shared.metrics.retried.inc();
        }
    }

    /// Hands the task back for another replica at once, unless this was its last delivery.
    pub(crate) async fn hand_back(&mut self, lease: Option<&Lease>, why: &str) {
        if self.is_last_delivery() {
            self.give_up(lease, why).await;
            return;
        }
        tracing::info!(reason = why, "handing the task back");
        self.shared.metrics.handed_back.inc();
        self.confirm(lease, AckKind::Nak(None), "hand back").await;
    }

    /// The last delivery failed: publish a failed Task saying why and term the message. With
    /// no lease (lost, or never taken) the publish does not wait on one: no replica will get
    /// this message again.
    async fn give_up(&mut self, lease: Option<&Lease>, why: &str) {
        match give_up(&self.message.payload, self.delivered.into(), why) {
            GivenUp::Failed { ids, answer } => {
                tracing::warn!(reason = %why, deliveries = self.delivered, "last delivery failed; answering with a failed result");
                self.finish(lease, &ids, answer, AckKind::Term, Instant::now())
                    .await;
            }
            GivenUp::DeadLetter { reason } => self.dead_letter(lease, &reason).await,
        }
    }

    /// Publishes `answer` as the result (and to an allowed `reply-to`), then acks with `ack`.
    /// A result too large for the server becomes a small failed Task that says so.
    pub(super) async fn finish(
        &mut self,
        lease: Option<&Lease>,
        ids: &Ids,
        answer: Answer,
        ack: AckKind,
        started: Instant,
    ) {
        let Some((published, ack)) = self.publish_result(lease, ids, answer, ack).await else {
            return;
        };
        self.send_reply_to(ids, published.state, &published.body)
            .await;
        if lease.is_some_and(Lease::is_lost) {
            return;
        }
        if self.confirm(lease, ack, "ack").await {
            let metrics = &self.shared.metrics;
            if published.state == TaskState::Failed {
                metrics.failed.inc();
            } else {
                metrics.completed.inc();
            }
            metrics
                .task_duration
                .observe(started.elapsed().as_secs_f64());
            tracing::info!(state = %published.state, elapsed = ?started.elapsed(), "task finished");
        }
    }

    /// Publishes `answer` on the task's result subject, durably: a result too large for the
    /// server is replaced by a failed one saying so (then acked with `Term`), and when even
    /// that does not fit the body is dead-lettered. Answers what was published and the ack
    /// it earns; `None` when the task is settled here already (its lease lost, the body
    /// dead-lettered, or a result that could not be stored handed back with a delayed nak).
    async fn publish_result(
        &mut self,
        lease: Option<&Lease>,
        ids: &Ids,
        answer: Answer,
        ack: AckKind,
    ) -> Option<(Answer, AckKind)> {
        let Answer {
            mut state,
            body: mut payload,
        } = answer;
        let mut ack = ack;
        let subject = subjects::result(&self.shared.config.agent, &ids.task_id);
        let publishing = self.step_span(|| {
            tracing::info_span!(
                "publish_result",
                otel.name = %format_args!("publish {subject}"),
                otel.kind = "producer",
                messaging.system = "nats",
                messaging.destination.name = %subject,
            )
        });
        let (shared, trace) = (self.shared, &self.trace);
        let headers = |state| result_headers(&shared.config.agent, ids, state, trace);
        let mut outcome = publish_durably(
            self.inbox,
            shared,
            lease,
            &subject,
            &|| headers(state),
            &payload,
        )
        .instrument(publishing)
        .await;
        if let Published::TooLarge { size, max } = outcome {
            let why = format!(
                "the result ({size} bytes with headers) is larger than the NATS server's max_payload ({max} bytes)"
            );
            tracing::warn!(reason = %why, "result too large; publishing a failed result instead");
            ack = AckKind::Term;
            Answer {
                state,
                body: payload,
            } = Answer::failed(ids, &why);
            outcome = publish_durably(
                self.inbox,
                shared,
                lease,
                &subject,
                &|| headers(state),
                &payload,
            )
            .await;
            if let Published::TooLarge { .. } = outcome {
                // Even the failure does not fit (the ids alone are too large): keep the body.
                self.dead_letter(lease, &why).await;
                return None;
            }
        }
        match outcome {
            Published::Yes => Some((
                Answer {
                    state,
                    body: payload,
                },
                ack,
            )),
            Published::LeaseLost => None,
            Published::TooLarge { .. } | Published::GaveUp(_) => {
                self.hand_back_unstored(lease).await;
                None
            }
        }
    }

    /// The result could not be stored within `RESULT_STORE_TIMEOUT`: the server is to
    /// redeliver the task later (a delayed nak; the runtime replays its answer by messageId).
    async fn hand_back_unstored(&mut self, lease: Option<&Lease>) {
        if lease.is_some_and(Lease::is_lost) {
            return;
        }
        let config = &self.shared.config;
        let delay = disposition::retry_delay(
            self.delivered,
            config.retry_base_delay,
            config.retry_max_delay,
        );
        self.confirm(lease, AckKind::Nak(Some(delay)), "nak").await;
    }

    fn result_headers(&self, ids: &Ids, state: TaskState) -> HeaderMap {
        result_headers(&self.shared.config.agent, ids, state, &self.trace)
    }

    /// Also sends the result to the publisher's `reply-to`, if it names an allowed subject.
    async fn send_reply_to(&self, ids: &Ids, state: TaskState, payload: &Bytes) {
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
            .publish_with_headers(
                reply_to.to_owned(),
                self.result_headers(ids, state),
                payload.clone(),
            )
            .await
        {
            tracing::warn!(reply_to, error = %e, "could not send the result to reply-to");
        }
    }

    async fn dead_letter(&mut self, lease: Option<&Lease>, reason: &str) {
        let config = &self.shared.config;
        tracing::warn!(%reason, "no usable task id; dead-lettering the body");
        let (message, sequence) = (&self.message, self.stream_sequence);
        let headers = || {
            deadletter_headers(
                message.headers.clone().unwrap_or_default(),
                &config.streams.tasks,
                sequence,
                reason,
            )
        };
        let subject = subjects::deadletter(&config.agent);
        let published = publish_durably(
            self.inbox,
            self.shared,
            lease,
            &subject,
            &headers,
            &message.payload,
        )
        .await;
        if published == Published::Yes
            && lease.is_none_or(|l| !l.is_lost())
            && self.confirm(lease, AckKind::Term, "term").await
        {
            self.shared.metrics.deadlettered.inc();
        }
    }
}

/// Publishes to a stream through the worker's inbox within `RESULT_STORE_TIMEOUT`, keeping
/// and watching the lease (see [`publish_acked`]).
pub(super) async fn publish_durably(
    inbox: &mut Inbox,
    shared: &Shared,
    lease: Option<&Lease>,
    subject: &str,
    headers: &(dyn Fn() -> HeaderMap + Sync),
    payload: &Bytes,
) -> Published {
    let deadline = Instant::now() + shared.config.result_store_timeout;
    covered(
        lease,
        publish_acked(
            inbox,
            &shared.metrics.publish_retries,
            lease,
            subject,
            headers,
            payload,
            deadline,
        ),
    )
    .await
}

/// Sends the task to the runtime. To stream task `streamed` (the runtime streams, and the
/// task asks for no history), asks for its events and publishes each to
/// `agent.events.<agent>.<task-token>` (core NATS, best effort) as it arrives, while the
/// answer is the Task they rebuild.
async fn relayed(
    shared: &Shared,
    payload: &Bytes,
    trace: &TraceContext,
    streamed: Option<&str>,
) -> Result<Reply, ForwardError> {
    let timeout = shared.config.task_timeout;
    let Some(task_id) = streamed else {
        return shared.forwarder.send(payload.clone(), trace, timeout).await;
    };
    let events_subject = subjects::events(&shared.config.agent, task_id);
    let (events, mut arriving) = tokio::sync::mpsc::channel::<Bytes>(RELAY_QUEUE);
    let forward = shared
        .forwarder
        .stream(payload.clone(), trace, timeout, events);
    let relay = async {
        while let Some(event) = arriving.recv().await {
            shared.metrics.events_relayed.inc();
            if let Err(e) = shared.client.publish(events_subject.clone(), event).await {
                tracing::debug!(error = %e, "a stream event could not be relayed");
            }
        }
    };
    let (reply, ()) = tokio::join!(forward, relay);
    reply
}

/// Events that may wait for the relay before the runtime's stream is read more slowly.
const RELAY_QUEUE: usize = 64;
