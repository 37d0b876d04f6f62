//! The consuming phase: started once startup is done, drained at shutdown, each as named steps.
//!
//! Drain: stop pulling (no new task is taken), let in-flight tasks finish within
//! `TERMINATION_GRACE_PERIOD`, hand back what is still unfinished, stop the helpers (health
//! watch, consumer keeper, max-deliveries watcher), and flush NATS so every ack and result
//! sent is on the wire before the process ends.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use async_nats::jetstream::consumer::{Consumer, pull};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::{ProxyConfig, StreamTasks};
use crate::consume::shared::Shared;
use crate::endpoints::Status;
use crate::forward::forwarder::Forwarder;
use crate::forward::http::HttpRuntime;
use crate::lifecycle::startup::Ready;
use crate::lifecycle::supervise;

/// How long workers may take to let go of their tasks once the grace period is over.
const ABANDON_WITHIN: Duration = Duration::from_secs(10);
/// How long the last flush to NATS may take.
const FLUSH_WITHIN: Duration = Duration::from_secs(5);

/// The proxy while it consumes: its workers and their helpers.
#[derive(Debug)]
pub struct Consuming {
    shared: Arc<Shared>,
    status: Arc<Status>,
    workers: TaskTracker,
    health_watch: JoinHandle<()>,
    keeper: JoinHandle<()>,
    advisories: JoinHandle<()>,
    stop_advisories: CancellationToken,
}

impl Consuming {
    /// Starts the helpers and `CONCURRENCY` supervised workers on the consumer startup made.
    pub fn start(
        config: ProxyConfig,
        ready: Ready,
        forwarder: Arc<dyn Forwarder>,
        runtime: HttpRuntime,
        status: Arc<Status>,
    ) -> Self {
        let Ready {
            client,
            consumer,
            streams,
        } = ready;
        let streams = streams && config.stream_tasks == StreamTasks::Auto;
        let shared = share(config, client, forwarder, streams, &status);
        shared.runtime.report_up();
        let health_watch = tokio::spawn(supervise::health_watch(
            runtime,
            Arc::clone(&shared.runtime),
            shared.config.health_interval,
            shared.stop_pulling.clone(),
        ));
        let keeper = tokio::spawn(supervise::keeper(Arc::clone(&shared)));
        let workers = start_workers(&shared, &consumer, &status);
        let stop_advisories = CancellationToken::new();
        let advisories = tokio::spawn(supervise::advisories(
            Arc::clone(&shared),
            stop_advisories.clone(),
        ));
        status.consuming.store(true, Ordering::Release);
        tracing::info!(agent = %shared.config.agent, concurrency = shared.config.concurrency, "consuming tasks");
        Self {
            shared,
            status,
            workers,
            health_watch,
            keeper,
            advisories,
            stop_advisories,
        }
    }

    /// Drains the proxy, step by step.
    pub async fn drain(self) {
        self.stop_pulling();
        self.finish_in_flight().await;
        let shared = self.stop_helpers().await;
        flush_nats(&shared.client).await;
    }

    /// No worker pulls again; `/healthz` stops reporting consuming.
    fn stop_pulling(&self) {
        let grace = self.shared.config.termination_grace_period;
        tracing::info!(?grace, "shutdown: no new pulls; finishing in-flight tasks");
        self.status.consuming.store(false, Ordering::Release);
        self.shared.stop_pulling.cancel();
    }

    /// Waits for in-flight tasks up to the grace period, then hands the rest back.
    async fn finish_in_flight(&self) {
        let grace = self.shared.config.termination_grace_period;
        if tokio::time::timeout(grace, self.workers.wait())
            .await
            .is_ok()
        {
            return;
        }
        tracing::warn!("grace period over; handing unfinished tasks back");
        self.shared.abandon.cancel();
        if tokio::time::timeout(ABANDON_WITHIN, self.workers.wait())
            .await
            .is_err()
        {
            tracing::error!("workers did not stop after the grace period");
        }
    }

    /// Stops the health watch, the consumer keeper (both stop with the pulls) and the
    /// max-deliveries watcher (last: it answers tasks given up while workers finished).
    async fn stop_helpers(self) -> Arc<Shared> {
        let _ = self.health_watch.await;
        let _ = self.keeper.await;
        self.stop_advisories.cancel();
        let _ = self.advisories.await;
        self.shared
    }
}

/// What every worker shares, made from what startup handed over.
fn share(
    config: ProxyConfig,
    client: async_nats::Client,
    forwarder: Arc<dyn Forwarder>,
    runtime_streams: bool,
    status: &Status,
) -> Arc<Shared> {
    Arc::new(Shared {
        traced: config.export_spans,
        runtime_address: daedalus_contract::telemetry::address_of(&config.runtime_url),
        config,
        js: async_nats::jetstream::new(client.clone()),
        client,
        forwarder,
        runtime_streams,
        metrics: Arc::clone(&status.metrics),
        runtime: Arc::clone(&status.runtime),
        consumer_state: Arc::clone(&status.consumer),
        stop_pulling: CancellationToken::new(),
        abandon: CancellationToken::new(),
    })
}

/// `CONCURRENCY` worker slots, each supervised.
fn start_workers(
    shared: &Arc<Shared>,
    consumer: &Consumer<pull::Config>,
    status: &Arc<Status>,
) -> TaskTracker {
    let workers = TaskTracker::new();
    status
        .workers_wanted
        .store(shared.config.concurrency, Ordering::Release);
    for _ in 0..shared.config.concurrency {
        workers.spawn(supervise::worker_slot(
            Arc::clone(shared),
            consumer.clone(),
            Arc::clone(status),
        ));
    }
    workers.close();
    workers
}

/// Flushes what is buffered for NATS (the last acks and results).
async fn flush_nats(client: &async_nats::Client) {
    if let Err(e) = tokio::time::timeout(FLUSH_WITHIN, client.flush()).await {
        tracing::warn!(error = %e, "flushing NATS timed out");
    }
}
