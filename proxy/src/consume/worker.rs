//! The consume loop: each worker holds one slot, pulls one task only when idle and the runtime
//! is up, works it to the end ([`Job`]), and pulls again. Its pulls and acks are answered on
//! one long-lived inbox ([`Inbox`]). A task that arrives while the runtime is down (a pull
//! that was already waiting) is held by its job until the runtime is back, like any other.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::Message;
use async_nats::jetstream::consumer::{Consumer, pull};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::consume::inbox::{Inbox, InboxError, PULL_GRACE, Pulled};
use crate::consume::job::Job;
use crate::consume::shared::Shared;

/// How long to back off after a failed pull request.
const PULL_ERROR_BACKOFF: Duration = Duration::from_millis(500);

/// Runs one slot until shutdown, or until its inbox fails (its supervisor starts it again).
pub async fn work(shared: Arc<Shared>, consumer: Consumer<pull::Config>) {
    let info = consumer.cached_info();
    let opened = Inbox::open(
        &shared.js,
        &shared.client,
        &info.stream_name,
        &info.name,
        PULL_GRACE,
    );
    let mut inbox = match opened.await {
        Ok(inbox) => inbox,
        Err(e) => {
            tracing::error!(error = %e, "cannot subscribe the worker's inbox");
            return;
        }
    };
    loop {
        // Pull nothing while the runtime is down.
        tokio::select! {
            () = shared.stop_pulling.cancelled() => return,
            () = shared.runtime.up() => {}
        }
        // Do not wait the pull out at shutdown: a task that lands after the worker stops
        // listening is redelivered after the ack wait.
        let pulled = tokio::select! {
            () = shared.stop_pulling.cancelled() => return,
            pulled = inbox.pull(shared.config.pull_expires) => pulled,
        };
        match pulled {
            Ok(Pulled::Task(message)) => {
                if shared.stop_pulling.is_cancelled() {
                    // Pulled as shutdown began: hand it straight to another replica.
                    hand_back(&shared, &mut inbox, message, "the proxy was shutting down").await;
                    return;
                }
                if let Some((job, intake, span)) = Job::new(&shared, &mut inbox, message) {
                    job.run(intake).instrument(span).await;
                }
            }
            Ok(Pulled::Late(message)) => {
                let why = "it arrived after its pull was given up";
                hand_back(&shared, &mut inbox, message, why).await;
            }
            Ok(Pulled::Nothing) | Err(InboxError::Timeout(_)) => {}
            Err(InboxError::Closed) => {
                tracing::error!("the worker's inbox subscription ended");
                return;
            }
            Err(e @ InboxError::Send(_)) => {
                tracing::warn!(error = %e, "pull request failed");
                pause(&shared.stop_pulling, PULL_ERROR_BACKOFF).await;
            }
            Err(
                e @ InboxError::Status {
                    status: 503 | 409, ..
                },
            ) => {
                // No responders, or "consumer deleted": the consumer may be gone.
                tracing::debug!(error = %e, "pull refused; asking for a consumer check");
                shared.consumer_state.suspect();
                pause(&shared.stop_pulling, PULL_ERROR_BACKOFF).await;
            }
            Err(e) => {
                tracing::debug!(error = %e, "pull ended with an error");
                pause(&shared.stop_pulling, PULL_ERROR_BACKOFF).await;
            }
        }
    }
}

async fn pause(stop: &CancellationToken, d: Duration) {
    tokio::select! {
        () = stop.cancelled() => {}
        () = tokio::time::sleep(d) => {}
    }
}

/// Hands a pulled task back untouched for another replica, or gives it up with a failed
/// result if this was its last delivery.
async fn hand_back(shared: &Shared, inbox: &mut Inbox, message: Message, why: &str) {
    if let Some((mut job, _, span)) = Job::new(shared, inbox, message) {
        job.hand_back(None, why).instrument(span).await;
    }
}
