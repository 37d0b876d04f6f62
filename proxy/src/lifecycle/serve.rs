//! [`run`], start to end: serve the endpoints, start up, consume until the shutdown future
//! resolves, drain, stop the endpoints. Each step is a short function or type of its own.

use std::future::Future;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::ProxyConfig;
use crate::consume::keeper::ConsumerState;
use crate::endpoints::{self, Status};
use crate::error::ProxyError;
use crate::forward::availability::RuntimeAvailability;
use crate::forward::forwarder::Forwarder;
use crate::forward::http::HttpRuntime;
use crate::lifecycle::consuming::Consuming;
use crate::lifecycle::startup::{self, Ready};
use crate::metrics::Metrics;

/// Runs the sidecar until `shutdown` resolves; the endpoints listen on `listener`.
pub async fn run(
    listener: TcpListener,
    config: ProxyConfig,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ProxyError> {
    let runtime = HttpRuntime::for_config(&config);
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
    let status = health_status(&config);
    let endpoints = Endpoints::serve(listener, &status);
    tokio::pin!(shutdown);
    let ready = tokio::select! {
        ready = start_up(&config, &runtime, &status) => ready,
        () = &mut shutdown => {
            tracing::info!("shutdown requested during startup");
            endpoints.stop().await;
            return Ok(());
        }
    };
    let ready = match ready {
        Ok(ready) => ready,
        Err(e) => {
            endpoints.stop().await;
            return Err(e);
        }
    };
    let consuming = Consuming::start(config, ready, forwarder, runtime, Arc::clone(&status));
    shutdown.await;
    consuming.drain().await;
    endpoints.stop().await;
    tracing::info!("proxy stopped");
    Ok(())
}

/// What `/healthz` and `/metrics` report on, made before anything else so they answer from
/// the first moment (503 until consuming).
fn health_status(config: &ProxyConfig) -> Arc<Status> {
    let metrics = Arc::new(Metrics::new());
    let availability = Arc::new(RuntimeAvailability::new(
        config.runtime_down_limit,
        Arc::clone(&metrics),
    ));
    Arc::new(Status::new(
        metrics,
        availability,
        Arc::new(ConsumerState::default()),
    ))
}

/// Startup's steps; the NATS connection is shown on `/healthz` as soon as it is made.
async fn start_up(
    config: &ProxyConfig,
    runtime: &HttpRuntime,
    status: &Status,
) -> Result<Ready, ProxyError> {
    startup::start(config, runtime, |client| {
        let _ = status.client.set(client.clone());
    })
    .await
}

/// `/healthz` and `/metrics`, served until [`Endpoints::stop`].
#[derive(Debug)]
struct Endpoints {
    stop: CancellationToken,
    serving: JoinHandle<()>,
}

impl Endpoints {
    fn serve(listener: TcpListener, status: &Arc<Status>) -> Self {
        if let Ok(addr) = listener.local_addr() {
            tracing::info!(addr = %addr, "healthz and metrics listening");
        }
        let stop = CancellationToken::new();
        let app = endpoints::router(Arc::clone(status));
        let graceful = stop.clone().cancelled_owned();
        let serving = tokio::spawn(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(graceful);
            if let Err(e) = serve.await {
                tracing::error!(error = %e, "the /healthz endpoint failed");
            }
        });
        Self { stop, serving }
    }

    async fn stop(self) {
        self.stop.cancel();
        let _ = self.serving.await;
    }
}
