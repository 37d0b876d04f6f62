//! Delivery: each state the task store keeps, queued for each webhook of its task
//! ([`super::queues`]) and delivered in order by one worker per webhook, with the counts,
//! logs and health that say what came of it.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use daedalus_contract::write::a2a_v1;
use daedalus_contract::{StreamEvent, Task};

use super::queues::{Enqueued, Owner, Payload, Pending, QueueKey, TASK_BYTES};
use super::send::{Delivery, Target};
use super::{Failure, Inner, guard, lock};
use crate::platform::identity::Caller;
use crate::stores::push::Webhook;

impl Inner {
    /// Task `task` was stored at `revision`: queues it for each webhook that has not taken
    /// it (`owed`: only those whose record says they are behind). Answers how many.
    pub(super) fn stored(self: &Arc<Self>, task: &Task, revision: u64, owed: bool) -> usize {
        let (webhooks, tenant): (Vec<Webhook>, Option<String>) =
            match lock(&self.book).get(&task.id) {
                Some(entry) => (
                    entry
                        .record
                        .webhooks
                        .iter()
                        .filter(|w| !owed || w.delivered < revision)
                        .cloned()
                        .collect(),
                    entry
                        .record
                        .principal
                        .as_ref()
                        .and_then(|p| p.tenant.clone()),
                ),
                None => return 0,
            };
        if webhooks.is_empty() {
            return 0;
        }
        let body = webhook_body(task.clone());
        let mut queued = 0;
        for webhook in webhooks {
            let url = match guard::check_url(&webhook.config.url, &self.settings.allow) {
                Ok(url) => url,
                // Kept from a run that allowed it (PUSH_ALLOW_HOSTS changed): not called now.
                Err(refused) => {
                    self.gave_up(
                        &task.id,
                        &webhook.config.id,
                        "(refused)",
                        refused.to_string(),
                    );
                    continue;
                }
            };
            let target = Target {
                url,
                token: webhook.config.token.clone(),
                authentication: webhook.config.authentication.clone(),
            };
            let key = (task.id.clone(), webhook.config.id.clone());
            let shown = target.shown();
            let owner = Owner {
                host: shown.clone(),
                tenant: tenant.clone(),
            };
            let enqueued =
                lock(&self.queues).push(&key, target, owner, Pending::body(revision, body.clone()));
            self.count_enqueued(&key, &shown, &enqueued);
            if enqueued.given_up {
                continue;
            }
            if enqueued.start && !self.stop.is_cancelled() {
                let this = Arc::clone(self);
                self.workers.spawn(async move { this.drain(key).await });
            }
            queued += 1;
        }
        queued
    }

    /// Counts (and logs) what queuing a state for `webhook` did beyond queuing it.
    fn count_enqueued(&self, key: &QueueKey, shown: &str, enqueued: &Enqueued) {
        self.superseded(enqueued.superseded);
        if enqueued.owed > 0 {
            self.counts
                .owed
                .fetch_add(enqueued.owed as u64, Ordering::Relaxed);
            self.count("owed", enqueued.owed as u64);
            tracing::debug!(
                task_id = key.0,
                webhook = key.1,
                owed = enqueued.owed,
                "push: states no longer wait with their bodies (the queue's bytes, or a fair share of them, are held); their webhooks get their tasks as they stand when their turn comes"
            );
        }
        if enqueued.given_up {
            self.counts.dropped.fetch_add(1, Ordering::Relaxed);
            self.count("dropped", 1);
            self.gave_up(
                &key.0,
                &key.1,
                shown,
                format!(
                    "the push queue is full of markers of states owed (PUSH_QUEUE_BYTES {} bytes, at most {} per task): this state of the task is not delivered",
                    self.settings.queue_bytes,
                    TASK_BYTES
                ),
            );
        }
    }

    /// Delivers what waits for one webhook, in order, until nothing does. A state is taken
    /// from the queue only once its host's permit is held, so what waits for a host that is
    /// slow stays in the queue, where it can become a marker.
    async fn drain(self: Arc<Self>, key: QueueKey) {
        loop {
            let Some((_, host)) = lock(&self.queues).next(&key) else {
                return;
            };
            let Ok(_permit) = host.acquire_owned().await else {
                return;
            };
            let Some((target, pending)) = lock(&self.queues).take(&key) else {
                return;
            };
            let Some((body, revision)) = self.body_of(&key, &target, pending).await else {
                lock(&self.queues).done(&key, 0);
                continue;
            };
            let retrying = || {
                self.counts.retried.fetch_add(1, Ordering::Relaxed);
                self.count("retried", 1);
            };
            let delivery = self
                .sender
                .deliver(&target, &body, &self.stop, &retrying)
                .await;
            lock(&self.queues).done(&key, body.len());
            match delivery {
                Delivery::Stopped => return,
                Delivery::Delivered => {
                    self.counts.delivered.fetch_add(1, Ordering::Relaxed);
                    self.count("delivered", 1);
                    self.took(&key, revision).await;
                }
                Delivery::GaveUp { why } => self.gave_up(&key.0, &key.1, &target.shown(), why),
            }
        }
    }

    /// The body to deliver for `pending`, the head of `key` in delivery, and the revision it
    /// stands at. A state owed as the task stands is read now: from this replica's memory
    /// while it holds the task's latest write (what waited behind is then held by this read,
    /// and dropped), else from the store. `None` (given up, counted) when the task is no
    /// longer kept.
    async fn body_of(
        &self,
        key: &QueueKey,
        target: &Target,
        pending: Pending,
    ) -> Option<(Bytes, u64)> {
        match pending.payload {
            Payload::Body(body) => return Some((body, pending.revision)),
            Payload::AsItStands => {}
        }
        let held = {
            let mut queues = lock(&self.queues);
            let held = self.tasks.written_here(&key.0);
            if held.is_some() {
                let superseded = queues.supersede_waiting(key);
                drop(queues);
                self.superseded(superseded);
            }
            held
        };
        let (body, revision) = if let Some((task, revision)) = held {
            (webhook_body(task), revision.max(pending.revision))
        } else {
            let Some(task) = self.tasks.find(&key.0, &Caller::Anyone).await else {
                self.gave_up(
                    &key.0,
                    &key.1,
                    &target.shown(),
                    "the task is no longer kept, so the state owed to the webhook cannot be read"
                        .to_owned(),
                );
                return None;
            };
            (webhook_body(task), pending.revision)
        };
        lock(&self.queues).read_back(body.len());
        Some((body, revision))
    }

    /// A state of task `task_id` was not delivered to its webhook `config_id` (at `shown`):
    /// counted, logged and shown in `/healthz`.
    pub(super) fn gave_up(&self, task_id: &str, config_id: &str, shown: &str, why: String) {
        self.counts.gave_up.fetch_add(1, Ordering::Relaxed);
        self.count("gave_up", 1);
        tracing::warn!(
            task_id,
            webhook = config_id,
            url = shown,
            error = why,
            "push: a state of the task was not delivered to its webhook; given up"
        );
        *lock(&self.last_failure) = Some(Failure {
            task_id: task_id.to_owned(),
            webhook: shown.to_owned(),
            why,
            at: chrono::Utc::now().to_rfc3339(),
        });
    }

    /// The webhook `key` took the state stored at `revision`: its record says so (where the
    /// store keeps revisions), so a restart does not send it again.
    async fn took(&self, key: &QueueKey, revision: u64) {
        if revision == 0 || self.backend.get().is_none() {
            return;
        }
        let result = self
            .change(&key.0, None, |record| {
                if let Some(w) = record.webhooks.iter_mut().find(|w| w.config.id == key.1) {
                    w.delivered = w.delivered.max(revision);
                }
                Ok(())
            })
            .await;
        if let Err(e) = result {
            tracing::warn!(
                task_id = key.0,
                error = %e,
                "push: the delivery could not be recorded; a restart may send it again"
            );
        }
    }

    /// `n` waiting states were replaced by a later state of their task (which holds them).
    fn superseded(&self, n: usize) {
        if n > 0 {
            self.counts
                .superseded
                .fetch_add(n as u64, Ordering::Relaxed);
            self.count("superseded", n as u64);
        }
    }

    fn count(&self, outcome: &'static str, n: u64) {
        if n > 0 {
            self.metrics
                .push_deliveries
                .get_or_create(&crate::platform::metrics::OutcomeLabel { outcome })
                .inc_by(n);
        }
    }
}

/// What a webhook is sent for `task`: an A2A `StreamResponse` holding the task as it stands,
/// its history left out.
fn webhook_body(mut task: Task) -> Bytes {
    task.history = None;
    Bytes::from(a2a_v1::to_value(&StreamEvent::Task(task)).to_string())
}
