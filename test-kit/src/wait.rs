//! Polling for a positive signal, under a deadline.

use std::future::Future;
use std::time::Duration;

/// How often a condition is checked.
const POLL: Duration = Duration::from_millis(10);

/// Waits until `check` holds, checking every 10 ms; panics naming `what` after `within`.
pub async fn wait_until<F, Fut>(what: &str, within: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    wait_until_some(what, within, || {
        let next = check();
        async move { next.await.then_some(()) }
    })
    .await;
}

/// Waits until `check` yields a value, and returns it; panics naming `what` after `within`.
pub async fn wait_until_some<T, F, Fut>(what: &str, within: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "waited {within:?} for {what}"
        );
        tokio::time::sleep(POLL).await;
    }
}
