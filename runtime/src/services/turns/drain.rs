//! Shutdown of the turn service: new turns refused, running ones given the grace period, the
//! rest canceled at their next safe point.

use std::time::Duration;

use super::CANCEL_SETTLE;
use super::service::TurnService;

impl TurnService {
    /// Refuses new turns, gives running ones `grace` to finish, then cancels the rest.
    pub async fn drain(&self, grace: Duration) {
        self.0.readiness.set_draining();
        let inflight = &self.0.inflight;
        inflight.close();
        tracing::info!(in_flight = inflight.len(), grace = ?grace, "draining");
        if tokio::time::timeout(grace, inflight.wait()).await.is_ok() {
            return;
        }
        tracing::warn!(
            in_flight = inflight.len(),
            "grace period over; canceling remaining tasks"
        );
        self.0.cancel.cancel();
        if tokio::time::timeout(CANCEL_SETTLE, inflight.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                in_flight = inflight.len(),
                "tasks did not stop after cancellation"
            );
        }
    }
}
