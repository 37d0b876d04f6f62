//! A task the runtime refuses for a spent budget (`429` with `Retry-After`) waits in the
//! stream, not in a worker, and spends none of its deliveries:
//!
//! - the task is published again to its own subject, with its headers and two more:
//!   [`WAITING_SINCE`] (when the first refusal came) and [`RETRY_AT`] (when to try again);
//!   then the delivery in hand is acked;
//! - a delivery whose [`RETRY_AT`] is still ahead is naked with the time left as its delay
//!   (held in the worker instead, on its last delivery), and sent when it comes back;
//! - a task whose next try would come more than `BUDGET_WAIT` after its first refusal fails,
//!   saying why.
//!
//! Each copy carries a `Nats-Msg-Id` made from the copied delivery's stream sequence, so a
//! copy published twice (its ack lost) is stored once.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_nats::HeaderMap;
use async_nats::jetstream::AckKind;

use super::durable::Published;
use super::job::{Job, publish_durably};
use super::lease::{Lease, covered};
use crate::consume::disposition::Answer;
use crate::wire::headers::header;
use crate::wire::ids::Ids;

/// When the first budget refusal of the task came (Unix milliseconds).
pub(crate) const WAITING_SINCE: &str = "Daedalus-Budget-Waiting-Since";
/// When the waiting task is to be sent to the runtime again (Unix milliseconds).
pub(crate) const RETRY_AT: &str = "Daedalus-Budget-Retry-At";

fn now_ms() -> u64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

impl Job<'_> {
    /// A header of the delivery read as Unix milliseconds.
    fn instant_header(&self, name: &str) -> Option<u64> {
        header(self.message.headers.as_ref(), name)?.parse().ok()
    }

    /// How long this delivery is to wait before it is sent, if it is a budget wait's copy
    /// whose time has not come: never longer than `BUDGET_WAIT`, whatever a publisher wrote.
    pub(crate) fn budget_wait_left(&self) -> Option<Duration> {
        let at = self.instant_header(RETRY_AT)?;
        let now = now_ms();
        (at > now).then(|| Duration::from_millis(at - now).min(self.shared.config.budget_wait))
    }

    /// The delivery came back before its time: it waits the rest in the stream (naked with
    /// that delay), or in hand on its last delivery. Answers whether to send it now.
    pub(crate) async fn wait_for_its_time(&mut self, lease: &Lease, left: Duration) -> bool {
        if self.is_last_delivery() {
            tracing::info!(wait = ?left, "a task waiting for its budget is held until its time");
            covered(Some(lease), tokio::time::sleep(left)).await;
            return !lease.is_lost();
        }
        tracing::debug!(wait = ?left, "a task waiting for its budget goes back to the stream");
        self.confirm(Some(lease), AckKind::Nak(Some(left)), "nak")
            .await;
        false
    }

    /// The runtime refused the task for a spent budget: it waits `retry_after` in the stream,
    /// or fails if that would take it past `BUDGET_WAIT`.
    pub(crate) async fn wait_for_budget(
        &mut self,
        lease: &Lease,
        ids: &Ids,
        retry_after: Duration,
        reason: &str,
    ) {
        let now = now_ms();
        let since = self.instant_header(WAITING_SINCE).unwrap_or(now);
        let budget_wait = self.shared.config.budget_wait;
        let next_try = now.saturating_add(millis(retry_after));
        if next_try.saturating_sub(since) > millis(budget_wait) {
            let why = format!(
                "the runtime refused this task for a spent budget for longer than BUDGET_WAIT ({}): {reason}",
                daedalus_contract::container::format_duration(budget_wait)
            );
            tracing::warn!(
                reason,
                "a task waited past BUDGET_WAIT for its budget; it fails"
            );
            self.shared.metrics.budget_waits_given_up.inc();
            let answer = Answer::failed(ids, &why);
            self.finish(
                Some(lease),
                ids,
                answer,
                AckKind::Term,
                tokio::time::Instant::now(),
            )
            .await;
            return;
        }
        let headers = self.waiting_copy_headers(since, next_try);
        let subject = self.message.subject.to_string();
        let payload = self.message.payload.clone();
        let published = publish_durably(
            self.inbox,
            self.shared,
            Some(lease),
            &subject,
            &|| headers.clone(),
            &payload,
        )
        .await;
        if published != Published::Yes {
            // Not stored: the delivery in hand waits instead, spending one delivery.
            tracing::warn!("the waiting copy of a task was not stored; the delivery waits instead");
            self.confirm(Some(lease), AckKind::Nak(Some(retry_after)), "nak")
                .await;
            return;
        }
        tracing::info!(reason, retry_in = ?retry_after, "the runtime refused the task for a spent budget; it waits in the stream");
        if self.confirm(Some(lease), AckKind::Ack, "ack").await {
            self.shared.metrics.budget_waits.inc();
        }
    }

    /// The headers of the task's waiting copy: its own (but the budget wait's), the wait's,
    /// and a `Nats-Msg-Id` that makes a second publish of the same copy a duplicate.
    fn waiting_copy_headers(&self, since: u64, retry_at: u64) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(own) = self.message.headers.as_ref() {
            for (name, values) in own.iter() {
                let name: &str = name.as_ref();
                let ours = [WAITING_SINCE, RETRY_AT, "Nats-Msg-Id"];
                if ours.iter().any(|o| o.eq_ignore_ascii_case(name)) {
                    continue;
                }
                for value in values {
                    headers.append(name, value.as_str());
                }
            }
        }
        headers.insert(WAITING_SINCE, since.to_string().as_str());
        headers.insert(RETRY_AT, retry_at.to_string().as_str());
        headers.insert(
            "Nats-Msg-Id",
            format!("budget-wait.{}.{}", self.stream_sequence, since).as_str(),
        );
        headers
    }
}
