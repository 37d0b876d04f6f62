//! A task's lease: confirmed progress acks every third of the ack wait keep the message ours.
//! If no progress ack has been confirmed for nine tenths of the ack wait, the server is about to
//! hand the message to another replica: the lease is lost, and the worker must stop and publish
//! nothing (the server would accept our late ack anyway, nats-server #4786). Dropping a lease
//! always stops its heartbeat.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{AckKind, Message};
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

/// The heartbeat of one in-flight task.
#[derive(Debug)]
pub struct Lease {
    lost: CancellationToken,
    stop: CancellationToken,
    heartbeat: tokio::task::JoinHandle<()>,
}

impl Lease {
    /// Starts renewing the lease of `message`, delivered `ack_wait` ago at most.
    pub fn start(message: Arc<Message>, ack_wait: Duration) -> Self {
        let lost = CancellationToken::new();
        let stop = CancellationToken::new();
        let heartbeat = tokio::spawn(beat(message, ack_wait, lost.clone(), stop.clone()));
        Self {
            lost,
            stop,
            heartbeat,
        }
    }

    /// Resolves when the lease is lost.
    pub fn lost(&self) -> WaitForCancellationFuture<'_> {
        self.lost.cancelled()
    }

    pub fn is_lost(&self) -> bool {
        self.lost.is_cancelled()
    }

    /// Stops the heartbeat and waits for it to end.
    pub async fn release(mut self) {
        self.stop.cancel();
        let _ = (&mut self.heartbeat).await;
    }
}

impl Drop for Lease {
    /// A lease dropped without [`Lease::release`] (its worker panicked or was cancelled) stops
    /// its heartbeat too: nothing keeps progress-acking a task nobody works on.
    fn drop(&mut self) {
        self.stop.cancel();
        self.heartbeat.abort();
    }
}

async fn beat(
    message: Arc<Message>,
    ack_wait: Duration,
    lost: CancellationToken,
    stop: CancellationToken,
) {
    let period = ack_wait / 3;
    let deadline_after_confirm = ack_wait.mul_f32(0.9);
    let mut last_confirmed = Instant::now();
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(period) => {}
        }
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
    }
}
