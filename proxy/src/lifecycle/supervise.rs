//! Supervision: every background task of the proxy is started again when it dies before
//! shutdown (a panic, or an unexpected end), after [`RESTART_BACKOFF`]. A dead worker is
//! counted in `worker_restarts` and, while it is down, `/healthz` does not report consuming.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::{Consumer, pull};
use tokio_util::sync::CancellationToken;

use crate::consume::shared::Shared;
use crate::consume::{advisories, keeper, worker};
use crate::endpoints::{Alive, Status};
use crate::forward::availability::RuntimeAvailability;
use crate::forward::health_watch;
use crate::forward::http::HttpRuntime;

/// How long a dead task waits before it is started again.
const RESTART_BACKOFF: Duration = Duration::from_millis(500);

/// Runs one worker slot until shutdown, starting the worker again whenever it dies.
pub async fn worker_slot(
    shared: Arc<Shared>,
    consumer: Consumer<pull::Config>,
    status: Arc<Status>,
) {
    loop {
        let alive = Alive::new(&status);
        let run = tokio::spawn({
            let shared = Arc::clone(&shared);
            let consumer = consumer.clone();
            async move {
                let _alive = alive;
                worker::work(shared, consumer).await;
            }
        });
        let ended = run.await;
        if shared.stop_pulling.is_cancelled() {
            return;
        }
        match ended {
            Err(e) if e.is_panic() => tracing::error!("a worker panicked; starting it again"),
            _ => tracing::error!("a worker stopped unexpectedly; starting it again"),
        }
        shared.metrics.worker_restarts.inc();
        if !pause(&shared.stop_pulling).await {
            return;
        }
    }
}

/// Runs the max-deliveries watcher until `stop`, starting it again whenever it dies.
pub async fn advisories(shared: Arc<Shared>, stop: CancellationToken) {
    loop {
        let run = tokio::spawn(advisories::watch_max_deliveries(
            Arc::clone(&shared),
            stop.clone(),
        ));
        match run.await {
            Ok(Ok(())) => return,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "max-deliveries watcher stopped; starting it again");
            }
            Err(_) => tracing::error!("max-deliveries watcher panicked; starting it again"),
        }
        if !pause(&stop).await {
            return;
        }
    }
}

/// Keeps the agent's consumer in place until shutdown, starting the keeper again if it dies.
pub async fn keeper(shared: Arc<Shared>) {
    let stop = shared.stop_pulling.clone();
    loop {
        let run = tokio::spawn(keeper::keep_consumer(
            shared.js.clone(),
            shared.config.clone(),
            Arc::clone(&shared.consumer_state),
            Arc::clone(&shared.metrics),
            stop.clone(),
        ));
        if run.await.is_ok() || stop.is_cancelled() {
            return;
        }
        tracing::error!("the consumer keeper panicked; starting it again");
        if !pause(&stop).await {
            return;
        }
    }
}

/// Waits [`RESTART_BACKOFF`]; `false` if `stop` fired first.
async fn pause(stop: &CancellationToken) -> bool {
    tokio::select! {
        () = stop.cancelled() => false,
        () = tokio::time::sleep(RESTART_BACKOFF) => true,
    }
}

/// Polls the runtime's health until `stop`, starting the watcher again if it dies.
pub async fn health_watch(
    runtime: HttpRuntime,
    availability: Arc<RuntimeAvailability>,
    interval: Duration,
    stop: CancellationToken,
) {
    loop {
        let run = tokio::spawn(health_watch::watch_runtime(
            runtime.clone(),
            Arc::clone(&availability),
            interval,
            stop.clone(),
        ));
        if run.await.is_ok() || stop.is_cancelled() {
            return;
        }
        tracing::error!("the runtime health watcher panicked; starting it again");
        if !pause(&stop).await {
            return;
        }
    }
}
