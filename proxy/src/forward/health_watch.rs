//! The health watcher: polls the runtime's `/health` while the proxy consumes and reports what
//! it says to [`RuntimeAvailability`]. While the runtime is down it polls every [`DOWN_POLL`]
//! at most, so held tasks go out soon after it is back.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::forward::availability::RuntimeAvailability;
use crate::forward::http::HttpRuntime;

/// How often a runtime that is down is polled, whatever `HEALTH_INTERVAL` says.
pub const DOWN_POLL: Duration = Duration::from_millis(250);

/// Polls the runtime's health every `interval` (every [`DOWN_POLL`] at most while it is
/// down) until `stop` fires.
pub async fn watch_runtime(
    runtime: HttpRuntime,
    availability: Arc<RuntimeAvailability>,
    interval: Duration,
    stop: CancellationToken,
) {
    loop {
        let wait = if availability.is_up() {
            interval
        } else {
            interval.min(DOWN_POLL)
        };
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
        match runtime.health().await {
            Ok(()) => {
                availability.report_up();
            }
            Err(e) => {
                availability.report_down(&e.to_string());
            }
        }
    }
}
