//! Whether the runtime can take tasks now: up, or down since when and why. The health watcher
//! reports what `/health` says; a worker whose request never reached the runtime reports it
//! down at once, so no other worker sends it a task meanwhile. Workers pull only while it is
//! up, and a task whose runtime is down is held (its lease kept) until it is up again.
//!
//! A transition is logged once, at INFO: a proxy waiting for its runtime says so once, not
//! once per poll or per task.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::metrics::Metrics;

/// What the proxy knows of its runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Availability {
    Up,
    /// Down since `since`, for `reason` (the first one seen).
    Down {
        since: Instant,
        reason: Arc<str>,
    },
}

impl Availability {
    pub fn is_up(&self) -> bool {
        matches!(self, Availability::Up)
    }
}

/// The runtime's availability, shared by the watcher, the workers and `/healthz`.
#[derive(Debug)]
pub struct RuntimeAvailability {
    state: watch::Sender<Availability>,
    /// How long it may be down before the proxy reports not ready.
    down_limit: Duration,
    metrics: Arc<Metrics>,
}

impl RuntimeAvailability {
    /// Down ("not checked yet") until the first report says otherwise.
    pub fn new(down_limit: Duration, metrics: Arc<Metrics>) -> Self {
        Self {
            state: watch::Sender::new(Availability::Down {
                since: Instant::now(),
                reason: Arc::from("not checked yet"),
            }),
            down_limit,
            metrics,
        }
    }

    pub fn now(&self) -> Availability {
        self.state.borrow().clone()
    }

    pub fn is_up(&self) -> bool {
        self.state.borrow().is_up()
    }

    /// The runtime answered `/health` with 200. Returns whether it was down.
    pub fn report_up(&self) -> bool {
        let mut was = None;
        self.state.send_if_modified(|state| match state {
            Availability::Up => false,
            Availability::Down { since, .. } => {
                was = Some(since.elapsed());
                *state = Availability::Up;
                true
            }
        });
        self.metrics.runtime_healthy.set(1);
        if let Some(down_for) = was {
            tracing::info!(down_for = ?down_for, "the runtime is healthy; pulling resumes");
        }
        was.is_some()
    }

    /// The runtime cannot take tasks, for `reason`. Returns whether it was up (the first
    /// report of an outage is logged; the rest keep its start and reason).
    pub fn report_down(&self, reason: &str) -> bool {
        let changed = self.state.send_if_modified(|state| match state {
            Availability::Down { .. } => false,
            Availability::Up => {
                *state = Availability::Down {
                    since: Instant::now(),
                    reason: Arc::from(reason),
                };
                true
            }
        });
        self.metrics.runtime_healthy.set(0);
        if changed {
            self.metrics.runtime_outages.inc();
            tracing::info!(%reason, "waiting for the runtime; pulling paused, tasks in hand are held");
        }
        changed
    }

    /// Resolves once the runtime is up (at once if it is).
    pub async fn up(&self) {
        let mut seen = self.state.subscribe();
        // The sender lives as long as `self`: `wait_for` cannot fail while we borrow it.
        let _ = seen.wait_for(Availability::is_up).await;
    }

    /// When the current outage passes the down limit (`None` while up).
    pub fn limit_reached_at(&self) -> Option<Instant> {
        match &*self.state.borrow() {
            Availability::Up => None,
            Availability::Down { since, .. } => Some(*since + self.down_limit),
        }
    }

    /// Why the proxy is not ready because of its runtime: down for longer than the limit.
    pub fn not_ready_because(&self) -> Option<String> {
        match &*self.state.borrow() {
            Availability::Down { since, reason } if since.elapsed() >= self.down_limit => {
                Some(format!(
                    "the runtime has been down for {}s (RUNTIME_DOWN_LIMIT {}): {reason}",
                    since.elapsed().as_secs(),
                    daedalus_contract::container::format_duration(self.down_limit)
                ))
            }
            _ => None,
        }
    }

    pub fn down_limit(&self) -> Duration {
        self.down_limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn availability(limit: Duration) -> RuntimeAvailability {
        RuntimeAvailability::new(limit, Arc::new(Metrics::new()))
    }

    #[tokio::test(start_paused = true)]
    async fn an_outage_keeps_its_first_start_and_reason_and_ends_once() {
        let runtime = availability(Duration::from_secs(30));
        assert!(!runtime.is_up(), "down until checked");
        assert!(runtime.report_up());
        assert!(!runtime.report_up(), "already up");
        assert!(runtime.report_down("connection refused"));
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(
            !runtime.report_down("/health answered 503"),
            "the same outage"
        );
        match runtime.now() {
            Availability::Down { reason, since } => {
                assert_eq!(&*reason, "connection refused");
                assert_eq!(since.elapsed(), Duration::from_secs(10));
            }
            Availability::Up => panic!("down"),
        }
        assert_eq!(runtime.metrics.runtime_outages.get(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn the_proxy_is_not_ready_only_past_the_down_limit() {
        let runtime = availability(Duration::from_secs(30));
        runtime.report_up();
        runtime.report_down("connection refused");
        assert_eq!(runtime.not_ready_because(), None, "a short outage");
        tokio::time::advance(Duration::from_secs(31)).await;
        let why = runtime.not_ready_because().expect("past the limit");
        assert!(why.contains("down for 31s"), "{why}");
        assert!(why.contains("connection refused"), "{why}");
        runtime.report_up();
        assert_eq!(runtime.not_ready_because(), None);
    }

    #[tokio::test]
    async fn waiting_for_the_runtime_ends_when_it_is_up() {
        let runtime = Arc::new(availability(Duration::from_secs(30)));
        let waiting = tokio::spawn({
            let runtime = Arc::clone(&runtime);
            async move { runtime.up().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        runtime.report_up();
        waiting.await.expect("the wait ends");
    }
}
