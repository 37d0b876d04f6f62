//! Durable turns in the task store: the turns a restart or a lost replica left running,
//! queued to be resumed ([`Resumable`]) or failed, the turns' records, and the hand-offs at
//! shutdown.

use std::sync::PoisonError;

use super::{TaskStore, backend, turn};

/// A turn left running, to be resumed: its task, the record its backend kept, and why.
#[derive(Debug, Clone)]
pub struct Resumable {
    pub task_id: String,
    /// The turn's record, as [`TaskBackend::keep_turn`] kept it (read once, when queued).
    pub record: String,
    pub cause: ResumeCause,
    /// The replica that left it running (this one before a restart, or one lost): the turn
    /// resumes only over the task as that replica left it.
    pub left_by: String,
}

/// Why a turn is resumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResumeCause {
    /// This replica restarted with the turn running.
    Restart,
    /// The replica running it was lost (its lease ran out).
    ReplicaLost,
    /// Its runtime handed it off at shutdown, when the grace ran out.
    HandOff,
}

impl ResumeCause {
    /// The cause as the metrics name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Restart => "restart",
            Self::ReplicaLost => "replica_lost",
            Self::HandOff => "hand_off",
        }
    }
}

impl TaskStore {
    /// Tasks `owner` left running with no turn of them left (this replica before a restart,
    /// a replica lost): those whose turn's record is kept are queued for the turn service to
    /// resume; the others fail, saying `why`. Answers how many failed.
    pub(crate) async fn resume_or_fail(
        &self,
        task_ids: &[String],
        why: &str,
        owner: &str,
        cause: ResumeCause,
    ) -> usize {
        let mut cut = Vec::new();
        let resuming = self.0.resuming.load(std::sync::atomic::Ordering::Relaxed);
        for task_id in task_ids {
            let record = if resuming {
                self.turn_record(task_id).await
            } else {
                None
            };
            match record {
                Some(record) => self.queue_resumable(Resumable {
                    task_id: task_id.clone(),
                    record,
                    cause,
                    left_by: owner.to_owned(),
                }),
                None => cut.push(task_id.clone()),
            }
        }
        self.fail_all(&cut, why, owner).await
    }

    /// Whether turns left running are resumed (`on`) or failed, as before durable turns
    /// (`TURN_MAX_RESUMES=0`).
    pub fn resume_turns(&self, on: bool) {
        self.0
            .resuming
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Queues a turn to be resumed here.
    pub(super) fn queue_resumable(&self, turn: Resumable) {
        self.0
            .resumable
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(turn);
        self.0.queued.notify_one();
    }

    /// The turns to be resumed here; waits until there are some.
    pub async fn next_resumable(&self) -> Vec<Resumable> {
        loop {
            let queued = std::mem::take(
                &mut *self
                    .0
                    .resumable
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner),
            );
            if !queued.is_empty() {
                return queued;
            }
            self.0.queued.notified().await;
        }
    }

    /// Fails task `task_id`, which this replica left running and does not resume, saying
    /// `why` (its turn's record goes too).
    pub async fn fail_left_running(&self, task_id: &str, why: &str) {
        if self.fail_task(task_id, why, None).await {
            self.keep_turn(task_id, None).await;
        }
    }

    /// Whether turns' records are kept beyond this process (a backend is attached).
    pub fn keeps_turns(&self) -> bool {
        self.0.persistence.get().is_some()
    }

    /// Keeps `record` (`None`: drops it) as the record of task `task_id`'s running turn, in
    /// the backend (nothing without one). A record that cannot be kept is logged: the turn
    /// goes on, and would resume from the record before.
    pub async fn keep_turn(&self, task_id: &str, record: Option<&str>) {
        let Some(p) = self.0.persistence.get() else {
            return;
        };
        if let Err(e) = p.backend.keep_turn(task_id, record).await {
            tracing::warn!(task_id, error = %e, "the turn's record could not be kept");
        }
    }

    /// The record of task `task_id`'s running turn, if the backend keeps one.
    pub async fn turn_record(&self, task_id: &str) -> Option<String> {
        let p = self.0.persistence.get()?;
        match p.backend.turn(task_id).await {
            Ok(record) => record,
            Err(e) => {
                tracing::warn!(task_id, error = %e, "the turn's record could not be read");
                None
            }
        }
    }

    /// Ends task `task_id` `failed`, saying `why`, if a turn of it still runs by the backend
    /// (and, given `owner`, that replica's): a task whose turn is gone. Answers whether this
    /// replica stored the failure.
    pub(super) async fn fail_task(&self, task_id: &str, why: &str, owner: Option<&str>) -> bool {
        let turn = self.open_turn(task_id).await;
        if turn.task().is_none() {
            return false;
        }
        // Decide on the task as the backend has it now, not as memory last heard.
        self.refresh(task_id).await;
        let Some(task) = turn.task() else {
            return false;
        };
        let ours = owner.is_none_or(|owner| turn.owner().as_deref() == Some(owner));
        if !backend::running(task.status.state) || !ours || self.is_running_here(task_id) {
            return false;
        }
        let failed = backend::failed_now(&task, why);
        let closing = vec![turn::final_update(&failed)];
        turn.end(failed, closing).await.won
    }

    /// Fails each of `task_ids` (as [`TaskStore::fail_task`], `owner`'s), a few at a time;
    /// answers how many this replica failed.
    pub(super) async fn fail_all(&self, task_ids: &[String], why: &str, owner: &str) -> usize {
        use futures::StreamExt;
        const AT_ONCE: usize = 16;
        let mut failing = futures::stream::FuturesUnordered::new();
        let mut failed = 0;
        for task_id in task_ids {
            if failing.len() >= AT_ONCE && failing.next().await == Some(true) {
                failed += 1;
            }
            let (store, task_id) = (self.clone(), task_id.clone());
            let (why, owner) = (why.to_owned(), owner.to_owned());
            failing.push(async move { store.fail_task(&task_id, &why, Some(&owner)).await });
        }
        while let Some(done) = failing.next().await {
            failed += usize::from(done);
        }
        failed
    }

    /// A task the backend says this replica runs, though no turn runs it here (an end that
    /// could not be stored when it came, a turn that stopped): its end as this replica holds
    /// it is stored now, or, if it holds none, the task fails.
    pub(super) async fn settle_leftover(&self, task_id: &str) {
        let turn = self.open_turn(task_id).await;
        let Some(me) = self.replica() else {
            return;
        };
        let still = matches!(
            self.load(task_id).await,
            Ok(Some(v)) if v.stored.is_running() && v.stored.owner == me
        );
        let Some(held) = turn.task() else {
            return;
        };
        if !still || self.is_running_here(task_id) {
            return;
        }
        if backend::running(held.status.state)
            && self.0.resuming.load(std::sync::atomic::Ordering::Relaxed)
            && self.turn_record(task_id).await.is_some()
        {
            // A turn this replica's previous run left (a restart under the same name): its
            // record is kept, and the restart queued it to resume, not to fail.
            return;
        }
        let ended = if backend::running(held.status.state) {
            backend::failed_now(&held, turn::TURN_STOPPED)
        } else {
            held
        };
        tracing::warn!(task_id, state = %ended.status.state, "storing the end of a task no turn here runs any more");
        let closing = vec![turn::final_update(&ended)];
        turn.end(ended, closing).await;
    }

    pub(super) fn is_running_here(&self, task_id: &str) -> bool {
        self.existing(task_id).is_some_and(|cell| cell.is_running())
    }

    /// Task `task_id`'s turn was handed off here (see [`TaskTurn::hand_off`]).
    pub(super) fn handed_off(&self, task_id: &str) {
        self.0
            .handed_off
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(task_id.to_owned());
    }

    /// Whether this replica handed task `task_id`'s turn off.
    pub(super) fn was_handed_off(&self, task_id: &str) -> bool {
        self.0
            .handed_off
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(task_id)
    }
}

#[cfg(test)]
mod tests {
    use super::ResumeCause;

    #[test]
    fn every_cause_has_its_series_from_the_start() {
        for cause in [
            ResumeCause::Restart,
            ResumeCause::ReplicaLost,
            ResumeCause::HandOff,
        ] {
            assert!(crate::platform::metrics::RESUME_CAUSES.contains(&cause.as_str()));
        }
    }
}
