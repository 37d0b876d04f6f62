//! A task's lease: confirmed progress acks every third of the ack wait keep the message ours.
//! If no progress ack has been confirmed for nine tenths of the ack wait, the server is about to
//! hand the message to another replica: the lease is lost, and the worker must stop and publish
//! nothing (the server would accept our late ack anyway, nats-server #4786). Dropping a lease
//! always stops its heartbeat.
//!
//! The heartbeat starts lazily (see [`Lease::covering`]): most tasks end before their first
//! progress ack is due.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_nats::jetstream::{AckKind, Message};
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

/// The lease of one in-flight task. Its heartbeat starts lazily: only work that is still
/// running when the first progress ack is due (a third of the ack wait after delivery) starts
/// it, so a task that finishes sooner costs no task and no timer beyond its own.
#[derive(Debug)]
pub struct Lease {
    message: Arc<Message>,
    ack_wait: Duration,
    delivered: Instant,
    lost: CancellationToken,
    heartbeat: Mutex<Option<Heartbeat>>,
}

#[derive(Debug)]
struct Heartbeat {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Lease {
    /// The lease of `message`, delivered just now (its ack wait is `ack_wait`).
    pub fn new(message: Arc<Message>, ack_wait: Duration) -> Self {
        Self {
            message,
            ack_wait,
            delivered: Instant::now(),
            lost: CancellationToken::new(),
            heartbeat: Mutex::new(None),
        }
    }

    /// Runs `work`, starting the heartbeat if `work` is still running when the first progress
    /// ack is due.
    pub async fn covering<F: Future>(&self, work: F) -> F::Output {
        let mut work = std::pin::pin!(work);
        if !self.beating() {
            let first_beat = self.delivered + self.ack_wait / 3;
            tokio::select! {
                biased;
                out = &mut work => return out,
                () = tokio::time::sleep_until(first_beat) => self.start_heartbeat(),
            }
        }
        work.await
    }

    fn beating(&self) -> bool {
        self.heartbeat
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    fn start_heartbeat(&self) {
        let mut heartbeat = self
            .heartbeat
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if heartbeat.is_none() {
            let stop = CancellationToken::new();
            let task = tokio::spawn(beat(
                Arc::clone(&self.message),
                self.ack_wait,
                self.delivered,
                self.lost.clone(),
                stop.clone(),
            ));
            *heartbeat = Some(Heartbeat { stop, task });
        }
    }

    /// Resolves when the lease is lost.
    pub fn lost(&self) -> WaitForCancellationFuture<'_> {
        self.lost.cancelled()
    }

    pub fn is_lost(&self) -> bool {
        self.lost.is_cancelled()
    }

    /// Stops the heartbeat, if it started, and waits for it to end.
    pub async fn release(self) {
        if let Some(task) = self.stop_heartbeat() {
            let _ = task.await;
        }
    }

    /// Tells the heartbeat, if it started, to stop; its task, to await or abort.
    fn stop_heartbeat(&self) -> Option<tokio::task::JoinHandle<()>> {
        let heartbeat = self
            .heartbeat
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()?;
        heartbeat.stop.cancel();
        Some(heartbeat.task)
    }
}

/// Runs `work` under `lease` when there is one.
pub async fn covered<F: Future>(lease: Option<&Lease>, work: F) -> F::Output {
    match lease {
        Some(lease) => lease.covering(work).await,
        None => work.await,
    }
}

impl Drop for Lease {
    /// A lease dropped without [`Lease::release`] (its worker panicked or was cancelled) stops
    /// its heartbeat too: nothing keeps progress-acking a task nobody works on.
    fn drop(&mut self) {
        if let Some(task) = self.stop_heartbeat() {
            task.abort();
        }
    }
}

/// Progress-acks from the first beat on (due now), every third of the ack wait.
async fn beat(
    message: Arc<Message>,
    ack_wait: Duration,
    delivered: Instant,
    lost: CancellationToken,
    stop: CancellationToken,
) {
    let period = ack_wait / 3;
    let deadline_after_confirm = ack_wait.mul_f32(0.9);
    let mut last_confirmed = delivered;
    loop {
        // Wait for the confirmation as long as the lease can still be saved, not just a period:
        // on a loaded machine a confirmation may take longer than a third of the ack wait.
        let budget = deadline_after_confirm
            .saturating_sub(last_confirmed.elapsed())
            .max(period);
        let attempt = tokio::time::timeout(budget, message.double_ack_with(AckKind::Progress));
        match attempt.await {
            Ok(Ok(())) => last_confirmed = Instant::now(),
            Ok(Err(e)) => tracing::warn!(error = %e, "progress ack not confirmed"),
            Err(_) => tracing::warn!("progress ack confirmation timed out"),
        }
        if last_confirmed.elapsed() >= deadline_after_confirm {
            tracing::error!(
                unconfirmed_for = ?last_confirmed.elapsed(),
                "lease lost: progress acks unconfirmed for most of the ack wait; abandoning the task"
            );
            lost.cancel();
            return;
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(period) => {}
        }
    }
}
