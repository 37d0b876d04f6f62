//! `daedalus-proxy`: the NATS JetStream sidecar of the Daedalus runtime contract.
//!
//! [`run`] starts the `/healthz` and `/metrics` endpoints on a bound listener, then runs
//! [`startup`]'s steps (connect to NATS, make sure the streams and the agent's durable consumer
//! exist, wait for the runtime to be healthy, check its card and manifest), each retried until
//! `STARTUP_TIMEOUT`, then consumes tasks until the shutdown future resolves. See DESIGN §5
//! for the wire protocol.

pub mod advisories;
pub mod availability;
pub mod config;
pub mod disposition;
mod durable;
pub mod endpoints;
mod headers;
pub mod inbox;
pub mod intake;
mod job;
pub mod keeper;
pub mod lease;
pub mod metrics;
pub mod nats;
pub mod publish;
pub mod runtime;
pub mod startup;
pub mod subjects;
pub mod trace;
pub mod worker;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::availability::RuntimeAvailability;
use crate::config::ProxyConfig;
use crate::endpoints::{Alive, Status};
use crate::keeper::ConsumerState;
use crate::metrics::Metrics;
use crate::nats::NatsError;
use crate::runtime::{Forwarder, HttpRuntime, RuntimeCheckError};
use crate::startup::{Ready, StartupError};
use crate::worker::Shared;

/// Why the proxy stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error(transparent)]
    Nats(#[from] NatsError),
    #[error(transparent)]
    Runtime(#[from] RuntimeCheckError),
    #[error(transparent)]
    Startup(#[from] StartupError),
}

/// Runs the sidecar until `shutdown` resolves; the endpoints listen on `listener`.
pub async fn run(
    listener: TcpListener,
    config: ProxyConfig,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ProxyError> {
    let runtime = HttpRuntime::new(&config.runtime_url);
    run_with(
        listener,
        config,
        Arc::new(runtime.clone()),
        runtime,
        shutdown,
    )
    .await
}

/// [`run`] with the forwarder seam exposed (tests swap it).
pub async fn run_with(
    listener: TcpListener,
    config: ProxyConfig,
    forwarder: Arc<dyn Forwarder>,
    runtime: HttpRuntime,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ProxyError> {
    let metrics = Arc::new(Metrics::new());
    let availability = Arc::new(RuntimeAvailability::new(
        config.runtime_down_limit,
        Arc::clone(&metrics),
    ));
    let consumer_state = Arc::new(ConsumerState::default());
    let status = Arc::new(Status::new(
        Arc::clone(&metrics),
        Arc::clone(&availability),
        Arc::clone(&consumer_state),
    ));
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(addr = %addr, "healthz and metrics listening");
    }
    let stop_http = CancellationToken::new();
    let http = tokio::spawn({
        let app = endpoints::router(Arc::clone(&status));
        let stop = stop_http.clone();
        async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(stop.cancelled_owned());
            if let Err(e) = serve.await {
                tracing::error!(error = %e, "the /healthz endpoint failed");
            }
        }
    });
    tokio::pin!(shutdown);

    let setup = tokio::select! {
        setup = startup::start(&config, &runtime, |client| {
            let _ = status.client.set(client.clone());
        }) => setup,
        () = &mut shutdown => {
            tracing::info!("shutdown requested during startup");
            stop_http.cancel();
            return Ok(());
        }
    };
    let Ready { client, consumer } = match setup {
        Ok(ready) => ready,
        Err(e) => {
            stop_http.cancel();
            return Err(e);
        }
    };
    let js = async_nats::jetstream::new(client.clone());
    let shared = Arc::new(Shared {
        config: config.clone(),
        client: client.clone(),
        js,
        forwarder,
        metrics: Arc::clone(&metrics),
        runtime: Arc::clone(&availability),
        consumer_state: Arc::clone(&consumer_state),
        stop_pulling: CancellationToken::new(),
        abandon: CancellationToken::new(),
        traced: config.export_spans,
    });
    availability.report_up();
    let watcher = tokio::spawn(watch_runtime(
        runtime,
        Arc::clone(&availability),
        config.health_interval,
        shared.stop_pulling.clone(),
    ));
    let keeper = tokio::spawn(supervise_keeper(Arc::clone(&shared)));
    let workers = TaskTracker::new();
    status
        .workers_wanted
        .store(config.concurrency, Ordering::Release);
    for _ in 0..config.concurrency {
        workers.spawn(supervise_worker(
            Arc::clone(&shared),
            consumer.clone(),
            Arc::clone(&status),
        ));
    }
    workers.close();
    let stop_advisories = CancellationToken::new();
    let advisories = tokio::spawn(supervise_advisories(
        Arc::clone(&shared),
        stop_advisories.clone(),
    ));
    status.consuming.store(true, Ordering::Release);
    tracing::info!(agent = %config.agent, concurrency = config.concurrency, "consuming tasks");

    shutdown.await;
    tracing::info!(grace = ?config.termination_grace_period, "shutdown: no new pulls; finishing in-flight tasks");
    status.consuming.store(false, Ordering::Release);
    shared.stop_pulling.cancel();
    if tokio::time::timeout(config.termination_grace_period, workers.wait())
        .await
        .is_err()
    {
        tracing::warn!("grace period over; handing unfinished tasks back");
        shared.abandon.cancel();
        if tokio::time::timeout(Duration::from_secs(10), workers.wait())
            .await
            .is_err()
        {
            tracing::error!("workers did not stop after the grace period");
        }
    }
    let _ = watcher.await;
    let _ = keeper.await;
    stop_advisories.cancel();
    let _ = advisories.await;
    if let Err(e) = tokio::time::timeout(Duration::from_secs(5), client.flush()).await {
        tracing::warn!(error = %e, "flushing NATS timed out");
    }
    stop_http.cancel();
    let _ = http.await;
    tracing::info!("proxy stopped");
    Ok(())
}

/// How long a dead worker or watcher waits before it is started again.
const RESTART_BACKOFF: Duration = Duration::from_millis(500);

/// Runs one worker slot, starting the worker again whenever it dies (a panic, or any end
/// before shutdown). While it is down, `/healthz` does not report consuming.
async fn supervise_worker(
    shared: Arc<Shared>,
    consumer: async_nats::jetstream::consumer::Consumer<
        async_nats::jetstream::consumer::pull::Config,
    >,
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
        tokio::select! {
            () = shared.stop_pulling.cancelled() => return,
            () = tokio::time::sleep(RESTART_BACKOFF) => {}
        }
    }
}

/// Runs the max-deliveries watcher, starting it again if it dies before `stop`.
async fn supervise_advisories(shared: Arc<Shared>, stop: CancellationToken) {
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
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(RESTART_BACKOFF) => {}
        }
    }
}

/// Keeps the agent's consumer in place until shutdown, starting the keeper again if it dies.
async fn supervise_keeper(shared: Arc<Shared>) {
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
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(RESTART_BACKOFF) => {}
        }
    }
}

/// How often a runtime that is down is polled, whatever `HEALTH_INTERVAL` says: held tasks go
/// out soon after it is back.
const DOWN_POLL: Duration = Duration::from_millis(250);

/// Polls the runtime's health while consuming; workers pull only while it is up. While it is
/// down, it is polled every [`DOWN_POLL`] at most.
async fn watch_runtime(
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
