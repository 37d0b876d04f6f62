//! `daedalus-proxy`: the NATS JetStream sidecar of the Daedalus runtime contract.
//!
//! [`run`] starts the `/healthz` and `/metrics` endpoints on a bound listener, connects to NATS,
//! makes sure the streams and the agent's durable consumer exist, waits for the runtime to be
//! healthy and checks its card and manifest, then consumes tasks until the shutdown future
//! resolves. See DESIGN §5 for the wire protocol.

pub mod advisories;
pub mod config;
pub mod disposition;
mod durable;
pub mod endpoints;
mod headers;
pub mod inbox;
pub mod intake;
mod job;
pub mod lease;
pub mod metrics;
pub mod nats;
pub mod publish;
pub mod runtime;
pub mod subjects;
pub mod trace;
pub mod worker;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::ProxyConfig;
use crate::endpoints::{Alive, Status};
use crate::metrics::Metrics;
use crate::nats::{ConsumerSettings, NatsError};
use crate::runtime::{Forwarder, HttpRuntime, RuntimeCheckError};
use crate::worker::Shared;

/// Why the proxy stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error(transparent)]
    Nats(#[from] NatsError),
    #[error(transparent)]
    Runtime(#[from] RuntimeCheckError),
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
    let status = Arc::new(Status::new(Arc::clone(&metrics)));
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
        setup = start(&config, &runtime, &status) => setup,
        () = &mut shutdown => {
            tracing::info!("shutdown requested during startup");
            stop_http.cancel();
            return Ok(());
        }
    };
    let (client, consumer) = match setup {
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
        runtime_healthy: status.runtime_healthy.clone(),
        stop_pulling: CancellationToken::new(),
        abandon: CancellationToken::new(),
        traced: config.export_spans,
    });
    let watcher = tokio::spawn(watch_runtime(
        runtime,
        Arc::clone(&status),
        config.health_interval,
        shared.stop_pulling.clone(),
    ));
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

/// Startup: NATS, streams, consumer, runtime health, card, manifest.
async fn start(
    config: &ProxyConfig,
    runtime: &HttpRuntime,
    status: &Status,
) -> Result<
    (
        async_nats::Client,
        async_nats::jetstream::consumer::Consumer<async_nats::jetstream::consumer::pull::Config>,
    ),
    ProxyError,
> {
    let deadline = Instant::now() + config.startup_timeout;
    let name = format!("daedalus-proxy-{}", config.agent);
    let client = nats::connect(&config.nats, &name, deadline).await?;
    let _ = status.client.set(client.clone());
    let js = async_nats::jetstream::new(client.clone());
    nats::ensure_streams(&js, &config.streams).await?;
    let settings = ConsumerSettings {
        ack_wait: config.ack_wait,
        max_deliver: config.max_deliver,
    };
    let consumer = nats::ensure_consumer(&js, &config.streams, &config.agent, &settings).await?;

    let remaining = deadline.saturating_duration_since(Instant::now());
    runtime
        .wait_healthy(
            remaining,
            config.health_interval.min(Duration::from_millis(500)),
        )
        .await?;
    status.runtime_healthy.send_replace(true);
    status.metrics.runtime_healthy.set(1);
    let card = runtime.agent_card().await?;
    tracing::info!(agent_card = %card.name, skills = card.skills.len(), "agent card checked");
    if let Some(m) = runtime.check_manifest().await? {
        tracing::info!(contract = %m.contract_version, level = m.conformance_level, "runtime manifest checked");
    } else {
        tracing::info!("runtime serves no manifest; assuming contract v1");
    }
    Ok((client, consumer))
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

/// Polls the runtime's health while consuming; workers pull only while it is healthy.
async fn watch_runtime(
    runtime: HttpRuntime,
    status: Arc<Status>,
    interval: Duration,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
        let healthy = runtime.healthy().await;
        let was = status.runtime_healthy.send_replace(healthy);
        status.metrics.runtime_healthy.set(i64::from(healthy));
        if was != healthy {
            if healthy {
                tracing::info!("runtime healthy again; pulling resumes");
            } else {
                tracing::warn!("runtime unhealthy; pulling paused");
            }
        }
    }
}
